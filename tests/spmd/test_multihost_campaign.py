"""A 2-host campaign end to end (`accelerator.hosts: 2`): the engine starts the host group
itself on loopback, every partitioned program also runs on 2 processes x 2 devices, and a
collective fault that only one host compiles is a `hang` of that layout alone, localized to
the collective the host left out. No host process outlives the campaign."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from xla_sentinel.bisect import graph, regions, reproduce
from xla_sentinel.bisect.pipeline import bisected_on, open_context, run_stage
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel.xla.faults import fault_path

# Seed 5's program s5-i1 holds cross-host all-reduces (measured: 5 collectives, all across).
SPEC = {"seed": 5, "generator": {"devices": 4, "sharded": 1.0, "maxOps": 6},
        "targets": ["default"], "references": ["f64_numpy", "eager"], "accelerator": {"hosts": 2},
        "budget": {"programs": 3}, "workers": 1, "timeouts": {"programSeconds": 15},
        "bisect": {"enabled": False}}


def _host_children() -> list[int]:
    """This process's children that are host processes (worker/host.py)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"xla_sentinel.worker.host" in cmdline:
            found.append(int(stat.parent.name))
    return found


def finding_module_region(finding: Path, head: str) -> str:
    """The text of the op of the finding's module that starts with `head` (its value and
    op name), region included: up to the next line at the op's own indentation."""
    lines = (finding / "program" / "module.mlir").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(head))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next((i for i in range(start + 1, len(lines))
                if len(lines[i]) - len(lines[i].lstrip()) <= indent), len(lines))
    return "\n".join(lines[start:end])


def test_a_collective_one_host_leaves_out_is_a_hang_of_the_layout_alone(tmp_path: Path) -> None:
    summary = run_campaign(parse_spec(SPEC), tmp_path, inject_passes=[fault_path("allreduce_skipped_on_one_host")])

    records = [json.loads(p.read_text()) for p in (tmp_path / "findings").glob("*/finding.json")]
    assert [t["name"] for t in summary["targets"]] == ["default", "hosts2x2"]
    assert summary["program_status"] == {"judged": 3}
    assert [(r["program"], r["target"], r["verdict"]) for r in records] == [("s5-i1", "hosts2x2", "hang")]
    error = records[0]["evidence"]["error"]
    assert "host 1 compiled without all-reduce" in error, error
    assert "across hosts" in error and "the group is restarted" in error
    layout = summary["multihost"]
    assert (layout["layout"], layout["hosts"], layout["devices_per_host"]) == ("hosts2x2", 2, 2)
    # The two other programs ran on the group; the hung one restarted it, once.
    assert (layout["programs"], layout["group_restarts"]) == (2, 1)
    assert 0 <= layout["cross_host_programs"] <= 2
    assert json.loads((tmp_path / "summary.json").read_text())["multihost"] == layout
    assert _host_children() == []
    assert (tmp_path / "logs" / "hosts2x2-host1.log").exists()

    # Bisected where it fails: every cut compiled and run on 2 host processes in lockstep
    # (on one process the hang does not reproduce at all). The graph stage stops at the
    # manual computation whose region holds the all-reduce host 1 compiled without; the
    # regions stage follows the hang into it, to the all-reduce. The stages after it
    # (passes, bundle) cost a hang probe per try and are left out here.
    (finding,) = (tmp_path / "findings").glob("*/")
    ctx = open_context(finding, timeout=60, hang_probe_s=15)
    try:
        reproduced = run_stage(ctx, reproduce)
        located = run_stage(ctx, graph)
        inside = run_stage(ctx, regions)
    finally:
        ctx.lab.close()
    assert bisected_on(ctx.record, ctx.lab) == "2 processes x 2 devices, in lockstep (hosts2x2)"
    assert (reproduced["fails"], reproduced["verdict"]) == (True, "hang")
    assert "bisect-hosts2x2: no answer" in reproduced["error"]
    assert "sdy.manual_computation" in located["op_text"], located
    region = located["op_text"].split(" in_shardings")[0]
    assert "all_reduce" in finding_module_region(finding, region), region

    # Inside the region, no value is wrong: the prefixes of its ops are asked whether they
    # still hang. The shortest that hangs ends at the all-reduce (the ops after a prefix are
    # dead, and XLA drops a dead collective), found by a binary search over the prefixes.
    assert inside["found_by"] == "hang", inside
    assert "stablehlo.all_reduce" in inside["op_text"] and inside["inner_op"].startswith("all_reduce ("), inside
    assert re.fullmatch(r"main/manual_computation#\d+/body/all_reduce#\d+", inside["culprit_path"]), inside
    assert ctx.culprit_name() == inside["inner_op"] and "all_reduce" in str(ctx.inner_text)
    trail = inside["trail"]
    assert all("hangs" in t and "fails" not in t for t in trail), trail  # no value compared
    assert trail[0] == {"path": [[0, 0]], "exposed": "arguments", "hangs": False}, trail  # the control
    hung = [t["exposed"] for t in trail[1:] if t["hangs"]]
    finished = [t["exposed"] for t in trail[1:] if not t["hangs"]]
    (total,) = {t["of"] for t in trail[1:]}
    assert hung[0] == total and min(hung) == max(finished, default=0) + 1, trail
    assert inside["probes"] == len(trail) <= 2 + total.bit_length(), trail
    assert _host_children() == []


@pytest.mark.parametrize(("accelerator", "generator", "message"), [
    ({"hosts": 3}, {"devices": 4}, "must divide generator.devices"),
    ({"hosts": 0}, {}, "between 1 and 8"),
    ({"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x4", "hosts": 2}, {},
     "come from tpuTopology"),
])
def test_hosts_must_fit_the_devices(accelerator, generator, message) -> None:
    with pytest.raises(SpecError, match=message):
        parse_spec({"accelerator": accelerator, "generator": generator})
