"""Findings inside regions are localized to the op inside (bisect/regions.py): the suffix
search stops at the op of @main that holds the region (a loop, a shard_map's manual
computation, a call), and the regions stage names the op in it that goes wrong, with its
region path, in the evidence, the finding and the bundle's issue.md. Real compiles of
injected faults (xla/faults) that corrupt one op; the shard_map case runs on the workers'
virtual CPU devices (4, worker/server.py), as tests/spmd does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from findings import make_finding, shift_inputs
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.core.program import Program
from xla_sentinel.triage.signature import signature_id
from xla_sentinel.xla import cuts
from xla_sentinel.xla.faults import fault_path

TIMEOUT = 120.0


def loop_shift(x: Any, s: Any) -> Any:
    """A fori_loop whose body (a func.call of jax's, inside the while) shifts right: what
    shift_right_logical corrupts, among ops that compute and use its operands."""
    from jax import lax

    def body(i: Any, v: Any) -> Any:
        scaled = v * 3 + 1
        shifted = lax.shift_right_arithmetic(scaled, s)
        return shifted + (v & 7) - i

    return lax.fori_loop(0, 3, body, x - 1) * 2


def call_shift(x: Any, s: Any) -> Any:
    """The shift inside a function jax keeps as a callee (`call @g`): as in a replayed
    module, whose calls the bisector sees as one op of @main."""
    import jax
    from jax import lax

    @jax.jit
    def g(a: Any, b: Any) -> Any:
        return lax.shift_right_arithmetic(a * 3 + 1, b) + (a & 7)

    return g(x - 1, s) * 2 - x


def repro(bundle: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "repro.py", *args], cwd=bundle, capture_output=True,
                          text=True, timeout=TIMEOUT, env=env)


def _negative_shift_inputs() -> list[np.ndarray]:
    x, s = shift_inputs()
    x[x > 0] *= -1  # negative values: a logical shift differs from an arithmetic one
    return [x, s]


def _assert_localized_inside(folder: Path, result: dict[str, Any], outer: str, path: str,
                             op: str) -> None:
    assert result["status"] == "localized", result["stages"]
    regions = result["stages"]["regions"]
    assert result["stages"]["graph"]["culprit_op"].startswith(outer), result["stages"]["graph"]
    assert result["culprit_op"] == op, regions
    assert result["culprit_path"] == path, regions
    assert regions["culprit_path"] == path and regions["outer_op"].startswith(outer), regions
    record = json.loads((folder / "finding.json").read_text())
    assert record["culprit_op"] == op and record["evidence"]["bisect"]["culprit_path"] == path
    bundle = folder / result["repro"]
    issue = (bundle / "issue.md").read_text()
    assert f"`{op}`" in issue.splitlines()[0] and f"`{path}`" in issue, issue[:1500]
    assert f"`{path}`" in (bundle / "report.md").read_text()
    shown, cured = repro(bundle), repro(bundle, "--without-plugins")
    assert shown.returncode == 1 and "BUG" in shown.stdout, shown.stdout + shown.stderr
    assert cured.returncode == 0, cured.stdout + cured.stderr


def test_a_fault_in_a_loop_body_is_localized_to_the_op_inside(tmp_path: Path) -> None:
    folder = make_finding(tmp_path / "loop-shift", loop_shift, _negative_shift_inputs(),
                          [fault_path("shift_right_logical")], dtype="s32")

    _assert_in_loop_body(folder, bisect_finding(folder, timeout=TIMEOUT), "shift_right_arithmetic",
                         "shift_right_arithmetic (s32->s32)")


def _assert_in_loop_body(folder: Path, result: dict[str, Any], op: str, culprit: str) -> None:
    """Localized to `op` in the body of the while that the graph stage found."""
    # The body's ops as the stage numbers them: jax's closed_call inlined, constants counted.
    body = [o["name"] for o in result_listing(folder, result)]
    k = body.index(f"stablehlo.{op}")
    w = result["stages"]["graph"]["culprit_index"]
    _assert_localized_inside(folder, result, "while", f"main/while#{w}/body/{op}#{k}", culprit)


def result_listing(folder: Path, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The ops of the culprit loop's body as the regions stage numbers them."""
    module = (folder / "program" / "module.mlir").read_text()
    parsed = cuts.Parsed(module)
    info = parsed.info()
    w = result["stages"]["graph"]["culprit_index"]
    alone = parsed.cut([w], list(dict.fromkeys(info["ops"][w]["operands"])),
                       [r["vid"] for r in info["ops"][w]["results"]])
    return cuts.region_ops(cuts.inline_calls(alone), [[0, 1]])


def test_a_fault_in_a_callee_is_localized_to_the_op_inside(tmp_path: Path) -> None:
    folder = make_finding(tmp_path / "call-shift", call_shift, _negative_shift_inputs(),
                          [fault_path("shift_right_logical")], dtype="s32")
    module = (folder / "program" / "module.mlir").read_text()
    assert "call @g(" in module

    result = bisect_finding(folder, timeout=TIMEOUT)

    c = result["stages"]["graph"]["culprit_index"]
    # @g's ops: constant, broadcast, multiply, constant, broadcast, add, shift (#6).
    _assert_localized_inside(folder, result, "func.call", f"main/call@g#{c}/shift_right_arithmetic#6",
                             "shift_right_arithmetic (s32->s32)")


# A shard_map over 4 devices whose body sums over them (psum: an all_reduce), as jax 0.10.2
# lowers it (Shardy); allreduce_twice doubles the sum.
PSUM_MODULE = """\
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x4xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<2x4xf32>) {
      %cst_0 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %5 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %6 = stablehlo.multiply %arg1, %5 : tensor<2x4xf32>
      %7 = "stablehlo.all_reduce"(%6) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %10 = stablehlo.add %arg2, %arg3 : tensor<f32>
        stablehlo.return %10 : tensor<f32>
      }) : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %8 = stablehlo.sine %7 : tensor<2x4xf32>
      %9 = stablehlo.add %8, %arg1 : tensor<2x4xf32>
      sdy.return %9 : tensor<2x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %cst = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %2 = sdy.sharding_constraint %1 <@mesh, [{"x"}, {}]> : tensor<8x4xf32>
    %3 = stablehlo.multiply %0, %2 : tensor<8x4xf32>
    %4 = sdy.sharding_constraint %3 <@mesh, [{"x"}, {}]> : tensor<8x4xf32>
    return %4 : tensor<8x4xf32>
  }
}
"""


def shard_map_finding(folder: Path, module: str, verdict: str, fault: str, seed: int) -> Path:
    """A finding folder of `module` (one f32[8, 4] input drawn from `seed`) that `verdict`
    on the default target with the injected `fault`."""
    x = np.random.default_rng(seed).normal(size=(8, 4)).astype(np.float32)
    Program(folder.name, module, [x], ["f32"], provenance={"source": "test"}).save(folder / "program")
    record = {"id": folder.name, "campaign": "test", "program": folder.name, "target": "default",
              "verdict": verdict, "culprit_op": None, "culprit_pass": None, "fusion_kind": None,
              "dtype": "f32", "evidence": {"target_options": {}, "plugins": [fault_path(fault)]},
              "dir": folder.name, "time": "2026-01-01T00:00:00+00:00"}
    record["signature"] = signature_id(record)
    (folder / "finding.json").write_text(json.dumps(record, indent=1))
    return folder


def test_a_collective_in_a_shard_map_body_is_localized_to_the_op_inside(tmp_path: Path) -> None:
    folder = shard_map_finding(tmp_path / "psum", PSUM_MODULE, "mismatch", "allreduce_twice", 4)

    result = bisect_finding(folder, timeout=TIMEOUT)

    # Op 3 of the body (constant, broadcast, multiply, all_reduce): the psum.
    _assert_localized_inside(folder, result, "sdy.manual_computation",
                             "main/manual_computation#0/body/all_reduce#3", "all_reduce (f32->f32)")


def test_exposing_a_loop_value_gives_its_first_iteration() -> None:
    """The while carries the exposed value of its first iteration: computed from the
    loop's initial values, not from what later iterations made of them."""
    import jax
    from jax import lax
    from xla_sentinel.xla import compiler

    def f(x: Any) -> Any:
        return lax.fori_loop(0, 5, lambda i, v: v * 2 + i, x)

    x = np.arange(4, dtype=np.float32)
    module = cuts.inline_calls(jax.jit(f).lower(x).as_text())
    assert "call @" not in module.split("func.func private")[0]
    body = cuts.region_ops(module, [[2, 1]])
    mul = next(k for k, op in enumerate(body) if op["name"] == "stablehlo.multiply")
    exposed = cuts.expose(module, [[2, 1]], [mul])
    (first,) = compiler.run_module(exposed, [x], {}).outputs
    np.testing.assert_array_equal(first, x * 2)
    with pytest.raises(cuts.CutError, match="iteration -1"):
        cuts.expose(module, [[2, 1, -1]], [mul])  # iterations count from 0


def loop_window(x: Any) -> Any:
    """A loop whose body slices a window at a start past the last valid one (which
    dynamic-slice clamps; dynamic_slice_wraps wraps it around instead) and writes it back
    with a dynamic_update_slice."""
    from jax import lax

    def body(i: Any, v: Any) -> Any:
        window = lax.dynamic_slice(v, (i + 5,), (4,))
        return lax.dynamic_update_slice(v, window * 2 + 1, (i,))

    return lax.fori_loop(0, 2, body, x + 1) - x


def test_a_dynamic_slice_in_a_loop_body_is_localized_to_the_op_inside(tmp_path: Path) -> None:
    x = np.arange(8, dtype=np.float32) - 3
    folder = make_finding(tmp_path / "loop-window", loop_window, [x],
                          [fault_path("dynamic_slice_wraps")])

    _assert_in_loop_body(folder, bisect_finding(folder, timeout=TIMEOUT), "dynamic_slice",
                         "dynamic_slice (f32,s32->f32)")


def loop_scale(x: Any) -> Any:
    from jax import lax

    return lax.fori_loop(0, 4, lambda i, v: v * 1.1 + 0.37, x * 3.0) - x


def test_a_loop_that_carries_its_values_wrongly_stays_the_culprit(tmp_path: Path) -> None:
    """loop_state_bf16 rounds what a while body hands on, not an op inside it: the values
    exposed through the loop come out wrong whatever op they come from, which the control
    probe (the loop's own initial values, exposed the same way) shows, so the culprit stays
    the while."""
    x = np.random.default_rng(6).normal(size=(6, 5)).astype(np.float32)
    folder = make_finding(tmp_path / "loop-carry", loop_scale, [x], [fault_path("loop_state_bf16")])

    result = bisect_finding(folder, timeout=TIMEOUT)

    assert result["status"] == "localized", result["stages"]
    regions = result["stages"]["regions"]
    assert result["culprit_op"].startswith("while ("), regions
    assert result["culprit_path"] is None and regions["inner_op"] is None, regions
    # The trip count comes out right, the loop's initial values exposed through it do not.
    assert regions["trail"][0] == {"path": [[0, 0]], "exposed": "trips", "fails": False,
                                   "reference": 4, "target": 4}, regions
    assert regions["trail"][1] == {"path": [[0, 1, 0]], "exposed": "arguments", "fails": True}, regions


# The psum module with an atan2 after the all_reduce: abort_on_pattern kills any compile
# that holds one, here inside the shard_map's body.
ATAN2_MODULE = PSUM_MODULE.replace(
    "%8 = stablehlo.sine %7 : tensor<2x4xf32>", "%8 = stablehlo.atan2 %7, %arg1 : tensor<2x4xf32>")


def test_a_crash_in_a_shard_map_body_is_followed_to_the_op_whose_compile_aborts(tmp_path: Path) -> None:
    folder = shard_map_finding(tmp_path / "atan2", ATAN2_MODULE, "crash", "abort_on_pattern", 5)

    result = bisect_finding(folder, timeout=TIMEOUT)

    # Op 4 of the body (constant, broadcast, multiply, all_reduce, atan2): the prefix that
    # exposes the ops up to the all_reduce compiles, the one with the atan2 aborts.
    _assert_localized_inside(folder, result, "sdy.manual_computation",
                             "main/manual_computation#0/body/atan2#4", "atan2 (f32->f32)")
    regions = result["stages"]["regions"]
    assert regions["found_by"] == "crash", regions
    assert any(step.get("crashes") is False for step in regions["trail"]), regions["trail"]
    assert result["stages"]["reproduce"]["verdict"] == "crash"
