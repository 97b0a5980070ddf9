"""Issue 39's cut of `eager`'s compiles: an entry evaluated primitive by primitive
(evaluate.by_primitive: its builder traced to a jaxpr, elementwise primitives on a bucket,
data movement in numpy, the rest bound alone) gives the bits its builder gives evaluated
eagerly, which is what `eager` means, for every entry of the op table at every dtype it
takes, and for the templates across shapes; and it compiles less."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jax
import numpy as np
import pytest
from jax import lax
from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.ops.lax_builders import build
from xla_sentinel.ops.table import OPS
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import single_op
from xla_sentinel.programs.inputs import make_array

pytestmark = pytest.mark.usefixtures("x64")

DTYPES = ("f16", "bf16", "f32", "f64", "s32", "u8", "bool")


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Bit for bit: dtype, shape and every byte (a NaN's sign and payload too)."""
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def _check_entry(name: str, dtype: str, seed: int) -> int:
    """by_primitive against the eager builder on one generated plan, random and special
    inputs; the number of comparisons made (0 where no plan fits)."""
    graph = single_op(name, dtype, seed=seed)
    if graph is None:
        return 0
    (node,) = graph.nodes
    rng = np.random.default_rng([seed, 39])
    for special in (False, True):  # special: infinities, NaNs, zeros, subnormals, huge values
        xs = [
            make_array(rng, tuple(graph.values[i].shape), graph.values[i].dtype, special)
            for i in node.args
        ]
        want = np.asarray(build(OPS[name], node.attrs, *map(evaluate.on_device, xs)))
        got = evaluate.by_primitive(OPS[name], node.attrs, xs)
        assert _same_bits(got, want), (
            name,
            dtype,
            seed,
            special,
            node.attrs,
            [x.shape for x in xs],
        )
    return 2


CASES = [(name, dtype) for name in sorted(OPS) for dtype in DTYPES if dtype in OPS[name].dtypes]


