"""Buffer verdicts through whole local campaigns: real XLA compiles in worker processes,
findings, signatures and bisection as for the other verdicts.

What is injected: the runtime faults of xla/buffers.py (XLA_SENTINEL_BUFFER_FAULT, read by
the worker processes the campaign starts; references never run the checks), not XLA
passes: no HLO pass makes XLA:CPU write into a caller's buffer (test_checks.py). A fault
that fires after every execution fires on every program and target, so the findings
count is exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.xla.buffers import FAULT_ENV

BASE = {"seed": 3, "generator": {"version": 1, "minOps": 2, "maxOps": 4, "dtypes": ["f32", "s32"], "shapes": ["buffers"]},
        "targets": ["default", "O0"], "references": ["f64_numpy", "eager"], "workers": 1,
        "bisect": {"enabled": False}}


def _findings(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("findings/*/finding.json"))]


def test_a_clean_buffers_campaign_has_no_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    summary = run_campaign(parse_spec({**BASE, "budget": {"programs": 12}}), tmp_path)
    assert summary["programs"] == 12
    assert summary["findings"] == {}


def test_an_input_written_by_the_run_is_input_clobbered_and_localized(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "input_alias")
    spec = parse_spec({**BASE, "targets": ["default"], "bisect": {"enabled": True},
                       "budget": {"programs": 1}})
    summary = run_campaign(spec, tmp_path)
    assert summary["findings"] == {"input_clobbered": 1}
    [finding] = _findings(tmp_path)
    ev = finding["evidence"]
    assert ev["reason"] == "buffers" and ev["buffer"].startswith("input ")
    [problem] = ev["buffers"]
    assert problem["count"] == 1 and problem["elements"][0]["index"] == 0
    assert problem["elements"][0]["before"] != problem["elements"][0]["after"]
    # Bisected as the others: reproduced by the buffer checks, localized to an op (the
    # fault fires whatever the program computes, so which op is no finding of its own).
    assert ev["bisect"]["stages"]["reproduce"]["verdict"] == "input_clobbered"
    assert ev["bisect"]["status"] == "localized" and finding["culprit_op"]
    [signature] = summary["signatures"]
    assert signature["verdict"] == "input_clobbered" and signature["culprit_op"] == finding["culprit_op"]


@pytest.mark.parametrize(("fault", "verdict"), [("result_reuse", "result_clobbered"),
                                                ("donation_ignored", "donation_mismatch")])
def test_each_buffer_fault_gives_its_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             fault: str, verdict: str) -> None:
    monkeypatch.setenv(FAULT_ENV, fault)
    summary = run_campaign(parse_spec({**BASE, "budget": {"programs": 10}}), tmp_path)
    assert set(summary["findings"]) == {verdict}
    findings = _findings(tmp_path)
    assert {f["target"] for f in findings} == {"default", "O0"}
    for f in findings:
        assert f["verdict"] == verdict
        assert all(p["verdict"] == verdict for p in f["evidence"]["buffers"])
