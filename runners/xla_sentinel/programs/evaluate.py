"""Evaluate a generated program's graph: as one traced function, or op by op. Each
evaluation is the graph's one walk (core/graph.py `Graph.run`) with its own `apply`.

Op-by-op evaluation is the `eager` reference (each primitive compiled alone, so no
fusion); with `promote=True` it is the float64 reference, and with a `perturb` generator
it is the noise model: every float op output moved by u*U(-1, 1) times its rounding scale
(|output| for an op that rounds once, more for long reductions: `_rounding_scale`), u the
unit roundoff of the op's own dtype, which measures how much legal rounding can move
outputs. A `directed` noise sample instead moves every float op output the same way by its
largest legal rounding: one ulp (2u times its scale) for a transcendental function, which
XLA may round faithfully rather than correctly, half an ulp (u) for the rest; and the
systematic drift a random sample almost never reaches. A template that chooses inside
itself (topk_routing) is evaluated by its noisy form (templates.NOISY_FORMS), which
perturbs what it chooses by; moving its result alone never flips the choice.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from xla_sentinel.core.dtypes import NP_DTYPES, UNIT_ROUNDOFF
from xla_sentinel.core.graph import Graph, Node
from xla_sentinel.core.names import NARROW_FLOATS
from xla_sentinel.ops.entries.templates import INNER_TERMS, NOISY_FORMS
from xla_sentinel.ops.lax_builders import build
from xla_sentinel.ops.numpy_forms import float_info, np_dynamic_slice
from xla_sentinel.ops.table import OPS
from xla_sentinel.references import own_precision

F64 = jnp.float64


class _StructOf(Protocol):
    def __call__(self, shape: Sequence[int], dtype: np.dtype[Any], *,
                 sharding: Any = None) -> jax.ShapeDtypeStruct: ...


# jax leaves ShapeDtypeStruct's constructor unannotated: its signature, so that calls are checked.
shape_struct: _StructOf = jax.ShapeDtypeStruct


def on_device(x: Any) -> jax.Array:
    """A host array on the device, bit for bit. Not jnp.asarray: jax 0.10 stages an ndarray
    through a compiled identity (lax.stage), one XLA compile per shape and dtype, 69 of the
    256 compiles of `eager` over 80 programs (issue 39; tests/fuzz/test_own_precision.py)."""
    placed: jax.Array = jax.device_put(np.asarray(x))
    return placed


def _is_float(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.floating)


def _apply(graph: Graph, args: list[Any], promote: bool,
           perturb: np.random.Generator | None, sign: float = 1.0,
           directed: bool = False,
           observe: Callable[[int, Node, Any, list[Any], Any], None] | None = None,
           concrete: bool = False) -> tuple[Any, ...]:
    """Evaluate op by op; `observe(value, node, op, args, out)` sees each unperturbed result.
    `concrete`: the arguments are arrays, not tracers (an evaluation, not a lowering), so an
    elementwise op may be evaluated on a bucket (`_bucketed`) and the noise in numpy."""

    def load(v: int, x: Any) -> Any:
        return x.astype(F64) if promote and _is_float(x) else x

    def apply(v: int, node: Node, xs: list[Any]) -> Any:
        op = OPS[node.op]
        xs = own_operands(graph, node, xs)
        shape = tuple(graph.values[v].shape)
        if concrete and _bucketable(op, node.attrs, xs, shape):
            out = on_device(_bucketed(op, node.attrs, xs, shape))
        elif concrete:
            out = on_device(by_primitive(op, node.attrs, xs))
        else:
            out = build(op, node.attrs, *xs)
        if promote and _is_float(out) and out.dtype != F64:
            out = out.astype(F64)
        if observe is not None:
            observe(v, node, op, xs, out)
        if (directed or perturb is not None) and _is_float(out):
            u = UNIT_ROUNDOFF[graph.values[v].dtype]
            if node.op in NOISY_FORMS:
                # A template's discrete choice is inside it, out of reach of a perturbation
                # of its result: its noisy form perturbs what it chooses by.
                noisy = np.asarray(NOISY_FORMS[node.op](node.attrs, [np.asarray(x) for x in xs], u, sign,
                                                        None if directed else perturb))
                out = (on_device(noisy) if concrete and noisy.dtype == out.dtype
                       else jnp.asarray(noisy, out.dtype))
            # Directed: one ulp (2u) for a transcendental function, which may be an ulp
            # off; half an ulp (u) for the correctly rounded ops (arithmetic, sqrt,
            # converts), or a one-ulp rounding bug in them would look legal.
            step: float | npt.NDArray[np.float64]
            if directed:
                step = (2.0 if "approx" in op.tags else 1.0) * sign
            else:
                assert perturb is not None  # not directed: the test above says perturbed
                step = sign * perturb.uniform(-1.0, 1.0, size=out.shape)
            moved = _moved_in_numpy(op, node.attrs, xs, out, u * step) if concrete and out.dtype == F64 else None
            if moved is not None:
                out = on_device(moved)
            else:
                out = out + jnp.asarray(u * step, out.dtype) * _rounding_scale(op, node.attrs, xs, out)
        return out

    return tuple(graph.run(args, apply, load))


# The smallest normal float64. XLA:CPU's float64 arithmetic reads a subnormal as zero and
# flushes a subnormal result (own_precision.py); numpy does neither, and at the threshold
# whether the hardware flushes is its own decision. The noise in numpy is taken only where
# no value it reads or makes is nonzero below twice this, which leaves IEEE 754's correctly
# rounded +, *, sqrt and the exact abs, max and select: XLA:CPU's bits. Nor where a NaN
# comes out (below).
_F64_TINY = float(np.finfo(np.float64).tiny)


def _near_flush(*arrays: Any) -> bool:
    for a in arrays:
        mag = np.abs(np.asarray(a, np.float64))
        if ((mag > 0) & (mag < 2 * _F64_TINY)).any():
            return True
    return False


def _moved_in_numpy(op: Any, attrs: dict[str, Any], xs: list[Any], out: Any, step: Any) -> np.ndarray | None:
    """`out + step * _rounding_scale(...)` as the noise model computes it through XLA, in
    numpy, bit for bit, or None where a value is near the flush threshold (XLA does it then).
    Each of these float64 ops alone through XLA is one compile per shape, a third of the
    noise model's compiles on programs of every shape family (issue 39); numpy's are the
    same IEEE 754 operations, one at a time, in the same order."""
    value = np.asarray(out)
    scale = np.asarray(_rounding_scale(op, attrs, xs, value, np))
    offset = np.asarray(step, np.float64)
    with np.errstate(all="ignore"):
        product = offset * scale
        moved = value + product
    if _near_flush(value, scale, offset, product, moved) or np.isnan(moved).any():
        # A NaN's sign and payload are whichever operand the hardware instruction passes
        # on, and XLA orders the operands its own way (s5-i6 of every family: XLA's
        # -NaN + +NaN gave -NaN, numpy's +NaN): XLA decides them.
        return None
    return np.asarray(moved, np.float64)


def own_operands(graph: Graph, node: Node, xs: list[Any]) -> list[Any]:
    """The operands of `node` as its op reads them: cast back to their own dtypes for an op
    that computes in them (OpDef.own_dtypes: bit casts, nextafter), which promoted
    operands would change the meaning of; as they are for every other op."""
    if not OPS[node.op].own_dtypes:
        return xs
    return [x.astype(NP_DTYPES[graph.values[i].dtype]) for x, i in zip(xs, node.args, strict=True)]


def _rounding_scale(op: Any, attrs: dict[str, Any], xs: list[Any], out: Any, xp: Any = jnp) -> Any:
    """Per element, how far legal rounding can move an op's output, in units of u.

    An op that rounds once: |out|. An op that accumulates n terms: sqrt(n) times the sum of
    the terms' magnitudes (`sums`: dot, conv, sums) or sqrt(n) |out| (`products`), the
    probabilistic bound for recursive or blocked evaluation (Higham and Mary, 2019). One
    rounding of the output alone underestimates a long reduction: clean-run program
    s6-i2349, an f16 product of 3,264 terms, differed legally by 8% between targets
    while that noise model allowed 0.2%.
    """
    magnitude = _terms_magnitude(op, attrs, xs, xp)
    with np.errstate(all="ignore"):
        if magnitude is not None:
            if xp is np:  # concrete operands: the entry primitive by primitive
                n = by_primitive(op, attrs, [np.ones(np.shape(x), x.dtype) if _is_float(x) else x for x in xs])
            else:
                n = build(op, attrs, *[jnp.ones_like(x) if _is_float(x) else x for x in xs])
            return xp.sqrt(xp.maximum(n, 1.0)) * magnitude
        if "products" in op.tags:
            x = xs[0]
            n = math.prod(x.shape[a] for a in attrs["axes"]) if "axes" in attrs else x.shape[attrs["axis"]]
            return math.sqrt(max(n, 1)) * xp.abs(out)
        return xp.abs(out)


def _terms_magnitude(op: Any, attrs: dict[str, Any], xs: list[Any], xp: Any = jnp) -> Any | None:
    """For an op that adds up terms, the sum of their finite terms' magnitudes per output
    element: with an inf among the terms (f16 [inf, -32750, -32750, -32750]) the finite
    ones may still add up to -inf in one order, and inf + -inf is NaN there (s25-i256:
    O0 and no_fusion_emitters NaN, default and float64 inf, then logistic 1.0)."""
    if "sums" not in op.tags or attrs.get("kind", "add") != "add":
        return None
    if xp is np:  # numpy's terms, the entry on them primitive by primitive
        return by_primitive(op, attrs, [np.where(np.isfinite(h), np.abs(h), 0).astype(h.dtype)
                                        if _is_float(x) else h for x, h in ((x, np.asarray(x)) for x in xs)])
    return build(op, attrs, *[jnp.where(jnp.isfinite(x), jnp.abs(x), 0) if _is_float(x) else x for x in xs])


def overflow_prone(graph: Graph, inputs: list[np.ndarray]) -> list[bool]:
    """Per output: does it depend on an op that leaves its own dtype's range in float64?

    That is an op whose float64 result is finite but beyond the largest finite value of
    its dtype, or an op that accumulates (`sums` tag: dot, conv, sums) whose terms' magnitudes
    add up beyond it. There an overflow is legal in one configuration and not in another:
    a product rounded to inf before an add, or kept by an FMA (a clean-run f32 dot,
    1.7e38 * 3 - 2.1e38); a partial sum beyond the range in one order only; an f16 value
    kept in f32 by excess precision. Such an output may be non-finite where float64 is not.
    A template's own sums count too (templates.INNER_TERMS): attention's q . k may leave
    the range while its softmax-weighted result stays in it.
    """
    prone = [False] * len(graph.values)

    def observe(v: int, node: Node, op: Any, xs: list[Any], out: Any) -> None:
        dtype = graph.values[v].dtype
        prone[v] = any(prone[a] for a in node.args)
        if prone[v] or dtype not in UNIT_ROUNDOFF or not _is_float(out):
            return
        top = float(float_info(NP_DTYPES[dtype]).max)
        terms = _terms_magnitude(op, node.attrs, xs, np)
        magnitudes = [out]
        if node.op in INNER_TERMS:  # a template's own sums (s31-i125: q . k inside attention)
            magnitudes += INNER_TERMS[node.op](node.attrs, *[np.asarray(x) for x in xs])
        # An inf among the finite terms' magnitudes is their sum beyond float64's own range,
        # so beyond every dtype's: an f64 conv whose terms add up past 1.8e308 is -inf in one
        # order and -1.3e308 in another (clean run s41-i31). An inf result, by contrast, may
        # be an inf input passed through: only a finite one beyond the range counts.
        prone[v] = (terms is not None and bool((np.abs(np.asarray(terms)) > top).any())) or any(
            bool((np.isfinite(m) & (m > top)).any()) for m in map(np.abs, map(np.asarray, magnitudes)))

    _apply(graph, [on_device(x) for x in inputs], True, None, observe=observe, concrete=True)
    return [prone[i] for i in graph.outputs]


def traced(graph: Graph, promote: bool = False) -> Callable[..., tuple[Any, ...]]:
    """The program as one function of its inputs, for jax.jit."""
    return lambda *args: _apply(graph, list(args), promote, None)


def input_structs(graph: Graph, promote: bool = False) -> list[jax.ShapeDtypeStruct]:
    out = []
    for v in graph.inputs:
        dt = NP_DTYPES[v.dtype]
        if promote and v.dtype in NARROW_FLOATS:
            dt = NP_DTYPES["f64"]
        out.append(shape_struct(v.shape, dt))
    return out


def eager(graph: Graph, inputs: list[np.ndarray], promote: bool = False,
          perturb: np.random.Generator | None = None, sign: float = 1.0,
          directed: bool = False) -> list[np.ndarray]:
    """Op-by-op evaluation; outputs as numpy arrays. `sign` -1 mirrors the perturbation."""
    outs = _apply(graph, [on_device(x) for x in inputs], promote, perturb, sign, directed, concrete=True)
    return [np.asarray(o) for o in outs]


def literal(graph: Graph, inputs: list[np.ndarray],
            xla_ops: Counter[str] | None = None) -> list[np.ndarray]:
    """The `eager` reference: op by op at the program's own precision, in numpy for the ops
    whose XLA:CPU result numpy reproduces bit for bit (own_precision.py), each other op
    alone through XLA as `eager` does; `xla_ops` counts the latter by op name."""

    def apply(v: int, node: Node, xs: list[np.ndarray]) -> np.ndarray:
        value, op = graph.values[v], OPS[node.op]
        if own_precision.reproduces(op, node.attrs, [graph.values[i].dtype for i in node.args],
                                    value.dtype):
            out = own_precision.apply(op, node.attrs, xs, value.dtype)
            if out is not None:
                return out
        if xla_ops is not None:
            xla_ops[op.name] += 1
        if _bucketable(op, node.attrs, xs, value.shape):
            return _bucketed(op, node.attrs, xs, value.shape)
        return by_primitive(op, node.attrs, xs)

    return graph.run(inputs, apply, load=lambda v, x: np.asarray(x))


# Elementwise ops through XLA on flattened operands padded to one of a few fixed lengths
# (BUCKETS): jax compiles each primitive once per shape, so random shapes cost a compile
# per op and shape, and buckets turn those into cache hits across programs. Each
# primitive is still dispatched alone (its builder evaluated eagerly, as `eager` does), and an
# XLA:CPU elementwise result depends on the element alone, not on where it sits or how
# long the array is (tests/fuzz/test_own_precision.py, bitwise against the real shape),
# except for SHAPE_DEPENDENT ops. Few lengths, not every power of two: over 200 programs
# of examples/smoke.yaml one worker met 71 (op, dtypes, attrs, power-of-two length) keys
# and 39 (op, dtypes, attrs): the length was what missed the cache (issue 39). Computing
# 1,024 elements where 3 are needed costs microseconds; a compile, tens of milliseconds.
BUCKETS = (1 << 10, 1 << 14, 1 << 18, 1 << 22)
# Where an XLA:CPU result does depend on the shape (measured against the same elements in
# a 2,048-element array, every elementwise transcendental at each dtype and lengths 1 to
# 100): f32 exp and log on an array whose length, or its tail past a multiple of 8, is 3,
# 5, 6 or 7 (another code path, an ulp apart on up to a third of the elements); f32 erf on
# an array whose minor dimension is 1 (1.0 from |x| ~ 3.75 on, where a flat array gives
# 0.9999999). bf16 and f16 are computed through the same f32 kernels, so they are out too.
SHAPE_DEPENDENT = frozenset({"exp", "log", "erf"})


def bucket_size(n: int) -> int:
    """The padded length an elementwise op of `n` elements is evaluated at: the first of
    BUCKETS that holds it, past them the next power of two."""
    for size in BUCKETS:
        if n <= size:
            return size
    return 1 << (n - 1).bit_length()


def _bucketable(op: Any, attrs: dict[str, Any], xs: Sequence[Any], shape: tuple[int, ...]) -> bool:
    """An elementwise op whose operands all have its result's shape (no axis of its own:
    select_extremum reduces along one), no two of them NaN at one element (_nan_meets_nan:
    a bf16 add or mul of -NaN and +NaN differed between (7, 7, 3) and its bucket)."""
    return (op.category == "elementwise" and op.name not in SHAPE_DEPENDENT and "axis" not in attrs
            and len(shape) > 0 and all(np.shape(x) == shape for x in xs)
            and not _nan_meets_nan([np.asarray(x) for x in xs]))


def _bucketed(op: Any, attrs: dict[str, Any], xs: Sequence[Any], shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(build(op, attrs, *_on_bucket(xs)))[:math.prod(shape)].reshape(shape)


def _on_bucket(xs: Sequence[Any]) -> list[jax.Array]:
    """Operands of one shape, flattened and padded to their bucket, on the device. Padding
    with ones: a value every op's domain guard accepts; its results are dropped."""
    n = math.prod(np.shape(xs[0]))
    size = bucket_size(n)
    return [on_device(np.concatenate([np.ravel(x), np.ones(size - n, np.asarray(x).dtype)])) for x in xs]


