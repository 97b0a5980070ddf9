"""bisect/versions.py load_subject on a finding against the float64 reference (f64_jit):
the subject every release is probed with is the module that reference compiles (the program
promoted to float64, bisect/pipeline.py in_float64) under the reference's options, not the
program at its own precision, where the bug does not show.

s33-i1166 is a real f64_jit finding (tests/bisect/data/s33, `nan_mismatch` on output 1: a
YNNPACK max reduction drops a NaN). The data folder keeps no expected.npz, so the test
writes it as the campaign did: the f64_numpy reference's values (references/npref.py, real
StableHLO evaluation). No release is probed: no other jaxlib is installed here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from xla_sentinel.bisect.versions import VersionBisectError, load_subject
from xla_sentinel.core.program import Program, promote_floats, save_arrays
from xla_sentinel.references.npref import evaluate_module
from xla_sentinel.spec.options import REFERENCE_OPTIONS

FINDING = Path(__file__).parent / "data" / "s33" / "s33-i1166"


@pytest.fixture(scope="module")
def expected() -> list[np.ndarray]:
    program = Program.load(FINDING / "program")
    return evaluate_module(program.module, program.inputs).outputs


def finding(tmp_path: Path, expected: list[np.ndarray], **changes: object) -> Path:
    folder = tmp_path / "s33-i1166"
    shutil.copytree(FINDING, folder)
    save_arrays(folder / "expected.npz", [np.asarray(a) for a in expected],
                ["f64" if a.dtype.kind == "f" else "s32" for a in map(np.asarray, expected)])
    record = json.loads((folder / "finding.json").read_text())
    evidence = {**record["evidence"], **changes.pop("evidence", {})}  # type: ignore[dict-item]
    record = {**record, **changes, "evidence": evidence}
    (folder / "finding.json").write_text(json.dumps(record))
    return folder


def test_a_float64_reference_finding_is_probed_in_float64_under_its_options(
        tmp_path: Path, expected: list[np.ndarray]) -> None:
    own = Program.load(FINDING / "program")
    assert np.isnan(expected[1])  # the finding's evidence: expected NaN, f64_jit gave 0.998
    subject = load_subject(finding(tmp_path, expected))
    assert subject.module == promote_floats(own.module)
    assert "f16" not in subject.module and "f64" in subject.module
    assert [x.dtype for x in subject.inputs] == [np.float64]
    np.testing.assert_array_equal(subject.inputs[0], own.inputs[0].astype(np.float64))
    # The reference's options as the finding recorded them.
    assert subject.options == {"xla_backend_optimization_level": 0,
                               "xla_cpu_use_fusion_emitters": False}
    (check,) = subject.checks
    assert (check.index, check.dtype, check.kind) == (1, "f64", "classes")
    assert subject.verdict == "nan_mismatch"


def test_without_recorded_options_the_reference_s_own(tmp_path: Path,
                                                      expected: list[np.ndarray]) -> None:
    subject = load_subject(finding(tmp_path, expected, evidence={"target_options": None}))
    assert subject.options == dict(REFERENCE_OPTIONS) and "f64" in subject.module


def test_a_target_s_finding_keeps_the_program_s_own_precision(tmp_path: Path,
                                                              expected: list[np.ndarray]) -> None:
    subject = load_subject(finding(tmp_path, expected, target="O0"))
    assert subject.module == Program.load(FINDING / "program").module
    assert [x.dtype for x in subject.inputs] == [np.float16]
    assert subject.checks[0].dtype == "f16"


def test_a_module_without_a_float64_form_is_bad_input(tmp_path: Path,
                                                      expected: list[np.ndarray]) -> None:
    folder = finding(tmp_path, expected)
    module = folder / "program" / "module.mlir"
    text = module.read_text()
    # A bit-cast of a float: promote_floats has no float64 module for it.
    ret = text.rindex("return ")
    module.write_text(text[:ret] + "%bc = stablehlo.bitcast_convert %arg0 : (tensor<4099x3xf16>) "
                      "-> tensor<4099x3xi16>\n    " + text[ret:])
    with pytest.raises(VersionBisectError, match="bit-casts floats"):
        load_subject(folder)
