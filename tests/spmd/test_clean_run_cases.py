"""Cases from issue 13's devices-4 clean run (seed 31) that were the harness's, not XLA's
(docs/spmd.md, "The devices-4 clean run").

s31-i61 was recorded as a `compile_error` of every target: "could not broadcast input
array from shape (13,17,32) into shape (14,17,32)", numpy failing to place a shard that
XLA returned one row short (bench/repros/spmd_pad_interior_sharded_result.py). The
harness now puts an output together tile by tile as the devices hold it, so such a result
is an array of another shape, which the oracle calls a mismatch; a dimension that does
not divide by its tile count (XLA pads the last shards) is placed and read back; and an
exception of this project's code in a target's run is a harness error, never a verdict
on XLA.
"""

from __future__ import annotations

import numpy as np
import pytest
from xla_sentinel.core.program import Program
from xla_sentinel.judge import oracle
from xla_sentinel.judge.assess import Assessor, HarnessError, Slot
from xla_sentinel.judge.targets import Target
from xla_sentinel.worker.protocol import Run

TIMEOUT = 120.0

# Dimensions that do not divide by their tile counts, in inputs and outputs: 5 rows in 2
# tiles (3 + 2) with the other mesh axis replicated, 7 columns in 4 (2 + 2 + 2 + 1), 5 rows
# in 4 (2 + 2 + 1 + 0), 7 columns in 2 (4 + 3), replicated again.
UNEVEN_GSPMD = """module @uneven attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5x3xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"},
                         %arg1: tensor<3x7xi32> {mhlo.sharding = "{devices=[1,4]<=[4]}"})
      -> (tensor<5x3xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"},
          tensor<3x7xi32> {mhlo.sharding = "{devices=[1,2,2]<=[4] last_tile_dim_replicate}"}) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<5x3xf32>
    %c = stablehlo.constant dense<1> : tensor<3x7xi32>
    %1 = stablehlo.add %arg1, %c : tensor<3x7xi32>
    return %0, %1 : tensor<5x3xf32>, tensor<3x7xi32>
  }
}"""

# s31-i61 reduced: lax.pad(x, 0, [(0, -1, 1)]) of s32[3], the s32[4] result sharded over 2
# devices; XLA returns one element per device where the sharding needs two.
SHORT_SHARDS = """module @short attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<3xi32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>})
      -> (tensor<4xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.pad %arg0, %c, low = [0], high = [-1], interior = [1] : (tensor<3xi32>, tensor<i32>) -> tensor<4xi32>
    return %0 : tensor<4xi32>
  }
}"""


def test_a_dimension_that_does_not_divide_is_placed_and_read_back(probe) -> None:
    """GSPMD keeps such shardings (per device f32[3,3], s32[3,2], ...); Shardy in jaxlib
    0.10.2 makes every uneven argument and result replicated, so it has no such case."""
    x = np.arange(15, dtype=np.float32).reshape(5, 3) - 7.5
    y = np.arange(21, dtype=np.int32).reshape(3, 7)

    doubled, incremented = probe.call(Run(UNEVEN_GSPMD, [x, y], {}), TIMEOUT).outputs

    assert doubled.tobytes() == (x + x).tobytes() and doubled.shape == (5, 3)
    np.testing.assert_array_equal(incremented, y + 1)


def test_short_shards_are_a_shape_mismatch_not_a_harness_failure(probe) -> None:
    """While XLA returns short shards (the repro above exits 1), the output is what the
    devices hold, put together: two elements, not four."""
    x = np.array([1, 2, 3], np.int32)

    (out,) = probe.call(Run(SHORT_SHARDS, [x], {}), TIMEOUT).outputs

    assert out.shape == (2,)
    expected = [np.array([1, 0, 2, 0], np.float64)]
    j = oracle.judge("default", {"default": [out], "eager": expected}, expected,
                     [oracle.OutputInfo("s32", tainted=False)], lambda: None)
    assert j.verdict == "mismatch"
    assert j.evidence == {"reason": "shape", "actual_shape": [2], "expected_shape": [4]}


def _assess_one(target: Target, program: Program):
    slot = Slot("t", [target], [], None)
    try:
        return Assessor([target], ["f64_numpy"], TIMEOUT).assess(slot, program)
    finally:
        slot.close()


def test_an_exception_of_the_harness_is_not_a_compile_error() -> None:
    # One input short of the sharded module's two: our code cannot place them (a
    # ValueError of the harness, before XLA runs anything).
    program = Program("short-of-inputs", UNEVEN_GSPMD, [np.zeros((5, 3), np.float32)], ["f32"])

    with pytest.raises(HarnessError, match="target default: ValueError"):
        _assess_one(Target("default"), program)


def test_a_module_xla_refuses_is_still_a_compile_error() -> None:
    x = np.zeros((5, 3), np.float32)
    y = np.zeros((3, 7), np.int32)
    program = Program("bad-option", UNEVEN_GSPMD, [x, y], ["f32", "s32"])

    result = _assess_one(Target("odd", {"xla_no_such_option": True}), program)

    (verdict,) = result.verdicts
    assert verdict.verdict == "compile_error"
    assert verdict.evidence["error"].startswith("JaxRuntimeError: INVALID_ARGUMENT")
