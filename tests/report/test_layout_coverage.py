"""The process layouts a campaign's programs were drawn for (`1x4`: one process over 4
devices, `1x1`: unsharded) and ran on (`hosts2x2`: the multi-host layout's group), and how
many of those held a collective across hosts, in `xla-sentinel report` and on its page
(campaign/coverage.py layout_programs, report/tables.py). A real 2-host campaign on this
CPU (gloo between its two host processes)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from xla_sentinel.campaign import coverage
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.report import tables
from xla_sentinel.spec.campaign import parse_spec

SPEC = {
    "seed": 5,
    "generator": {"devices": 4, "sharded": 0.5, "maxOps": 6},
    "targets": ["default"],
    "references": ["f64_numpy"],
    "accelerator": {"hosts": 2},
    "budget": {"programs": 6},
    "workers": 1,
    "timeouts": {"programSeconds": 60},
    "bisect": {"enabled": False},
}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("layouts")
    run_campaign(parse_spec(SPEC), out)
    return out


def test_the_report_counts_programs_per_layout_and_those_across_hosts(campaign: Path) -> None:
    summary = json.loads((campaign / "summary.json").read_text())
    multihost = summary["multihost"]
    data = tables.collect(campaign)
    layouts = data["layouts"]

    # Every program has its one-process layout; seed 5's six hold both kinds.
    drawn = {k: v for k, v in layouts.items() if k.startswith("1x")}
    assert set(drawn) == {"1x1", "1x4"} and sum(drawn.values()) == summary["programs"] == 6
    assert summary["coverage"]["layouts"] == drawn  # summary.json's coverage has the section too
    # The group ran exactly the programs partitioned over its 2 x 2 devices: it answered
    # for each, but for one that failed there (a hang on this loaded machine), which it
    # does not count.
    assert layouts["hosts2x2"] == drawn["1x4"]
    con = sqlite3.connect(campaign / "campaign.sqlite")
    try:
        (failed,) = con.execute(
            "SELECT COUNT(DISTINCT program) FROM findings WHERE target = 'hosts2x2' "
            "AND verdict IN ('hang', 'crash', 'compile_error')"
        ).fetchone()
    finally:
        con.close()
    assert layouts["hosts2x2"] == multihost["programs"] + failed

    text = tables.render(data)
    assert "### Process layouts (programs)" in text
    assert f"| hosts2x2 | {multihost['programs']} |" in text
    assert (
        f"Programs with a collective across hosts on hosts2x2: {multihost['cross_host_programs']} "
        f"of the {multihost['programs']} that ran on its group"
    ) in text
    page = tables.page_data(campaign)
    assert (
        page.tables["Process layouts (programs)"]["hosts2x2: a collective across hosts"]
        == multihost["cross_host_programs"]
    )


def test_layouts_of_a_store_without_them_come_from_the_targets_that_compiled() -> None:
    """Programs stored before `layouts` was recorded: the layout's target counts where it
    compiled (a program skipped there has compile time 0); the one-process layout is unknown."""
    old = [
        {"coverage": {"ops": {"add": 1}}, "compile_s": {"default": 0.5, "hosts2x2": 0.9}},
        {"coverage": {"ops": {"add": 1}}, "compile_s": {"default": 0.4, "hosts2x2": 0.0}},
        {},
    ]
    assert coverage.layout_programs(old) == {"hosts2x2": 1}
    new = [
        {"coverage": {"layouts": ["1x4"]}, "compile_s": {"default": 0.5, "hosts2x2": 0.0}},
        {"coverage": {"layouts": ["1x1"]}, "compile_s": {"default": 0.4, "hosts2x2": 0.0}},
        {"coverage": {"layouts": ["1x4"]}, "compile_s": {"default": 0.4, "hosts2x2": 0.7}},
    ]
    # Drawn for the layout's devices: it ran there, even where its compile took no time
    # (a hang or crash on the group); an unsharded one never does.
    assert coverage.layout_programs(new) == {"1x4": 2, "hosts2x2": 2, "1x1": 1}


def test_a_module_s_layout_is_its_partition_count() -> None:
    head = (
        "module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {\n}"
    )
    assert coverage.process_layout(head) == "1x4"
    assert coverage.process_layout("module @jit_f {\n}") == "1x1"
    assert coverage.process_layout(b"ML\xefR") == "1x1"  # bytecode: not read