@pytest.mark.parametrize(("name", "dtype"), CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_an_entry_by_primitive_has_the_bits_of_its_eager_builder(name: str, dtype: str) -> None:
    _check_entry(name, dtype, seed=0)


TEMPLATES = sorted(n for n, op in OPS.items() if op.family == "templates")


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("name", TEMPLATES)
def test_a_template_by_primitive_has_the_bits_of_its_eager_builder_across_shapes(
    name: str, dtype: str
) -> None:
    # Seeds draw other plans: ranks 1 to 3, sizes up to 17 (attention's S, T and D apart).
    assert sum(_check_entry(name, dtype, seed) for seed in range(1, 7)) >= 8


# Each bucketed primitive alone, through a lax function that binds it once.
PRIMITIVE_FNS: dict[str, Callable[..., Any]] = {
    "add": lax.add,
    "sub": lax.sub,
    "mul": lax.mul,
    "div": lax.div,
    "max": lax.max,
    "min": lax.min,
    "neg": lax.neg,
    "abs": lax.abs,
    "sqrt": lax.sqrt,
    "rsqrt": lax.rsqrt,
    "tanh": lax.tanh,
    "logistic": lax.logistic,
    "eq": lax.eq,
    "ne": lax.ne,
    "lt": lax.lt,
    "le": lax.le,
    "gt": lax.gt,
    "ge": lax.ge,
    "convert_element_type": lambda x: lax.convert_element_type(
        x, np.float32 if x.dtype == np.float64 else np.float64
    ),
    "clamp": lambda lo, x, hi: lax.clamp(lax.min(lo, hi), x, lax.max(lo, hi)),
}


UNARY = frozenset({"neg", "abs", "sqrt", "rsqrt", "tanh", "logistic", "convert_element_type"})


def test_every_bucketed_primitive_is_checked() -> None:
    assert set(PRIMITIVE_FNS) == evaluate.BUCKETED_PRIMITIVES


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64", "s32"])
@pytest.mark.parametrize("name", sorted(PRIMITIVE_FNS))
def test_a_bucketed_primitive_has_the_bits_of_the_primitive_on_its_real_shape(
    name: str, dtype: str
) -> None:
    fn = PRIMITIVE_FNS[name]
    if dtype == "s32" and name in UNARY - {"neg", "abs", "convert_element_type"}:
        return  # float-only primitives
    rng = np.random.default_rng(39)
    arity = 1 if name in UNARY else 3 if name == "clamp" else 2
    # 1,763 elements (a tail of 3 past a multiple of 8, the 16,384 bucket), odd small shapes.
    for shape in [(41, 43), (3, 5, 7), (1,), (6,)]:
        for special in (False, True):
            xs = [make_array(rng, shape, dtype, special) for _ in range(arity)]
            (*_, eqn) = jax.make_jaxpr(fn)(
                *[jax.ShapeDtypeStruct(shape, NP_DTYPES[dtype])] * arity
            ).jaxpr.eqns
            if name == "clamp":  # ordered bounds: the lax function's min and max
                xs = [np.minimum(xs[0], xs[2]), xs[1], np.maximum(xs[0], xs[2])]
            want = np.asarray(eqn.primitive.bind(*map(evaluate.on_device, xs), **eqn.params))
            (got,) = evaluate._primitive(eqn.primitive, eqn.params, xs, [shape])
            assert _same_bits(got, want), (name, dtype, shape, special)
        # A rank-0 operand (a template's literal constant, clamp's bounds), which the kernel
        # broadcasts: broadcast first and bucketed (evaluate.SCALAR_OPERAND_PRIMITIVES), or
        # left at its real shape (division, max, min, clamp: see there).
        for special in (False, True):
            if arity == 1:
                break
            x = make_array(rng, shape, dtype, special)
            cs = [make_array(rng, (), dtype, special) for _ in range(arity - 1)]
            if name == "clamp":
                cs = sorted(cs, key=float) if not any(np.isnan(np.float64(c)) for c in cs) else cs
                args, structs = [cs[0], x, cs[1]], [(), shape, ()]
            else:
                args, structs = [x, cs[0]], [shape, ()]
            (eqn,) = jax.make_jaxpr(lax.clamp if name == "clamp" else fn)(
                *[jax.ShapeDtypeStruct(s, NP_DTYPES[dtype]) for s in structs]
            ).jaxpr.eqns
            want = np.asarray(eqn.primitive.bind(*map(evaluate.on_device, args), **eqn.params))
            (got,) = evaluate._primitive(eqn.primitive, eqn.params, args, [shape])
            assert _same_bits(got, want), (name, dtype, shape, special, "rank-0 operand")


# Primitives that move bits (evaluate.MOVED_PRIMITIVES), each through a lax function that
# binds it once; dynamic_slice's starts out of range on both sides (XLA clamps them).
MOVED_FNS: dict[str, Callable[..., Any]] = {
    "broadcast_in_dim": lambda x: lax.broadcast_in_dim(x, (2, 5, 6, 7), (1, 2, 3)),
    "reshape": lambda x: lax.reshape(x, (x.shape[1], x.shape[0] * x.shape[2])),
    "squeeze": lambda x: lax.squeeze(lax.expand_dims(x, (1,)), (1,)),
    "transpose": lambda x: lax.transpose(x, (2, 0, 1)),
    "rev": lambda x: lax.rev(x, (0, 2)),
    "concatenate": lambda x: lax.concatenate([x, x[::-1]], 1),
    "slice": lambda x: lax.slice(x, (1, 0, 1), (4, 5, 7), (2, 2, 3)),
    "dynamic_slice": lambda x, i, j, k: lax.dynamic_slice(x, (i, j, k), (3, 2, 4)),
}


def test_every_moved_primitive_is_checked() -> None:
    assert set(MOVED_FNS) == evaluate.MOVED_PRIMITIVES


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64", "s32", "u8", "bool"])
@pytest.mark.parametrize("name", sorted(MOVED_FNS))
def test_a_moved_primitive_in_numpy_has_the_bits_of_the_primitive(name: str, dtype: str) -> None:
    rng = np.random.default_rng(13)
    shape = (5, 6, 7)
    for special in (False, True):  # NaN payloads, subnormals: copied, not computed on
        x = make_array(rng, shape, dtype, special)
        starts = [[np.int32(-3), np.int32(9), np.int32(2)], [np.uint8(200), np.uint8(1), np.uint8(7)],
                  [np.int64(2), np.int64(-1), np.int64(-9)]]
        for extra in starts if name == "dynamic_slice" else [[]]:
            args = [x, *map(np.asarray, extra)]
            (eqn,) = [e for e in jax.make_jaxpr(MOVED_FNS[name])(
                *[jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]
            ).jaxpr.eqns if e.primitive.name == name]
            operands = [x] if name != "concatenate" else [x, x[::-1]]
            if name == "dynamic_slice":
                operands = args
            if name == "squeeze":
                operands = [x.reshape(5, 1, 6, 7)]
            want = np.asarray(eqn.primitive.bind(*map(evaluate.on_device, operands), **eqn.params))
            (got,) = evaluate._primitive(eqn.primitive, eqn.params, operands,
                                         [tuple(eqn.outvars[0].aval.shape)])
            assert _same_bits(got, want), (name, dtype, special, extra)


@pytest.mark.parametrize("name", ["max", "min", "clamp"])
def test_an_f16_nan_against_a_rank0_operand_keeps_the_real_shapes_bits(name: str) -> None:
    """max(NaN, 0.0) in f16 (relu inside mlp_block) has other NaN bits with the 0.0 rank-0
    than broadcast, so these primitives keep a rank-0 operand as it came."""
    d = NP_DTYPES["f16"]
    x = np.resize(np.array([np.nan, -np.nan, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 3.0]), (7, 7, 3)).astype(d)
    bounds = [np.asarray(-1.0, d), np.asarray(1.0, d)]
    args = [bounds[0], x, bounds[1]] if name == "clamp" else [x, bounds[1]]
    fn = lax.clamp if name == "clamp" else PRIMITIVE_FNS[name]
    (eqn,) = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(np.shape(a), d) for a in args]).jaxpr.eqns
    want = np.asarray(eqn.primitive.bind(*map(evaluate.on_device, args), **eqn.params))
    (got,) = evaluate._primitive(eqn.primitive, eqn.params, args, [x.shape])
    assert _same_bits(got, want), name
    # Why: broadcast, the bits differ.
    full = [np.array(np.broadcast_to(a, x.shape)) for a in args]
    assert not _same_bits(np.asarray(eqn.primitive.bind(*map(evaluate.on_device, full), **eqn.params)), want)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "max", "min"])