def output_dtypes(graph: Graph) -> list[str]:
    return [graph.values[i].dtype for i in graph.outputs]


def lower_text(graph: Graph) -> str:
    """StableHLO text of the program at its own dtypes (what targets under test compile),
    with the inputs it donates marked so (the float64 lowering donates none)."""
    fn = jax.jit(traced(graph), keep_unused=True, donate_argnums=tuple(graph.donated))
    return fn.lower(*input_structs(graph)).as_text()


def lower_f64_text(graph: Graph) -> str:
    fn = jax.jit(traced(graph, promote=True), keep_unused=True)
    return fn.lower(*input_structs(graph, promote=True)).as_text()



# --- an entry primitive by primitive (issue 39) -------------------------------------------
# Evaluated eagerly, an entry's builder (lax_builders) binds each of its lax primitives alone,
# one XLA compile per primitive and shape: a template (softmax is reduce_max, broadcast, sub,
# exp, reduce_sum, broadcast, div) about ten per call, 157 of the 346 compiles of `eager` over
# 60 smoke and 40 families programs; a guarded transcendental (log is abs, add, log) three.
# That op-by-op evaluation is what `eager` means, so it is kept primitive for primitive: the
# builder is traced to a jaxpr (no compile), whose equations are the very primitives,
# parameters and order eager dispatch binds, and each equation is evaluated as eager dispatch
# does, except where the same bits come cheaper: an elementwise primitive on a bucket (as an
# elementwise entry is, BUCKETS), a data-movement one in numpy on bits. Reductions are not
# bucketed: XLA:CPU's order of a row's sum or max depends on how many rows there are (padded
# to a bucket of rows, 42 of 160 (dtype, shape) cases differed, f32 and f64). Every entry's
# result is held to its builder's eager one, bit for bit, by tests/fuzz/test_eager_by_primitive.py.
#
# Elementwise lax primitives whose XLA:CPU result does not depend on the shape (the same test,
# on a bucket against the real shape at every float dtype); exp, log and erf do
# (SHAPE_DEPENDENT) and are bound at their shape.
BUCKETED_PRIMITIVES = frozenset({
    "add", "sub", "mul", "div", "max", "min", "neg", "abs", "sqrt", "rsqrt", "tanh", "logistic",
    "eq", "ne", "lt", "le", "gt", "ge", "convert_element_type", "clamp"})
