"""A finding judged bitwise (a one-ulp conversion error, below any normwise tolerance) is
localized, reduced and bundled under the same rule: the bisector judges its cuts bitwise
against the legal compile, and its repro.py compares value for value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from findings import convert_inputs, convert_program, make_finding
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.xla.faults import fault_path


@pytest.fixture(scope="module")
def bisected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = make_finding(tmp_path_factory.mktemp("bitwise") / "convert", convert_program,
                          convert_inputs(), [str(fault_path("bf16_convert_truncates"))],
                          dtype="bf16", evidence={"reason": "bitwise"})
    return folder, bisect_finding(folder, timeout=60)


def test_the_conversion_is_the_culprit(bisected: tuple[Path, dict[str, Any]]) -> None:
    _, result = bisected
    assert result["status"] == "localized", result
    assert result["culprit_op"] == "convert (f32->bf16)"
    assert result["stages"]["reduce"]["ops_after"] <= 2
    assert result["culprit_pass"] == "apply-xla-transforms"


def test_the_extracted_fusion_fails_alone_bitwise(bisected: tuple[Path, dict[str, Any]]) -> None:
    _, result = bisected
    extracted = result["stages"]["fusion"]["extracted"]
    assert extracted["reference"] == "case"
    assert extracted["fails_alone"] is True and extracted["hlo_itself_wrong"] is True


def test_the_repro_fails_bitwise_with_the_fault_and_passes_without(
        bisected: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = bisected
    repro = folder / "repro"
    with_fault = subprocess.run([sys.executable, "repro.py"], cwd=repro, capture_output=True, text=True)
    without = subprocess.run([sys.executable, "repro.py", "--without-plugins"], cwd=repro,
                             capture_output=True, text=True)
    assert with_fault.returncode == 1 and "IEEE 754 fixes exactly" in with_fault.stdout, with_fault.stdout
    assert without.returncode == 0, without.stdout + without.stderr


def test_judged_by_tolerance_the_same_finding_does_not_reproduce(tmp_path: Path) -> None:
    # What the bisector said before it knew the bitwise rule: one bf16 ulp is legal there.
    folder = make_finding(tmp_path / "convert", convert_program, convert_inputs(),
                          [str(fault_path("bf16_convert_truncates"))], dtype="bf16")
    assert bisect_finding(folder, timeout=60)["status"] == "not_reproduced"
