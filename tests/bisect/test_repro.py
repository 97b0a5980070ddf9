"""The repro bundle: repro.py shows the bug with the plugin, not without it, not with the
curing flag; the bundle holds what an upstream report needs."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from findings import exp_inputs, exp_program, make_finding
from shared import once
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.bisect.bundle import CHECK_RESULTS, _array
from xla_sentinel.xla.faults import fault_path


def _bundle(root: Path) -> str:
    folder = make_finding(root / "exp", exp_program, exp_inputs(),
                          [fault_path("fusion_bf16_rounding")])
    return str(folder / bisect_finding(folder, timeout=60)["repro"])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    return Path(once(tmp_path_factory, worker_id, "repro", _bundle))


def _repro(bundle: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "repro.py", *args], cwd=bundle, capture_output=True,
                          text=True, timeout=120)


def test_repro_exits_1_while_the_bug_shows(bundle: Path) -> None:
    proc = _repro(bundle)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BUG:" in proc.stdout


def test_repro_exits_0_without_the_fault(bundle: Path) -> None:
    proc = _repro(bundle, "--without-plugins")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_repro_exits_0_under_the_curing_flag(bundle: Path) -> None:
    proc = _repro(bundle, "--xla-option", "xla_cpu_use_fusion_emitters=false")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_repro_runs_from_a_copy_of_the_bundle_alone(bundle: Path, tmp_path: Path) -> None:
    # A bug report is the folder, sent elsewhere: nothing may point back at the finding.
    import shutil

    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    assert _repro(copy).returncode == 1


def test_bundle_holds_module_hlo_data_and_report(bundle: Path) -> None:
    names = {p.name for p in bundle.iterdir()}
    assert {"repro.py", "module.mlir", "optimized.hlo", "inputs.npz", "expected.npz",
            "actual.npz", "report.md"} <= names
    module = (bundle / "module.mlir").read_text()
    assert module.count("stablehlo.exponential") == 1
    assert "loc(" not in module
    assert "fault_bf16" in (bundle / "optimized.hlo").read_text()
    with np.load(bundle / "expected.npz") as e, np.load(bundle / "actual.npz") as a:
        assert e["arg0"].dtype == np.float64
        assert not np.allclose(e["arg0"], a["arg0"], rtol=1e-5, atol=0)


def test_report_names_culprit_fusion_cure_and_versions(bundle: Path) -> None:
    report = (bundle / "report.md").read_text()
    for needle in ("exponential (f32->f32)", "kLoop", "apply-xla-transforms",
                   "xla_cpu_use_fusion_emitters=False", "jaxlib 0.10.2", "python repro.py",
                   "fusion_bf16_rounding.py"):
        assert needle in report


def _issue_check(outputs: list[np.ndarray], expected: list[np.ndarray], legal: list[float]) -> tuple[int, str]:
    """The result check of issue.md's reproducer, run on given outputs: (exit code, what it printed)."""
    source = CHECK_RESULTS.format(expected=", ".join(_array(e, "expected.npz", i) for i, e in enumerate(expected)),
                                  legal=legal)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as stop:
        exec(compile(source, "issue_check", "exec"), {"np": np, "jnp": jnp, "outputs": outputs})
    return stop.value.code, printed.getvalue()


def test_issue_reproducer_counts_a_nan_where_float64_is_finite() -> None:
    """The issue's check judged float outputs by their finite elements only, so a NaN-only
    miscompile (a max that drops NaN, a softmax row gone NaN) read as fixed; it now counts
    NaN/inf flips as repro.py does, with float64 rounded to the output's type first."""
    expected = np.linspace(-3.0, 3.0, 12)
    right = expected.astype(np.float32)
    assert _issue_check([right], [expected], [1e-6])[0] == 0
    nan = right.copy()
    nan[5] = np.nan
    code, printed = _issue_check([nan], [expected], [1e-6])
    assert code == 1 and "1 elements NaN/inf" in printed
    dropped = right.copy()  # float64 says NaN, the output kept a number
    code, _ = _issue_check([dropped], [np.where(np.arange(12) == 2, np.nan, expected)], [1e-6])
    assert code == 1
    # A value past float16's range is inf in float16 itself: no flip.
    assert _issue_check([np.array([np.inf, 1.0], np.float16)], [np.array([7e4, 1.0])], [1e-3])[0] == 0
