"""The jax.lax form of every op-table entry: its builder, registered under the entry's name,
which the generator traces and lowers. The only module of the ops package that imports jax
(workers build programs; the coordinator reads the table without it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.ops.entries.control import BODY_NAMES, INT_BODIES
from xla_sentinel.ops.entries.elementwise import clamp_bounds
from xla_sentinel.ops.entries.indices import NP_INDEX
from xla_sentinel.ops.entries.loops import shift_indices
from xla_sentinel.ops.entries.shape import pad_value
from xla_sentinel.ops.entries.templates import LAYER_NORM_EPS
from xla_sentinel.ops.numpy_forms import Elementwise
from xla_sentinel.ops.spec import Attrs, OpDef
from xla_sentinel.ops.table import OPS

# jax leaves lax.optimization_barrier unannotated: its signature, so that calls are checked.
_optimization_barrier: Callable[[Any], Any] = lax.optimization_barrier

# build(attrs, *operands) -> the entry's result, on jax arrays or tracers.
Builder = Callable[..., Any]
BUILDERS: dict[str, Builder] = {}


def builds(*names: str) -> Callable[[Builder], Builder]:
    """Register the decorated function as the builder of the entries `names`."""
    def register(fn: Builder) -> Builder:
        for name in names:
            assert name not in BUILDERS, name
            BUILDERS[name] = fn
        return fn
    return register


def build(op: OpDef, attrs: Attrs, *args: Any) -> Any:
    """The entry `op` with attributes `attrs` on `args`, in jax.lax."""
    return BUILDERS[op.name](attrs, *args)


def _jdt(name: str) -> Any:
    return jnp.dtype(NP_DTYPES[name])


# --- domain guards: keep references finite on random inputs ------------------------------

def guard(kind: str | None, x: Any) -> Any:
    """Map a float value into the domain an op needs, written as ordinary lax ops
    (numpy_forms.np_guard says what each kind is)."""
    if kind is None or not jnp.issubdtype(x.dtype, jnp.floating):
        return x

    def one(v: float) -> Any:
        return jnp.asarray(v, x.dtype)

    if kind == "pos":
        return lax.add(lax.abs(x), one(0.5))
    if kind == "unit":
        return lax.mul(lax.tanh(x), one(0.9))
    if kind == "bounded":
        return lax.clamp(one(-8.0), x, one(8.0))
    if kind == "near1":
        return lax.add(one(1.0), lax.mul(lax.tanh(x), one(0.2)))
    raise ValueError(f"unknown guard {kind!r}")


def int_nonzero(x: Any) -> Any:
    """Integer divisor without zero (and without INT_MIN/-1 overflow for signed types)."""
    if jnp.issubdtype(x.dtype, jnp.signedinteger):
        return lax.add(lax.rem(lax.abs(x), jnp.asarray(7, x.dtype)), jnp.asarray(1, x.dtype))
    return lax.max(x, jnp.asarray(1, x.dtype))


# --- elementwise (entries/elementwise.py) ------------------------------------------------

# The lax op of each `unary` and `binary` entry; the entry's numpy form holds its guards.
ELEMENTWISE_LAX: dict[str, Callable[..., Any]] = {
    "exp": lax.exp, "log": lax.log, "log1p": lax.log1p, "expm1": lax.expm1, "tanh": lax.tanh,
    "logistic": lax.logistic, "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "cbrt": lax.cbrt, "sin": lax.sin,
    "cos": lax.cos, "tan": lax.tan, "erf": lax.erf, "erf_inv": lax.erf_inv, "lgamma": lax.lgamma,
    "digamma": lax.digamma, "atanh": lax.atanh, "sinh": lax.sinh,
    "floor": lax.floor, "ceil": lax.ceil, "sign": lax.sign,
    "round": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
    "round_away": lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
    "is_finite": lax.is_finite, "abs": lax.abs, "neg": lax.neg, "not": lax.bitwise_not,
    "population_count": lax.population_count, "clz": lax.clz,
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "max": lax.max, "min": lax.min, "div": lax.div,
    "rem": lax.rem, "pow": lax.pow, "atan2": lax.atan2, "nextafter": lax.nextafter,
    "and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor,
    "shift_left": lax.shift_left, "shift_right_logical": lax.shift_right_logical,
    "shift_right_arithmetic": lax.shift_right_arithmetic,
    "compare_eq": lax.eq, "compare_ne": lax.ne, "compare_lt": lax.lt, "compare_le": lax.le,
    "compare_gt": lax.gt, "compare_ge": lax.ge,
}


def _elementwise(op: OpDef, fn: Callable[..., Any]) -> Builder:
    """`fn` behind the entry's guards (and nonzero integer divisor), as its numpy form
    applies them."""
    form = op.numpy
    assert isinstance(form, Elementwise), op.name

    def guarded(attrs: Attrs, *operands: Any) -> Any:
        xs = list(operands)
        if form.int_rhs and not jnp.issubdtype(xs[1].dtype, jnp.floating):
            xs[1] = int_nonzero(xs[1])
        return fn(*(guard(g, x) for g, x in zip(form.guards, xs, strict=False)))
    return guarded


for _name, _fn in ELEMENTWISE_LAX.items():
    builds(_name)(_elementwise(OPS[_name], _fn))


@builds("clamp")
def _clamp(attrs: Attrs, x: Any) -> Any:
    lo, hi = clamp_bounds(attrs, jnp.issubdtype(x.dtype, jnp.floating),
                          jnp.issubdtype(x.dtype, jnp.unsignedinteger))
    return lax.clamp(jnp.asarray(lo, x.dtype), x, jnp.asarray(hi, x.dtype))


@builds("select")
def _select(attrs: Attrs, p: Any, x: Any, y: Any) -> Any:
    return lax.select(p, x, y)


@builds("select_compare")
def _select_compare(attrs: Attrs, x: Any, y: Any) -> Any:
    pred = getattr(lax, attrs["dir"])(x, y)
    return lax.select(pred, y, x) if attrs["swap"] else lax.select(pred, x, y)


@builds("select_extremum")
def _select_extremum(attrs: Attrs, x: Any, y: Any, z: Any) -> Any:
    axis = attrs["axis"]
    reduce, compare = (lax.reduce_max, lax.ge) if attrs["kind"] == "max" else (lax.reduce_min, lax.le)
    kept = tuple(d for d in range(x.ndim) if d != axis)
    # The barrier materializes x once, in its own dtype, for both the reduction and the
    # compare: without it XLA may recompute x in excess precision in one fusion and
    # round it in the other, which legally breaks the tie.
    x = _optimization_barrier(x)
    extremum = lax.broadcast_in_dim(reduce(x, (axis,)), x.shape, kept)
    return lax.select(compare(x, extremum), y, z)


# --- conversion (entries/conversion.py) --------------------------------------------------

@builds("convert")
def _convert(attrs: Attrs, x: Any) -> Any:
    return lax.convert_element_type(x, _jdt(attrs["dtype"]))


@builds("bitcast_convert")
def _bitcast(attrs: Attrs, x: Any) -> Any:
    return lax.bitcast_convert_type(x, _jdt(attrs["dtype"]))


@builds("reduce_precision")
def _reduce_precision(attrs: Attrs, x: Any) -> Any:
    return lax.reduce_precision(x, attrs["exponent_bits"], attrs["mantissa_bits"])


# --- reductions (entries/reductions.py) --------------------------------------------------

def _reduction(fn: Callable[..., Any], guard_kind: str | None) -> Builder:
    return lambda a, x: fn(guard(guard_kind, x), tuple(a["axes"]))


def _cumulative(fn: Callable[..., Any], guard_kind: str | None) -> Builder:
    return lambda a, x: fn(guard(guard_kind, x), a["axis"], a["reverse"])


# Each guarded by its entry's `guard`.
for _name, _fn in {"reduce_sum": lax.reduce_sum, "reduce_max": lax.reduce_max,
                   "reduce_min": lax.reduce_min, "reduce_prod": lax.reduce_prod,
                   "reduce_and": lax.reduce_and, "reduce_or": lax.reduce_or}.items():
    builds(_name)(_reduction(_fn, OPS[_name].guard))
for _name, _fn in {"cumsum": lax.cumsum, "cumprod": lax.cumprod, "cummax": lax.cummax,
                   "cummin": lax.cummin}.items():
    builds(_name)(_cumulative(_fn, OPS[_name].guard))


@builds("argmax")
def _argmax(attrs: Attrs, x: Any) -> Any:
    return lax.argmax(x, attrs["axis"], jnp.int32)


@builds("argmin")
def _argmin(attrs: Attrs, x: Any) -> Any:
    return lax.argmin(x, attrs["axis"], jnp.int32)


@builds("reduce_window")
def _reduce_window(attrs: Attrs, x: Any) -> Any:
    fn = {"add": lax.add, "max": lax.max, "min": lax.min}[attrs["kind"]]
    if attrs["kind"] == "add":
        init = jnp.asarray(0, x.dtype)
    elif jnp.issubdtype(x.dtype, jnp.floating):
        init = jnp.asarray(-jnp.inf if attrs["kind"] == "max" else jnp.inf, x.dtype)
    else:
        info = np.iinfo(x.dtype)
        init = jnp.asarray(info.min if attrs["kind"] == "max" else info.max, x.dtype)
    return lax.reduce_window(x, init, fn, tuple(attrs["window"]), tuple(attrs["strides"]),
                             attrs["padding"])


# --- linear algebra (entries/linalg.py, entries/mixed_precision.py) ----------------------

def f32_acc(x: Any) -> Any:
    """f32 accumulation for bf16/f16 operands; None (the operands' own type) for the
    float64 reference, whose operands are promoted and which jax would refuse to narrow."""
    return jnp.float32 if jnp.dtype(x.dtype).itemsize < 4 else None


def _dot(attrs: Attrs, x: Any, y: Any, acc: Any = None) -> Any:
    dn = ((tuple(attrs["lhs_contract"]), tuple(attrs["rhs_contract"])),
          (tuple(attrs["lhs_batch"]), tuple(attrs["rhs_batch"])))
    return lax.dot_general(x, y, dn, preferred_element_type=acc)


def _conv(attrs: Attrs, x: Any, w: Any, acc: Any = None) -> Any:
    padding = attrs["padding"]
    if any(d > 1 for d in attrs["lhs_dilation"]):
        padding = [(0, 0)] * len(attrs["strides"])  # SAME is undefined with lhs dilation
    return lax.conv_general_dilated(x, w, tuple(attrs["strides"]), padding,
                                    tuple(attrs["lhs_dilation"]), tuple(attrs["rhs_dilation"]),
                                    preferred_element_type=acc)


@builds("dot_general")
def _dot_general(attrs: Attrs, x: Any, y: Any) -> Any:
    return _dot(attrs, x, y)


@builds("conv_general_dilated")
def _conv_general_dilated(attrs: Attrs, x: Any, w: Any) -> Any:
    return _conv(attrs, x, w)


@builds("dot_general_acc")
def _dot_acc(attrs: Attrs, x: Any, y: Any) -> Any:
    return _dot(attrs, x, y, f32_acc(x))


@builds("conv_acc")
def _conv_acc(attrs: Attrs, x: Any, w: Any) -> Any:
    return _conv(attrs, x, w, f32_acc(x))


@builds("batched_matvec")
def _batched_matvec(attrs: Attrs, m: Any, v: Any) -> Any:
    """vmap(m_b @ v_b) over the batch, then a reduction of the products."""
    acc = f32_acc(m) if attrs["f32_acc"] else None
    y = jax.vmap(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                              preferred_element_type=acc))(m, v)
    reduce = lax.reduce_sum if attrs["reduce"] == "sum" else lax.reduce_max
    return reduce(y, (attrs["axis"],))


# --- shape manipulation (entries/shape.py) -----------------------------------------------

@builds("reshape")
def _reshape(attrs: Attrs, x: Any) -> Any:
    return lax.reshape(x, tuple(attrs["shape"]))


@builds("transpose")
def _transpose(attrs: Attrs, x: Any) -> Any:
    return lax.transpose(x, tuple(attrs["perm"]))


@builds("broadcast_in_dim")
def _broadcast_in_dim(attrs: Attrs, x: Any) -> Any:
    return lax.broadcast_in_dim(x, tuple(attrs["shape"]), tuple(attrs["dims"]))


@builds("squeeze")
def _squeeze(attrs: Attrs, x: Any) -> Any:
    return lax.squeeze(x, tuple(attrs["dims"]))


@builds("expand_dims")
def _expand_dims(attrs: Attrs, x: Any) -> Any:
    return lax.expand_dims(x, tuple(attrs["dims"]))


@builds("rev")
def _rev(attrs: Attrs, x: Any) -> Any:
    return lax.rev(x, tuple(attrs["dims"]))


@builds("pad")
def _pad(attrs: Attrs, x: Any) -> Any:
    value = pad_value(attrs, x.dtype == jnp.bool_, jnp.issubdtype(x.dtype, jnp.floating))
    return lax.pad(x, jnp.asarray(value, x.dtype), [tuple(c) for c in attrs["config"]])


@builds("concatenate")
def _concatenate(attrs: Attrs, *xs: Any) -> Any:
    return lax.concatenate(xs, attrs["axis"])


@builds("slice")
def _slice(attrs: Attrs, x: Any) -> Any:
    return lax.slice(x, attrs["start"], attrs["limit"], attrs["stride"])


# --- indexing (entries/indexing.py, entries/indices.py) ----------------------------------

def _row_dnums(rank: int) -> lax.GatherDimensionNumbers:
    """Gather whole rows (slices along axis 0) at one index each."""
    return lax.GatherDimensionNumbers(offset_dims=tuple(range(1, rank)), collapsed_slice_dims=(0,),
                                      start_index_map=(0,))


def _row_scatter_dnums(rank: int) -> lax.ScatterDimensionNumbers:
    """Scatter whole rows (slices along axis 0) at one index each."""
    return lax.ScatterDimensionNumbers(update_window_dims=tuple(range(1, rank)),
                                       inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


@builds("dynamic_slice")
def _dynamic_slice(attrs: Attrs, x: Any, *idx: Any) -> Any:
    return lax.dynamic_slice(x, idx, attrs["sizes"])


@builds("dynamic_update_slice")
def _dynamic_update_slice(attrs: Attrs, x: Any, u: Any, *idx: Any) -> Any:
    return lax.dynamic_update_slice(x, u, idx)


@builds("gather")
def _gather(attrs: Attrs, x: Any, idx: Any) -> Any:
    mode = lax.GatherScatterMode.CLIP if attrs["mode"] == "clip" else lax.GatherScatterMode.FILL_OR_DROP
    return lax.gather(x, idx, _row_dnums(x.ndim), (1, *x.shape[1:]), mode=mode, fill_value=0)


@builds("scatter")
def _scatter(attrs: Attrs, x: Any, u: Any) -> Any:
    idx = jnp.asarray(attrs["rows"], jnp.int32).reshape(-1, 1)
    dn = _row_scatter_dnums(x.ndim)
    if attrs["kind"] == "add" and x.dtype != jnp.bool_:
        return lax.scatter_add(x, idx, u, dn, unique_indices=True)
    return lax.scatter(x, idx, u, dn, unique_indices=True)


@builds("iota")
def _iota(attrs: Attrs, x: Any) -> Any:
    # iota of x's shape and dtype, combined with x so the op stays connected to the graph.
    it = lax.broadcasted_iota(x.dtype if x.dtype != jnp.bool_ else jnp.int32, x.shape, attrs["dim"])
    return lax.add(x, it) if x.dtype != jnp.bool_ else lax.ne(it, jnp.asarray(0, it.dtype))


def _as_index(attrs: Attrs, i: Any) -> Any:
    return lax.convert_element_type(i, jnp.dtype(NP_INDEX[attrs["index_dtype"]]))


# No negative-index wrap (allow_negative_indices=False): the starts reach XLA as they are,
# and every out-of-range one (negative, or past dim - size) must clamp.
@builds("dynamic_slice_idx")
def _dynamic_slice_idx(attrs: Attrs, x: Any, *idx: Any) -> Any:
    return lax.dynamic_slice(x, [_as_index(attrs, i) for i in idx], attrs["sizes"],
                             allow_negative_indices=False)


@builds("dynamic_update_slice_idx")
def _dynamic_update_slice_idx(attrs: Attrs, x: Any, u: Any, *idx: Any) -> Any:
    return lax.dynamic_update_slice(x, u, [_as_index(attrs, i) for i in idx], allow_negative_indices=False)


@builds("gather_idx")
def _gather_idx(attrs: Attrs, x: Any, idx: Any) -> Any:
    # PROMISE_IN_BOUNDS: jax adds no clamp of its own, so XLA's gather clamps each start.
    return lax.gather(x, _as_index(attrs, idx), _row_dnums(x.ndim), (1, *x.shape[1:]),
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


@builds("scatter_add_idx")
def _scatter_add_idx(attrs: Attrs, x: Any, idx: Any, u: Any) -> Any:
    # Rows may repeat (accumulated) or fall outside x (dropped: FILL_OR_DROP).
    return lax.scatter_add(x, _as_index(attrs, idx), u, _row_scatter_dnums(x.ndim),
                           mode=lax.GatherScatterMode.FILL_OR_DROP)


# --- sorting (entries/sort.py) -----------------------------------------------------------

@builds("sort")
def _sort(attrs: Attrs, x: Any) -> Any:
    out = lax.sort(x, dimension=attrs["axis"], is_stable=True)
    return lax.rev(out, (attrs["axis"],)) if attrs["descending"] else out


@builds("top_k")
def _top_k(attrs: Attrs, x: Any) -> Any:
    return lax.top_k(x, attrs["k"])[attrs["output"]]


# --- control flow (entries/control.py, entries/loops.py) ---------------------------------

# The bodies of entries/control.py's BODY_NAMES in lax.
BODIES: dict[str, Callable[[Any], Any]] = {
    "tanh": lax.tanh, "sin": lax.sin, "halve": lambda v: lax.mul(v, jnp.asarray(0.5, v.dtype)),
    "neg": lax.neg, "abs": lax.abs, "logistic": lax.logistic, "square": lambda v: lax.mul(v, v),
}
assert tuple(BODIES) == BODY_NAMES


def body(name: str, v: Any) -> Any:
    """The body `name` applied to `v` (control.np_body in numpy): a bool value is negated;
    an integer one gets an integer body."""
    if v.dtype == jnp.bool_:
        return lax.bitwise_not(v)
    if not jnp.issubdtype(v.dtype, jnp.floating) and name not in INT_BODIES:
        name = "neg" if jnp.issubdtype(v.dtype, jnp.signedinteger) else "square"
    if name == "neg" and jnp.issubdtype(v.dtype, jnp.unsignedinteger):
        name = "square"
    return BODIES[name](v)


@builds("cond")
def _cond(attrs: Attrs, p: Any, x: Any) -> Any:
    return lax.cond(p, lambda v: body(attrs["branches"][0], v), lambda v: body(attrs["branches"][1], v), x)


@builds("while_loop")
def _while(attrs: Attrs, x: Any) -> Any:
    def step(c: Any) -> Any:
        return c[0] + 1, body(attrs["body"], c[1])
    return lax.while_loop(lambda c: c[0] < attrs["trips"], step, (jnp.int32(0), x))[1]


@builds("fori_loop")
def _fori(attrs: Attrs, x: Any) -> Any:
    return lax.fori_loop(0, attrs["trips"], lambda i, v: body(attrs["body"], v), x)


@builds("scan")
def _scan(attrs: Attrs, x: Any) -> Any:
    def step(carry: Any, xt: Any) -> tuple[Any, Any]:
        new = body(attrs["body"], carry)
        new = lax.bitwise_xor(new, xt) if x.dtype == jnp.bool_ else lax.add(new, xt)
        return new, new
    return lax.scan(step, x[0], x)[1]


def _run_loop(attrs: Attrs, step: Callable[[Any, Any], Any], init: Any) -> Any:
    """`step(t, carry)` for t in range(trips), as a fori_loop or a scan."""
    if attrs["loop"] == "fori":
        return lax.fori_loop(0, attrs["trips"], step, init)
    return lax.scan(lambda c, t: (step(t, c), None), init, jnp.arange(attrs["trips"], dtype=jnp.int32))[0]


@builds("loop_dus")
def _loop_dus(attrs: Attrs, x: Any) -> Any:
    n = x.shape[0]

    def step(t: Any, acc: Any) -> Any:
        read = lax.rem(t * attrs["step"], n)
        write = lax.rem(t * attrs["step"] + attrs["offset"], n)
        row = lax.dynamic_index_in_dim(acc, read, 0, keepdims=True)
        return lax.dynamic_update_index_in_dim(acc, body(attrs["body"], row), write, 0)
    return _run_loop(attrs, step, x)


@builds("loop_scatter_add")
def _loop_scatter_add(attrs: Attrs, x: Any, u: Any) -> Any:
    n = x.shape[0]
    dn = _row_scatter_dnums(x.ndim)

    def step(t: Any, acc: Any) -> Any:
        row = lax.rem(t * attrs["step"] + attrs["offset"], n)
        update = body(attrs["body"], lax.dynamic_index_in_dim(u, lax.rem(t, n), 0, keepdims=True))
        return lax.scatter_add(acc, lax.reshape(row, (1, 1)), update, dn)
    return _run_loop(attrs, step, x)


@builds("loop_shift")
def _loop_shift(attrs: Attrs, x: Any) -> Any:
    """Each trip: x.at[1:].set(x[:-1]) along the axis (a shift register), then a new head."""
    head, tail, rest = shift_indices(attrs["axis"])

    def step(t: Any, v: Any) -> Any:
        first = v[head]
        v = v.at[tail].set(v[rest])
        return v.at[head].set(body(attrs["body"], first))
    return _run_loop(attrs, step, x)


# --- templates (entries/templates.py) ----------------------------------------------------

def _c(v: float, like: Any) -> Any:
    return jnp.asarray(v, like.dtype)


def softmax(x: Any, axis: int) -> Any:
    m = lax.broadcast_in_dim(lax.reduce_max(x, (axis,)), x.shape,
                             tuple(d for d in range(x.ndim) if d != axis))
    e = lax.exp(lax.sub(x, m))
    s = lax.broadcast_in_dim(lax.reduce_sum(e, (axis,)), x.shape,
                             tuple(d for d in range(x.ndim) if d != axis))
    return lax.div(e, s)


def layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
    """Over the last axis: (x - mean) * rsqrt(var + eps) * gamma + beta."""
    last = x.ndim - 1
    keep = tuple(range(last))
    n = _c(x.shape[-1], x)
    mean = lax.broadcast_in_dim(lax.div(lax.reduce_sum(x, (last,)), n), x.shape, keep)
    centred = lax.sub(x, mean)
    var = lax.div(lax.reduce_sum(lax.mul(centred, centred), (last,)), n)
    inv = lax.broadcast_in_dim(lax.rsqrt(lax.add(var, _c(LAYER_NORM_EPS, x))), x.shape, keep)
    scale = lax.broadcast_in_dim(gamma, x.shape, (last,))
    shift = lax.broadcast_in_dim(beta, x.shape, (last,))
    return lax.add(lax.mul(lax.mul(centred, inv), scale), shift)


def _masked_scores(q: Any, k: Any, mask: Any, low: float) -> Any:
    """q [..., S, D] . k [..., T, D] / sqrt(D), masked positions at `low`, the program
    dtype's lowest finite value (what models use instead of -inf, so a fully masked row
    stays finite; the float64 reference fills the same value)."""
    batch = tuple(range(q.ndim - 2))
    dn = (((q.ndim - 1,), (k.ndim - 1,)), (batch, batch))
    scores = lax.mul(lax.dot_general(q, k, dn), _c(1.0 / np.sqrt(q.shape[-1]), q))
    fill = jnp.full(scores.shape, low, q.dtype)
    return lax.select(lax.broadcast_in_dim(mask, scores.shape, (q.ndim - 2, q.ndim - 1)), scores, fill)


def attention(q: Any, k: Any, v: Any, mask: Any, low: float) -> Any:
    batch = tuple(range(q.ndim - 2))
    p = softmax(_masked_scores(q, k, mask, low), q.ndim - 1)
    return lax.dot_general(p, v, (((q.ndim - 1,), (q.ndim - 2,)), (batch, batch)))


def _activation(kind: str, h: Any) -> Any:
    if kind == "relu":
        return lax.max(h, _c(0.0, h))
    if kind == "tanh":
        return lax.tanh(h)
    return lax.mul(h, lax.logistic(h))  # silu


def mlp_block(x: Any, w1: Any, b1: Any, w2: Any, b2: Any, act: str) -> Any:
    """x + act(x @ w1 + b1) @ w2 + b2 over the last axis of x."""
    last = x.ndim - 1
    h = lax.dot_general(x, w1, (((last,), (0,)), ((), ())))
    h = _activation(act, lax.add(h, lax.broadcast_in_dim(b1, h.shape, (last,))))
    y = lax.dot_general(h, w2, (((last,), (0,)), ((), ())))
    return lax.add(x, lax.add(y, lax.broadcast_in_dim(b2, y.shape, (last,))))


def topk_routing(x: Any, k: int) -> Any:
    """Mixture-of-experts gates over the last axis: softmax, keep the top k, renormalize,
    scatter back to a dense [..., experts] gate array (zeros off the chosen experts)."""
    last = x.ndim - 1
    probs = softmax(x, last)
    vals, idx = lax.top_k(probs, k)
    total = lax.broadcast_in_dim(lax.reduce_sum(vals, (last,)), vals.shape, tuple(range(last)))
    weights = lax.div(vals, total)
    experts = lax.broadcasted_iota(jnp.int32, (*x.shape[:-1], k, x.shape[-1]), x.ndim)
    onehot = lax.eq(lax.broadcast_in_dim(idx, experts.shape, tuple(range(x.ndim))), experts)
    spread = lax.select(onehot, lax.broadcast_in_dim(weights, experts.shape, tuple(range(x.ndim))),
                        jnp.zeros(experts.shape, x.dtype))
    return lax.reduce_sum(spread, (last,))


@builds("softmax")
def _softmax(attrs: Attrs, x: Any) -> Any:
    return softmax(x, attrs["axis"])


@builds("layer_norm")
def _layer_norm(attrs: Attrs, x: Any, g: Any, b: Any) -> Any:
    return layer_norm(x, g, b)


@builds("attention")
def _attention(attrs: Attrs, q: Any, k: Any, v: Any, mask: Any) -> Any:
    return attention(q, k, v, mask, attrs["low"])


@builds("mlp_block")
def _mlp_block(attrs: Attrs, x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    return mlp_block(x, w1, b1, w2, b2, attrs["act"])


@builds("topk_routing")
def _topk_routing(attrs: Attrs, x: Any) -> Any:
    return topk_routing(x, attrs["k"])


# One builder per entry: an entry without one, or a builder without an entry, is a
# mistake in adding or renaming an op.
if set(BUILDERS) != set(OPS):
    raise AssertionError(f"entries without a builder: {sorted(set(OPS) - set(BUILDERS))}; "
                         f"builders without an entry: {sorted(set(BUILDERS) - set(OPS))}")
