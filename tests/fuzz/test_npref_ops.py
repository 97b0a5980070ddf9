"""The numpy column of the op table: every (op, dtype) pair agrees with float64 eager jax
on random and on special inputs (NaN, inf, -0, subnormals, extremes, out-of-range
indices), exactly for exact ops and within the op's stated error for the others."""

from __future__ import annotations

import numpy as np
import pytest
from xla_sentinel.ops.numpy_forms import flush_subnormals
from xla_sentinel.ops.spec import OpDef
from xla_sentinel.ops.table import OPS
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import single_op
from xla_sentinel.programs.inputs import make_inputs

pytestmark = pytest.mark.usefixtures("x64")

# Control-flow bodies may apply tanh, sin or logistic: not correctly rounded either.
APPROX_BODIES = ("cond", "while_loop", "fori_loop", "scan")


def stated_error(op: OpDef) -> float:
    """Largest relative difference from float64 eager jax, per element (0: exact).

    Correctly rounded ops (+ - * / sqrt, conversions, data movement, integer ops) agree
    bitwise. Transcendental functions are not correctly rounded by either libm or XLA:
    a few ulps of float64. Sums and products may add up in another order: n ulps.
    """
    if "sums" in op.tags or "products" in op.tags:
        return 1e-12
    if "approx" in op.tags or op.name in APPROX_BODIES:
        return 1e-13
    return 0.0


def promoted(op: OpDef, inputs: list[np.ndarray], dtypes: list[str]) -> list[np.ndarray]:
    """Operands as the float64 reference sees them (own-dtype ops keep theirs)."""
    inputs = [flush_subnormals(x) for x in inputs]
    if op.own_dtypes:
        return inputs
    return [x.astype(np.float64) if d in ("f32", "bf16", "f16") else x for x, d in zip(inputs, dtypes, strict=True)]


def assert_agrees(got: np.ndarray, want: np.ndarray, error: float, what: str,
                  judged: np.ndarray | None = None) -> None:
    assert got.shape == want.shape, what
    assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
    if error == 0.0 or want.dtype.kind not in "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    if judged is not None:
        got, want = got[judged], want[judged]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN pattern")
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=f"{what}: inf pattern")
    finite = np.isfinite(want)
    # Relative to the magnitude of the element, with a floor of 1 (a result near zero
    # from cancellation carries the absolute error of its terms).
    scale = np.maximum(np.abs(want[finite]), 1.0)
    worst = np.max(np.abs(got[finite] - want[finite]) / scale, initial=0.0)
    assert worst <= error, f"{what}: relative error {worst:.3g} > {error:.3g}"


CASES = [(name, dtype) for name in sorted(OPS) for dtype in OPS[name].dtypes]


@pytest.mark.parametrize(("name", "dtype"), CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_numpy_column_agrees_with_float64_eager(name: str, dtype: str) -> None:
    op = OPS[name]
    graph = single_op(name, dtype, seed=3)
    assert graph is not None
    (node,) = graph.nodes
    for special in (False, True):
        inputs = make_inputs({"seed": 3, "index": int(special), "special": special}, graph.inputs)
        # Both sides get the same float64 operands, subnormals flushed as XLA:CPU reads
        # them (flush_subnormals); the column's result is flushed as XLA:CPU writes it.
        operands = promoted(op, inputs, [v.dtype for v in graph.inputs])
        (want,) = evaluate.eager(graph, operands, promote=True)
        by_value = {i: operands[v.input] for i, v in enumerate(graph.values) if v.input is not None}
        args = [by_value[i] for i in node.args]
        got = np.asarray(op.numpy(node.attrs, *args))
        out_dtype = graph.values[graph.outputs[0]].dtype
        if not (op.own_dtypes and got.dtype == np.float64):
            got = flush_subnormals(got)  # XLA:CPU writes arithmetic results flushed
        if out_dtype in ("f32", "bf16", "f16"):
            got = got.astype(np.float64)  # what the reference does with every float result
        assert_agrees(got, want, stated_error(op), f"{name}/{dtype} special={special} attrs={node.attrs}",
                      terms_in_range(op, node.attrs, args))


def terms_in_range(op: OpDef, attrs: dict, args: list[np.ndarray]) -> np.ndarray | None:
    """For an op that adds up terms: where the sum of their magnitudes stays finite. Beyond
    it a partial sum overflows in one order and not in another (inf vs NaN): no verdict."""
    if "sums" not in op.tags or attrs.get("kind", "add") != "add":
        return None
    with np.errstate(all="ignore"):
        magnitude = op.numpy(attrs, *[np.abs(x) if x.dtype.kind == "f" else x for x in args])
    return np.isfinite(np.asarray(magnitude, np.float64))