def test_nans_of_both_operands_keep_the_real_shapes_choice(name: str, dtype: str) -> None:
    """-NaN op +NaN at one element: which NaN comes out depends on the kernel's shape (bf16
    mul at (7, 7, 3) against its bucket, found inside layer_norm), so it is not bucketed."""
    shape = (7, 7, 3)
    x = np.full(shape, -np.nan, NP_DTYPES[dtype])
    y = np.full(shape, np.nan, NP_DTYPES[dtype])
    x[0, 0, 0] = y[0, 0, 0] = 1.5  # and a finite element beside them
    (eqn,) = jax.make_jaxpr(PRIMITIVE_FNS[name])(
        *[jax.ShapeDtypeStruct(shape, NP_DTYPES[dtype])] * 2).jaxpr.eqns
    want = np.asarray(eqn.primitive.bind(evaluate.on_device(x), evaluate.on_device(y), **eqn.params))
    (got,) = evaluate._primitive(eqn.primitive, eqn.params, [x, y], [shape])
    assert _same_bits(got, want), (name, dtype)


@pytest.mark.parametrize("name", ["add", "mul"])
def test_an_entry_with_nans_of_both_operands_is_not_bucketed(name: str) -> None:
    """The same for an elementwise entry of the op table, which the op-by-op evaluations
    bucket whole (evaluate._bucketable): bucketed, a bf16 -NaN op +NaN at (7, 7, 3) has the
    other NaN than at its real shape, so such operands are evaluated at their shape."""
    shape = (7, 7, 3)
    xs = [np.full(shape, np.copysign(np.nan, sign), NP_DTYPES["bf16"]) for sign in (-1, 1)]
    real = np.asarray(build(OPS[name], {}, *map(evaluate.on_device, xs)))
    assert not _same_bits(evaluate._bucketed(OPS[name], {}, xs, shape), real)  # why
    assert not evaluate._bucketable(OPS[name], {}, xs, shape)
    xs[0][0, 0, 0] = 1.0  # one NaN apiece is fine: XLA returns it at any shape
    xs[0] = np.where(np.isnan(xs[0]), np.float32(2), xs[0]).astype(xs[0].dtype)
    assert evaluate._bucketable(OPS[name], {}, xs, shape)


@contextmanager
def _counting_compiles() -> Iterator[list[int]]:
    count = [0]

    def listener(event: str, duration: float, **_: Any) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield count
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def test_a_template_on_a_new_shape_compiles_only_its_reductions_and_exp() -> None:
    """softmax over the last axis is reduce_max, broadcast, sub, exp, reduce_sum, broadcast,
    div: eagerly six compiles on a shape not seen before (the two broadcasts are one); primitive
    by primitive the broadcasts are numpy's and sub and div hit their bucket, so three."""
    op, attrs = OPS["softmax"], {"axis": 1}
    rng = np.random.default_rng(5)
    jax.clear_caches()  # what earlier tests compiled at these shapes would be counted out
    evaluate.by_primitive(
        op, attrs, [make_array(rng, (5, 9), "f32", False)]
    )  # sub, div: bucket 1,024
    with _counting_compiles() as by_primitive:
        evaluate.by_primitive(op, attrs, [make_array(rng, (7, 11), "f32", False)])
    with _counting_compiles() as eagerly:
        build(op, attrs, evaluate.on_device(make_array(rng, (13, 3), "f32", False)))
    assert by_primitive[0] == 3
    assert eagerly[0] == 6
