"""Cross-version replay against a real older jaxlib (0.10.1, created from PyPI by the
project's own function; cached, see conftest.py): the XLA:CPU max reduction that drops
NaN (bench/repros/reduce_max_drops_nan.py) is right in 0.10.1 and wrong in 0.10.2, so
the current target's finding is a version_regression, and `bisect --versions` puts the
bug between the two releases. No fault is injected here: both answers are XLA's own."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from jax import lax
from xla_sentinel.bisect.versions import bisect_versions
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.core import versions
from xla_sentinel.core.program import save_arrays
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.storage.store import Store

from .conftest import OLD

N = 4096  # from 4096 elements on 0.10.2 drops the NaN (2048 keeps it)


@pytest.fixture
def nan_trace(tmp_path: Path) -> Path:
    x = np.ones(N, np.float32)
    x[N // 2] = np.nan
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "module.mlir").write_text(jax.jit(lambda v: lax.reduce_max(v, (0,))).lower(x).as_text())
    save_arrays(folder / "inputs.npz", [x], ["f32"])
    return folder


def test_a_release_that_was_right_makes_the_current_wrong_answer_a_version_regression(
        with_old_env: versions.Environment, nan_trace: Path, tmp_path: Path) -> None:
    assert versions.current_jaxlib() == "0.10.2"  # the regression is between these two
    spec = parse_spec({"traces": [str(nan_trace)],
                       "targets": ["default", {"name": "default_old", "jaxlib": OLD}],
                       "references": ["f64_numpy", "eager"], "budget": {"programs": 1},
                       "workers": 1, "bisect": {"enabled": False}})
    summary = run_campaign(spec, tmp_path / "out")
    assert summary["program_status"] == {"judged": 1}
    findings = {f["target"]: f for f in (json.loads(p.read_text())
                                         for p in (tmp_path / "out").glob("findings/*/finding.json"))}
    # 0.10.1 keeps the NaN: no finding of its own; eager (op by op) drops it too in 0.10.2.
    assert "default_old" not in findings
    f = findings["default"]
    assert f["verdict"] == "version_regression"
    assert f["evidence"]["judged_as"] == "nan_mismatch"
    assert f["evidence"]["lastGood"] == {"target": "default_old", "jaxlib": OLD}
    assert f["evidence"]["jaxlib"] == "0.10.2"

    folder = tmp_path / "out" / f["dir"]
    result = bisect_versions(folder, f"{OLD}..0.10.2")
    assert (result["status"], result["introducedIn"], result["lastGood"]) == ("found", "0.10.2", OLD)
    old_probe = next(p for p in result["probes"] if p["jaxlib"] == OLD)
    assert old_probe["shows"] is False
    new_probe = next(p for p in result["probes"] if p["jaxlib"] == "0.10.2")
    assert "NaN/Inf where float64 says otherwise" in new_probe["detail"]
    assert json.loads((folder / "finding.json").read_text())["versions"]["bisection"]["introducedIn"] == "0.10.2"
    # The real regression's signature in the campaign's store says where it began.
    store = Store(tmp_path / "out" / "campaign.sqlite")
    (sig,) = [s for s in store.signatures() if s.id == f["signature"]]
    store.close()
    assert (sig.verdict, sig.introduced_in, sig.last_good) == ("version_regression", "0.10.2", OLD)
