"""Program folders (the trace format): round trips, bf16 bit patterns, clear errors."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from xla_sentinel.program import Program, ProgramError, param_dtypes, promote_floats, result_dtypes

MODULE = """module @m {
  func.func public @main(%arg0: tensor<2x3xbf16>, %arg1: tensor<i32>) -> (tensor<2x3xf32> {jax.result_info = "r"}, tensor<i32>) {
    %0 = stablehlo.convert %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xf32>
    return %0, %arg1 : tensor<2x3xf32>, tensor<i32>
  }
}"""


def test_round_trip_keeps_bf16_bits(tmp_path: Path) -> None:
    x = np.array([[1.5, -0.0, np.nan], [3.0e38, 1e-40, 7.0]], dtype=ml_dtypes.bfloat16)
    p = Program("p1", MODULE, [x, np.int32(4)], ["bf16", "s32"], {"source": "test"})
    p.save(tmp_path / "p")
    raw = np.load(tmp_path / "p" / "inputs.npz")["arg0"]
    assert raw.dtype == np.uint16  # stored as its bit pattern (DESIGN.md trace format)
    q = Program.load(tmp_path / "p")
    assert q.input_dtypes == ["bf16", "s32"]
    np.testing.assert_array_equal(q.inputs[0].view(np.uint16), x.view(np.uint16))
    assert q.provenance == {"source": "test"}


def test_signature_parsing() -> None:
    assert param_dtypes(MODULE) == ["bf16", "s32"]
    assert result_dtypes(MODULE) == ["f32", "s32"]


def test_promotion_to_float64() -> None:
    promoted = promote_floats(MODULE)
    assert "bf16" not in promoted and "tensor<2x3xf64>" in promoted and "tensor<i32>" in promoted
    assert promote_floats(MODULE.replace("convert", "bitcast_convert")) is None


@pytest.mark.parametrize(("damage", "needle"), [
    (lambda d: (d / "module.mlir").unlink(), "not a program folder"),
    (lambda d: (d / "inputs.npz").write_bytes(b"garbage"), "unreadable inputs"),
    (lambda d: (d / "inputs.npz").unlink(), "inputs.npz: missing"),
    (lambda d: (d / "meta.json").write_text("{"), "unreadable JSON"),
])
def test_corrupt_folders_name_the_file(tmp_path: Path, damage, needle: str) -> None:
    p = Program("p1", MODULE, [np.zeros((2, 3), ml_dtypes.bfloat16), np.int32(1)], ["bf16", "s32"])
    p.save(tmp_path / "p")
    damage(tmp_path / "p")
    with pytest.raises(ProgramError, match=needle):
        Program.load(tmp_path / "p")
