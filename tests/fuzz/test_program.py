"""Program folders (the trace format): round trips, bf16 bit patterns, clear errors."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from xla_sentinel.core.program import (
    Program,
    ProgramError,
    param_dtypes,
    promote_floats,
    result_dtypes,
)

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
    assert raw.dtype == np.uint16  # stored as its bit pattern (docs/architecture.md trace folders)
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


# jax lowers the start value of every max reduction as the f32 bit pattern of -inf.
MAX_REDUCE = """module @m {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2xf32> {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}"""


def test_promotion_keeps_the_value_of_hex_float_constants() -> None:
    promoted = promote_floats(MAX_REDUCE)
    assert "dense<0xFFF0000000000000> : tensor<f64>" in promoted


def test_float64_reference_of_a_replayed_max_reduction_keeps_minus_inf(x64: None) -> None:
    from xla_sentinel.worker.handlers import module_reference
    from xla_sentinel.worker.protocol import ModuleReference

    x = np.array([[-1.0, -2.0, -3.0], [1.0, -5.0, 2.0]], np.float32)
    reply = module_reference(ModuleReference("f64_text", MAX_REDUCE, [x]))
    # An all-negative row reduces to its maximum, not to the f64 read of 0xFF800000 (~2e-314).
    np.testing.assert_array_equal(reply.outputs[0], [-1.0, 2.0])


def test_a_replayed_module_is_discrete_by_the_ops_it_holds() -> None:
    from xla_sentinel.ops.rules import has_discrete_ops

    assert not has_discrete_ops(MAX_REDUCE)
    assert has_discrete_ops(MODULE)  # its stablehlo.convert rounds: ties flip legally
    assert has_discrete_ops('%0 = "stablehlo.compare"(%a, %b) {comparison_direction = #stablehlo<comparison_direction GT>}')