assert not BUCKETED_PRIMITIVES & SHAPE_DEPENDENT
# Bucketed primitives whose rank-0 operand is broadcast to the others' shape first: not
# division (an f64 x / c of shape (1,) differed from the same division on a bucket), nor
# max, min and clamp (an f16 NaN against a rank-0 operand came out with other bits than
# against the same value broadcast; measured on every float dtype, specials included).
SCALAR_OPERAND_PRIMITIVES = BUCKETED_PRIMITIVES - {"div", "max", "min", "clamp"}
# Primitives that only move bits, evaluated in numpy: the broadcasts, squeeze and
# dynamic_slice inside the templates, reshape, slice, rev, transpose, concatenate (all but the
# broadcasts were 13 of 200 compiles of `eager` over 60 smoke and 40 families programs).
MOVED_PRIMITIVES = frozenset({"broadcast_in_dim", "reshape", "squeeze", "transpose", "rev",
                              "concatenate", "slice", "dynamic_slice"})


def by_primitive(op: Any, attrs: dict[str, Any], xs: Sequence[Any]) -> np.ndarray:
    """The entry `op` on concrete operands `xs`, its builder's primitives one at a time,
    as eager dispatch evaluates it, bit for bit."""
    from jax.extend.core import Literal

    closed = jax.make_jaxpr(lambda *a: build(op, attrs, *a))(
        *[shape_struct(np.shape(x), np.asarray(x).dtype) for x in xs])
    jaxpr = closed.jaxpr
    env: dict[Any, np.ndarray] = {}

    def read(v: Any) -> np.ndarray:
        if isinstance(v, Literal):
            aval: Any = v.aval  # a ShapedArray, typed as its abstract base
            return np.asarray(v.val, aval.dtype)
        return env[v]

    env.update(zip(jaxpr.constvars, map(np.asarray, closed.consts), strict=True))
    env.update(zip(jaxpr.invars, map(np.asarray, xs), strict=True))
    for eqn in jaxpr.eqns:
        args = [read(v) for v in eqn.invars]
        shapes = [tuple(v.aval.shape) for v in eqn.outvars]
        env.update(zip(eqn.outvars, _primitive(eqn.primitive, eqn.params, args, shapes), strict=True))
    (out,) = [read(v) for v in jaxpr.outvars]
    return out


