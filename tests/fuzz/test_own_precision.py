"""The own-precision `eager` reference in numpy (runners/xla_sentinel/references/own_precision.py) against XLA:CPU
op by op: value for value equal (bit for bit, any NaN equal to any NaN) per (op, dtype)
on random and special inputs, and on generated programs with special values. A failing
case is a wrong `reproduces` claim (or a wrong rounding path in `apply`)."""

from __future__ import annotations

from collections import Counter

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.ops.lax_builders import build
from xla_sentinel.ops.numpy_forms import np_reduce
from xla_sentinel.ops.table import OPS
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import generate, single_op
from xla_sentinel.programs.inputs import make_array, make_inputs
from xla_sentinel.references import own_precision
from xla_sentinel.spec.campaign import GeneratorSpec

pytestmark = pytest.mark.usefixtures("x64")


def differences(got: np.ndarray, want: np.ndarray) -> str:
    """"" when equal value for value: same bits, or both NaN (XLA fixes no NaN payload)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)} against {want.dtype}{list(want.shape)}"
    if got.dtype.kind == "f" or got.dtype == ml_dtypes.bfloat16:
        bits = f"u{got.dtype.itemsize}"
        nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
        bad = (got.view(bits) != want.view(bits)) & ~nan
    else:
        bad = got != want
    if not bad.any():
        return ""
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {bad.size} differ, first at {where}: {got[where]!r} against {want[where]!r}"


def claimed(graph: Graph) -> bool:
    (node,) = graph.nodes
    return own_precision.reproduces(OPS[node.op], node.attrs, [graph.values[i].dtype for i in node.args],
                                    graph.values[graph.outputs[0]].dtype)


CASES = [(name, dtype) for name in sorted(OPS) for dtype in OPS[name].dtypes]


@pytest.mark.parametrize(("name", "dtype"), CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_numpy_reproduces_xla_eager_per_op(name: str, dtype: str) -> None:
    judged = 0
    for seed in (0, 1):
        graph = single_op(name, dtype, seed=seed)
        if graph is None or not claimed(graph):
            continue
        for special in (False, True):
            inputs = make_inputs({"seed": seed, "index": int(special), "special": special}, graph.inputs)
            xla: Counter[str] = Counter()
            (got,) = evaluate.literal(graph, inputs, xla)
            (want,) = evaluate.eager(graph, inputs)
            what = f"{name}/{dtype} seed {seed} special {special} attrs {graph.nodes[0].attrs}"
            assert differences(got, want) == "", what
            judged += not xla
            if not special:
                # Random inputs hold no subnormal: a claimed op is numpy's there, or this
                # test compares XLA with itself.
                assert not xla, f"{what}: went to XLA"
    if judged == 0:
        assert not any(claimed(g) for g in (single_op(name, dtype, seed=s) for s in (0, 1)) if g)


PROGRAMS = GeneratorSpec(version=1, minOps=2, maxOps=16, dtypes=["f32", "bf16", "f16", "f64", "s32", "u8", "bool"])


@pytest.mark.parametrize("special", [False, True])
def test_numpy_reproduces_xla_eager_on_generated_programs(special: bool) -> None:
    xla: Counter[str] = Counter()
    numpy_ops = 0
    for index in range(40):
        graph = generate(17, index, PROGRAMS)
        inputs = make_inputs({"seed": 17, "index": index, "special": special}, graph.inputs)
        before = sum(xla.values())
        got = evaluate.literal(graph, inputs, xla)
        numpy_ops += len(graph.nodes) - (sum(xla.values()) - before)
        want = evaluate.eager(graph, inputs)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert differences(g, w) == "", f"s17-i{index} output {k} special {special}"
    # Most ops are numpy's; what still goes to XLA is transcendentals and sums (and, with
    # special inputs, an op whose operand holds a subnormal).
    assert numpy_ops > sum(xla.values())
    if not special:
        assert not set(xla) & {"add", "mul", "select", "reshape", "convert", "compare_lt"}


def test_f64_to_bf16_and_f16_round_through_f32_as_xla_cpu_does() -> None:
    # XLA:CPU converts f64 to bf16 and f16 through f32: two roundings. Just above the
    # midpoint of 1 and the next bf16 the correctly rounded result is 1 + 2^-7; through f32
    # the 2^-30 is lost first and the tie goes to even, 1.
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-30, 1.5], np.float64)
    op = OPS["convert"]
    want = np.asarray(lax.convert_element_type(jnp.asarray(x), jnp.bfloat16))
    assert own_precision.reproduces(op, {"dtype": "bf16"}, ["f64"], "bf16")
    got = own_precision.apply(op, {"dtype": "bf16"}, [x], "bf16")
    assert got is not None and differences(got, want) == ""
    assert float(got[0]) == 1.0
    # f64 -> f16 is host-dependent in XLA:CPU: through f32 on the earlier test hosts (1.0 for
    # x[1]), once on a later one (1 + 2^-10), same jaxlib. The eager reference leaves it to XLA.
    f16 = np.asarray(lax.convert_element_type(jnp.asarray(x), jnp.float16))
    assert float(f16[1]) in (1.0, 1 + 2**-10)
    assert not own_precision.reproduces(op, {"dtype": "f16"}, ["f64"], "f16")
    assert own_precision.reproduces(op, {"dtype": "f16"}, ["f32"], "f16")
    big = np.array([2**24 + 2**16 + 1], np.int32)  # s32 -> f32 -> bf16, also twice
    want = np.asarray(lax.convert_element_type(jnp.asarray(big), jnp.bfloat16))
    assert differences(own_precision.apply(op, {"dtype": "bf16"}, [big], "bf16"), want) == ""
    assert float(want[0]) == 2**24


def test_iota_rounds_its_ramp_at_the_dtype() -> None:
    # bf16 holds every integer up to 256 only: the ramp 257, 259, ... is rounded before the
    # add, as XLA's bf16 iota is (the float64 column would add exact integers).
    graph = Graph(values=[Value((1, 300), "bf16", input=0), Value((1, 300), "bf16", node=0)],
                  nodes=[Node("iota", [0], {"dim": 1})], outputs=[1])
    x = np.full((1, 300), 0.5, ml_dtypes.bfloat16)
    xla: Counter[str] = Counter()
    (got,) = evaluate.literal(graph, [x], xla)
    assert not xla
    assert differences(got, evaluate.eager(graph, [x])[0]) == ""


def test_max_reductions_order_zeros_as_lax() -> None:
    # lax: +0 above -0 in a max, in either order; numpy's maximum keeps the first zero.
    for vals in ([-0.0, 0.0], [0.0, -0.0], [-1.0, -0.0, 0.0, -0.0]):
        x = np.array(vals, np.float32)
        for kind, fn in (("max", lax.reduce_max), ("min", lax.reduce_min)):
            want = np.asarray(fn(jnp.asarray(x), (0,)))
            assert differences(np_reduce(x, kind, [0]), want) == "", (vals, kind)
        want = np.asarray(lax.cummax(jnp.asarray(x), 0))
        got = OPS["cummax"].numpy({"axis": 0, "reverse": False}, x)
        assert differences(got, want) == "", vals


def test_a_subnormal_operand_is_left_to_xla_except_where_xla_moves_bits() -> None:
    tiny = np.float32(ml_dtypes.finfo(np.float32).tiny)
    x = np.array([tiny / 4, -1.0], np.float32)  # max(sub, -1) is 0 on XLA:CPU (flushed)
    assert own_precision.apply(OPS["max"], {}, [x, np.float32(-1.0) * np.ones(2, np.float32)], "f32") is None
    moved = own_precision.apply(OPS["rev"], {"dims": [0]}, [x], "f32")
    assert moved is not None and moved[1] == tiny / 4  # rev copies it, as XLA:CPU does
    # A result next to the flush threshold: the hardware decides, XLA does it.
    y = np.array([tiny * np.float32(1.5)], np.float32)
    assert own_precision.apply(OPS["mul"], {}, [y, np.ones(1, np.float32)], "f32") is None


# The elementwise ops numpy does not reproduce (bucketed in every program), and a few it
# leaves to XLA on subnormal operands.
ELEMENTWISE = [(name, dtype) for name in sorted(OPS) if OPS[name].category == "elementwise"
               and ("approx" in OPS[name].tags or name in ("add", "max", "compare_lt", "select_compare"))
               for dtype in OPS[name].dtypes]
# Lengths around the vector width (8 lanes of f32), tails of 1 and 7, a minor dimension of 1.
SHAPES = [(3,), (7,), (15,), (17,), (5, 7), (15, 1)]


@pytest.mark.parametrize(("name", "dtype"), ELEMENTWISE, ids=[f"{n}-{d}" for n, d in ELEMENTWISE])
def test_a_bucketed_elementwise_op_equals_the_op_on_its_real_shape(name: str, dtype: str) -> None:
    op = OPS[name]
    base = single_op(name, dtype, seed=0)
    assert base is not None
    (node,) = base.nodes
    arg_dtypes = [base.values[i].dtype for i in node.args]
    rng = np.random.default_rng(5)
    for shape in SHAPES:
        for special in (False, True):
            xs = [make_array(rng, shape, d, special) for d in arg_dtypes]
            want = np.asarray(build(op, node.attrs, *map(jnp.asarray, xs)))
            if name in evaluate.SHAPE_DEPENDENT:
                continue
            assert evaluate._bucketable(op, node.attrs, xs, shape)
            got = evaluate._bucketed(op, node.attrs, xs, shape)
            assert differences(got, want) == "", f"{name}/{dtype} {shape} special {special}"


def test_f32_exp_log_and_erf_depend_on_the_shape_so_they_are_not_bucketed() -> None:
    # The reasons for SHAPE_DEPENDENT: XLA:CPU's f32 erf takes another path with a minor
    # dimension of 1 (1.0 where a flat array gives 0.9999999), f32 exp and log another on
    # an array of 7 elements than on the same elements in a longer one.
    x = np.linspace(3.74, 3.78, 64, dtype=np.float32)
    assert differences(np.asarray(lax.erf(jnp.asarray(x[:, None])))[:, 0], np.asarray(lax.erf(jnp.asarray(x)))) != ""
    y = np.linspace(0.5, 7.5, 7 * 64, dtype=np.float32)
    for fn in (lax.exp, lax.log):
        long = np.asarray(fn(jnp.asarray(y)))
        short = np.concatenate([np.asarray(fn(jnp.asarray(c))) for c in y.reshape(-1, 7)])
        assert differences(short, long) != ""
    for name in ("exp", "log", "erf"):
        assert not evaluate._bucketable(OPS[name], {}, [y], y.shape)
