"""The numpy float64 reference in a campaign: the XLA:CPU max reduction that drops NaN
(bench/repros/reduce_max_drops_nan.py) is flagged on the targets that drop it, not on the
one that keeps it (with the XLA references as the truth, before issue 16, only the one that
keeps it was flagged), and the XLA float64 reference that drops it too is a finding of its
own.
Real compiles in worker processes, one replayed module."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from jax import lax
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.core.program import save_arrays
from xla_sentinel.spec.campaign import parse_spec

N = 4096  # from 4096 elements on, XLA:CPU's YNNPACK reduction drops NaN (2048 keeps it)


@pytest.fixture
def nan_trace(tmp_path: Path) -> Path:
    """max over 4096 f32 with one NaN, and a bessel_i1e, an op numpy has no form for."""
    x = np.ones(N, np.float32)
    x[N // 2] = np.nan
    w = np.linspace(-3, 3, 8, dtype=np.float32)
    module = jax.jit(lambda v, u: (lax.reduce_max(v, (0,)), lax.bessel_i1e(u))).lower(x, w).as_text()
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "module.mlir").write_text(module)
    save_arrays(folder / "inputs.npz", [x, w], ["f32", "f32"])
    return folder


def test_the_targets_that_drop_nan_are_flagged_and_the_one_that_keeps_it_is_not(
        nan_trace: Path, tmp_path: Path) -> None:
    spec = parse_spec({"traces": [str(nan_trace)], "targets": ["default", "no_ynn"],
                       "references": ["f64_numpy", "f64_jit", "eager"], "budget": {"programs": 1},
                       "workers": 1, "bisect": {"enabled": False}})
    summary = run_campaign(spec, tmp_path / "out")
    findings = {f["target"]: f for f in
                (json.loads(p.read_text()) for p in (tmp_path / "out").glob("findings/*/finding.json"))}
    assert summary["program_status"] == {"judged": 1}
    assert {t: f["verdict"] for t, f in findings.items()} == {
        "default": "nan_mismatch",
        # The promoted module compiled by XLA (the old float64 truth) drops it as well.
        "f64_text": "nan_mismatch"}
    assert findings["default"]["evidence"]["expected_class"] == "nan"
    assert findings["f64_text"]["evidence"]["reason"] == "reference"
    assert findings["f64_text"]["evidence"]["against"] == "f64_numpy"
    assert summary["cross_checks"] == {"suspect": 1}
    assert summary["reference_fallbacks"] == {"chlo.bessel_i1e": 1}



def test_a_sampled_program_is_cross_checked_by_the_compiled_float64_reference_alone(tmp_path: Path) -> None:
    # Every program sampled (crossCheckEvery 1), none a suspect: each runs its target, the
    # two default references and f64_jit, not f64_eager (assess.SAMPLE_REFERENCES).
    spec = parse_spec({"seed": 3, "generator": {"version": 1, "minOps": 2, "maxOps": 5, "dtypes": ["f32"],
                                                "specialValues": 0.0},
                       "targets": ["default"], "budget": {"programs": 3}, "workers": 1,
                       "crossCheckEvery": 1, "bisect": {"enabled": False}})
    summary = run_campaign(spec, tmp_path)
    assert summary["program_status"] == {"judged": 3} and summary["findings"] == {}
    assert summary["cross_checks"] == {"sample": 3}
    assert summary["executions"] == 3 * 4