def _primitive(prim: Any, params: dict[str, Any], args: list[np.ndarray],
               shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """One equation's results: in numpy where they are bits moved, on a bucket where the
    primitive is elementwise, else bound alone on the real shapes as eager dispatch binds it."""
    name = prim.name
    (shape, *_) = shapes
    if name in MOVED_PRIMITIVES and not (name == "reshape" and params.get("dimensions") is not None):
        return [_moved(name, params, args, shape)]
    if name == "select_n" and args[0].dtype == np.bool_ and all(np.shape(a) == shape for a in args):
        # A choice of the cases' bits by a boolean (XLA:CPU copies them, subnormals too).
        which, false_case, true_case = args
        return [np.where(which, true_case, false_case)]
    if name == "iota" and np.issubdtype(params["dtype"], np.integer):
        ramp = np.arange(shape[params["dimension"]], dtype=params["dtype"])
        index = [1] * len(shape)
        index[params["dimension"]] = shape[params["dimension"]]
        return [np.array(np.broadcast_to(ramp.reshape(index), shape))]
    full = args
    if (name in SCALAR_OPERAND_PRIMITIVES and len(shape) > 0 and any(np.ndim(a) == 0 for a in args)
            and all(np.shape(a) in (shape, ()) for a in args)):
        # A rank-0 operand (a template's literal constant), which the kernel broadcasts:
        # broadcast here, so the primitive meets equal shapes and its bucket; the same bits
        # per element (tests/fuzz/test_eager_by_primitive.py).
        full = [np.array(np.broadcast_to(a, shape)) for a in args]
    if (name in BUCKETED_PRIMITIVES and len(shape) > 0 and all(np.shape(a) == shape for a in full)
            and not _nan_meets_nan(full)):
        # Not at rank 0, as for an elementwise entry (_bucketable). Nor where two operands
        # are NaN at one element: which operand's NaN comes out depends on the kernel (a
        # bf16 -NaN * +NaN gave -NaN at (7, 7, 3) and +NaN on its bucket, inside
        # layer_norm), so they are bound as they came, rank-0 operand and all.
        return [np.asarray(prim.bind(*_on_bucket(full), **params))[:math.prod(shape)].reshape(shape)]
    out = prim.bind(*map(on_device, args), **params)
    return [np.asarray(o) for o in (out if prim.multiple_results else [out])]


def _moved(name: str, params: dict[str, Any], args: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """A data-movement primitive in numpy: the operands' bits, moved as XLA:CPU moves them
    (own_precision.ON_BITS: subnormals and NaN payloads copied, not computed on)."""
    x = args[0]
    if name == "broadcast_in_dim":
        dims = params["broadcast_dimensions"]  # strictly increasing (lax checks it)
        out = np.broadcast_to(np.reshape(x, [x.shape[dims.index(d)] if d in dims else 1
                                             for d in range(len(shape))]), shape)
    elif name in ("reshape", "squeeze"):
        out = np.reshape(x, shape)
    elif name == "transpose":
        out = np.transpose(x, params["permutation"])
    elif name == "rev":
        out = np.flip(x, axis=tuple(params["dimensions"]))
    elif name == "concatenate":
        out = np.concatenate(args, axis=params["dimension"])
    elif name == "slice":
        strides = params["strides"] or (1,) * x.ndim
        out = x[tuple(slice(b, e, s) for b, e, s in
                      zip(params["start_indices"], params["limit_indices"], strides, strict=True))]
    else:  # dynamic_slice: XLA clamps each start index so that the slice fits
        out = np_dynamic_slice(x, args[1:], params["slice_sizes"])
    assert out.shape == shape, (name, out.shape, shape)
    return np.array(out)


def _nan_meets_nan(args: list[np.ndarray]) -> bool:
    """Whether two or more float operands are NaN at the same element."""
    nans = [np.isnan(a) for a in args if _is_float(a)]
    return len(nans) > 1 and bool(np.any(np.sum(nans, axis=0) > 1))
