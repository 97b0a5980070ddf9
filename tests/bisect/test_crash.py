"""A compiler crash or hang is bisected like a wrong result: the op whose compile aborts
(or never returns), a one-op reproducer that exits 1 while the compiler fails and 0
without the fault."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from findings import atan2_program, exp_inputs, make_finding
from shared import once
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.xla.faults import fault_path

# Each probe that still hangs waits this long (a compile of these small cuts takes a few
# seconds on a loaded machine; the worker is started before the probe's clock runs).
HANG_PROBE_S = 15.0


def _bisect(root: Path) -> dict[str, Any]:
    folder = make_finding(root / "crash", atan2_program, exp_inputs(),
                          [fault_path("abort_on_pattern")], verdict="crash")
    return {"folder": str(folder), "result": bisect_finding(folder, timeout=60)}


@pytest.fixture(scope="module")
def crash(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[Path, dict[str, Any]]:
    done = once(tmp_path_factory, worker_id, "crash", _bisect)
    return Path(done["folder"]), done["result"]


def test_culprit_is_the_op_whose_compile_aborts(crash: tuple) -> None:
    _, result = crash
    assert result["status"] == "localized"
    assert result["culprit_op"] == "atan2 (f32->f32)"
    assert result["stages"]["reproduce"]["verdict"] == "crash"


def test_crash_reduced_to_one_op_of_one_element(crash: tuple) -> None:
    _, result = crash
    assert result["stages"]["reduce"]["ops_after"] == 1
    assert result["stages"]["shrink"]["shape_after"] == [1, 1]


def test_crash_repro_exits_1_with_the_fault_and_0_without(crash: tuple) -> None:
    folder, result = crash
    bundle = folder / result["repro"]
    run = [sys.executable, "repro.py"]
    with_fault = subprocess.run(run, cwd=bundle, capture_output=True, text=True, timeout=120)
    without = subprocess.run([*run, "--without-plugins"], cwd=bundle, capture_output=True,
                             text=True, timeout=120)
    assert with_fault.returncode == 1 and "BUG" in with_fault.stdout
    assert without.returncode == 0, without.stdout + without.stderr


def _bisect_hang(root: Path) -> dict[str, Any]:
    folder = make_finding(root / "hang", atan2_program, exp_inputs(),
                          [str(Path(__file__).with_name("hang_fault.py"))], verdict="hang")
    result = bisect_finding(folder, timeout=60, hang_probe_s=HANG_PROBE_S)
    return {"folder": str(folder), "result": result}


@pytest.fixture(scope="module")
def hang(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[Path, dict[str, Any]]:
    done = once(tmp_path_factory, worker_id, "hang", _bisect_hang)
    return Path(done["folder"]), done["result"]


def test_a_hang_is_bisected_to_the_op_whose_compile_never_returns(hang: tuple) -> None:
    _, result = hang
    assert result["status"] == "localized", result["stages"]
    assert result["culprit_op"] == "atan2 (f32->f32)"
    assert result["stages"]["reproduce"]["verdict"] == "hang"
    assert result["stages"]["reduce"]["ops_after"] == 1
    # The reproduce stage's two runs both hang: each waits the probe timeout, not the
    # bisector's 60 s per request (which would make it 120 s at least).
    assert 2 * HANG_PROBE_S <= result["stages"]["reproduce"]["seconds"] < 2 * 60


def test_hang_repro_exits_1_with_the_fault_and_0_without(hang: tuple) -> None:
    folder, result = hang
    bundle = folder / result["repro"]
    run = [sys.executable, "repro.py"]
    with_fault = subprocess.run(run, cwd=bundle, capture_output=True, text=True, timeout=180)
    without = subprocess.run([*run, "--without-plugins"], cwd=bundle, capture_output=True,
                             text=True, timeout=120)
    assert with_fault.returncode == 1 and "(hang)" in with_fault.stdout, with_fault.stdout
    assert without.returncode == 0, without.stdout + without.stderr
