"""Bisecting what replayed traces find, on traces of real XLA bugs in jaxlib 0.10.2
(tests/bisect/real_traces.py, from bench/repros/): a module without a graph, replayed by a
campaign, its finding bisected by the campaign's own refinement. The culprit must be the op
the bug is in and the named cure the flag that avoids it, not whatever op or pass the
search happened to stop at."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import real_traces
from shared import once
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import parse_spec


def _replay(root: Path, trace: str, targets: list[str]) -> dict[str, Any]:
    folder = real_traces.make(trace, root / "traces" / trace)
    spec = parse_spec({"traces": [str(folder)], "targets": targets, "workers": 1,
                       "budget": {"programs": 1},
                       "bisect": {"enabled": True, "perSignature": 1}})
    out = root / "out"
    summary = run_campaign(spec, out, name=f"trace-{trace}")
    findings = []
    for path in sorted((out / "findings").glob("*/finding.json")):
        record = json.loads(path.read_text())
        findings.append({"dir": str(path.parent), **{k: record.get(k) for k in (
            "target", "verdict", "culprit_op", "culprit_pass", "repro")},
            "bisect": record["evidence"].get("bisect")})
    return {"summary": {"findings": summary["findings"]}, "findings": findings}


@pytest.fixture(scope="module")
def spmd_pad(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Any]:
    return once(tmp_path_factory, worker_id, "trace-spmd-pad",
                lambda root: _replay(root, "spmd_pad", ["default"]))


@pytest.fixture(scope="module")
def nan_max(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Any]:
    return once(tmp_path_factory, worker_id, "trace-nan-max",
                lambda root: _replay(root, "nan_max", ["default", "no_ynn"]))


def test_a_partitioner_crash_in_a_trace_is_localized_to_the_pad(spmd_pad: dict[str, Any]) -> None:
    (finding,) = spmd_pad["findings"]
    assert finding["verdict"] == "crash"
    bisect = finding["bisect"]
    assert bisect["status"] == "localized", bisect["stages"]
    # The suffix search stops at the sharding constraint the crash needs; the culprit is
    # the op the partitioner aborts on, kept with that constraint alone.
    assert finding["culprit_op"] == "pad (f32->f32)"
    assert bisect["stages"]["reduce"]["kept_ops"] == ["sdy.sharding_constraint", "stablehlo.pad"]
    # No preset flag avoids the partitioner, and no compile lists passes to search.
    assert finding["culprit_pass"] is None and bisect["stages"]["passes"]["curing_flags"] == []


def test_the_crash_bundle_reproduces_on_its_own_devices(spmd_pad: dict[str, Any]) -> None:
    (finding,) = spmd_pad["findings"]
    bundle = Path(finding["dir"]) / finding["bisect"]["repro"]
    assert "PARTITIONS = 2" in (bundle / "repro.py").read_text()
    run = subprocess.run([sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 1 and "BUG" in run.stdout, run.stdout + run.stderr


def test_a_nan_dropping_reduction_is_cured_by_the_ynn_flag(nan_max: dict[str, Any]) -> None:
    # numpy keeps the NaN, no_ynn does too: default is wrong, and so is the XLA float64
    # reference of the replayed module (f64_text), a finding of its own against numpy.
    by_target = {f["target"]: f for f in nan_max["findings"]}
    assert sorted(by_target) == ["default", "f64_text"]
    assert {f["verdict"] for f in by_target.values()} == {"nan_mismatch"}
    assert by_target["f64_text"]["culprit_op"] == "reduce (f32->f32)"
    finding = by_target["default"]
    bisect = finding["bisect"]
    assert bisect["status"] == "localized", bisect["stages"]
    assert finding["culprit_op"] == "reduce (f32->f32)"
    assert bisect["stages"]["reduce"]["ops_after"] == 1
    # The reduction itself sits in a YNNPACK fusion (not its max region's parameters).
    assert bisect["stages"]["fusion"]["reduced"]["hits"][0]["kind"] == "kCustom:__ynn_fusion"
    # The preset flag names the cure, before any pass the search finds.
    assert finding["culprit_pass"] == "xla_cpu_experimental_ynn_fusion_type="
    assert bisect["stages"]["passes"]["curing_flags"][0] == "xla_cpu_experimental_ynn_fusion_type="
    bundle = Path(finding["dir"]) / bisect["repro"]
    cured = subprocess.run([sys.executable, "repro.py", "--xla-option",
                            "xla_cpu_experimental_ynn_fusion_type="], cwd=bundle,
                           capture_output=True, text=True, timeout=300)
    shows = subprocess.run([sys.executable, "repro.py"], cwd=bundle, capture_output=True,
                           text=True, timeout=300)
    assert shows.returncode == 1, shows.stdout + shows.stderr
    assert cured.returncode == 0, cured.stdout + cured.stderr
