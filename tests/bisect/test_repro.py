"""The repro bundle: repro.py shows the bug with the plugin, not without it, not with the
curing flag; the bundle holds what an upstream report needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from findings import exp_inputs, exp_program, make_finding
from shared import once
from xla_sentinel.bisect import bisect_finding
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
