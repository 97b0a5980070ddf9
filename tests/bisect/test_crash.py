"""A compiler crash is bisected like a wrong result: the op whose compile aborts, a
one-op reproducer that exits 1 while the compiler crashes and 0 without the fault."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from findings import atan2_program, exp_inputs, make_finding
from shared import once
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.faults import fault_path


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
