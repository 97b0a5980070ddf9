"""Bisection inside a campaign: findings from different programs that hit the same fault
are bisected, land on one refined signature, and the summary links the bundle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from shared import once
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.core.model import Finding
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.storage.store import Store
from xla_sentinel.xla.faults import fault_path

BISECTED = 3


def _run(out: Path) -> dict[str, Any]:
    spec = parse_spec({
        "seed": 3, "workers": 1, "targets": ["default"],
        "references": ["f64_eager", "f64_jit", "eager"],
        # exp is the only op fusion_bf16_rounding corrupts here: one bug, many programs.
        "generator": {"version": 1, "minOps": 4, "maxOps": 12, "dtypes": ["f32"], "ops": ["exp", "add", "mul", "sub"],
                      "maxDimSize": 8, "specialValues": 0.0},
        "budget": {"programs": 6}, "bisect": {"enabled": True, "perSignature": BISECTED},
    })
    summary = run_campaign(spec, out / "campaign", inject_passes=[fault_path("fusion_bf16_rounding")])
    return {"out": str(out / "campaign"), "summary": summary}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[Path, dict[str, Any]]:
    done = once(tmp_path_factory, worker_id, "campaign", _run)
    return Path(done["out"]), done["summary"]


def _findings(out: Path) -> list[Finding]:
    store = Store(out / "campaign.sqlite")
    try:
        return store.findings()
    finally:
        store.close()


def test_first_findings_of_the_candidate_signature_are_bisected(campaign: tuple) -> None:
    out, _ = campaign
    findings = _findings(out)
    bisected = [f for f in findings if f.culprit_op is not None]
    assert len(findings) > BISECTED
    assert len(bisected) == BISECTED


def test_same_fault_from_different_programs_shares_one_signature(campaign: tuple) -> None:
    out, _ = campaign
    bisected = [f for f in _findings(out) if f.culprit_op is not None]
    assert len({f.program for f in bisected}) == BISECTED
    assert {(f.signature, f.culprit_op, f.fusion_kind, f.culprit_pass) for f in bisected} \
        == {(bisected[0].signature, "exponential (f32->f32)", "kLoop",
             "xla_cpu_use_fusion_emitters=False")}


def test_summary_lists_the_refined_signature_with_its_bundle(campaign: tuple) -> None:
    out, summary = campaign
    refined = [s for s in summary["signatures"] if s["culprit_op"] is not None]
    assert len(refined) == 1 and refined[0]["count"] == BISECTED
    assert (out / refined[0]["repro"] / "repro.py").is_file()
    # The unbisected findings keep the coarser candidate signature.
    assert sum(s["count"] for s in summary["signatures"]) == len(_findings(out))


def test_finding_json_keeps_the_candidate_signature(campaign: tuple) -> None:
    out, _ = campaign
    f = next(f for f in _findings(out) if f.culprit_op is not None)
    on_disk = json.loads((out / f.dir / "finding.json").read_text())
    assert on_disk["signature"] == f.signature != on_disk["candidate_signature"]
