"""The operation table: every jax.lax operation the generator knows, declared once.

Each `OpDef` says which operand dtypes it accepts, how to choose operands and attributes
(`plan`), how to build it with jax.lax (`build(attrs, *args)`), which input domain keeps
float64 references finite (`guard`), and whether its output is rank-discrete (compare,
floor, argmax: legal rounding differences can flip them). Shapes follow from jax itself:
the generator evaluates `build` abstractly, so a plan that jax rejects is never emitted.
Adding an op is adding one entry here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import jax.numpy as jnp
import numpy as np
from jax import lax

from .dtypes import FLOATS, INTS, NP_DTYPES

ALL = FLOATS + INTS + ("bool",)
NUMERIC = FLOATS + INTS
SIGNED = ("s32", "s8")
INT_BITS = {"s32": 32, "s8": 8, "u8": 8, "u32": 32}


@dataclass(frozen=True)
class Val:
    """A value in a program under construction: its index, abstract type and taint."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    # True when the value depends on float arithmetic, so that even integer results can
    # legally differ between configurations (a float rounding flips a floor or compare).
    tainted: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class Ctx(Protocol):
    """What an op's planner may ask of the generator."""

    rng: np.random.Generator
    max_rank: int
    max_dim: int

    def operand(self, shape: Sequence[int], dtype: str) -> Val: ...
    def dim(self) -> int: ...


Plan = tuple[list[Val], dict[str, Any]]


@dataclass(frozen=True)
class OpDef:
    name: str
    category: str
    dtypes: tuple[str, ...]
    plan: Callable[[Ctx, Val], Plan | None]
    build: Callable[..., Any]
    guard: str | None = None
    discrete: bool = False
    # Evaluate in the program's own dtypes inside the float64 reference (bitcasts,
    # nextafter): promoting their operands would change what they mean.
    own_dtypes: bool = False
    # "index": takes indices; "approx": a transcendental function, not correctly rounded
    # (XLA may be an ulp off); "sums": adds up terms (its partial sums and products can
    # leave the dtype's range although the result does not, and its rounding error grows
    # with the number of terms); "products": multiplies terms (the error grows likewise).
    # For the bitwise oracle (exact.py): "exact": the result is fixed bitwise by the
    # operands (compares, rounding to integers, conversions); "selects": its elements are
    # operand elements moved, chosen or negated, so it commutes with rounding (movement,
    # select, max, min, abs); "rounded": one correctly rounded operation on floats (+ - *).
    tags: frozenset[str] = field(default_factory=frozenset)


OPS: dict[str, OpDef] = {}


def _reg(op: OpDef) -> None:
    assert op.name not in OPS, op.name
    OPS[op.name] = op


def _jdt(name: str) -> Any:
    return jnp.dtype(NP_DTYPES[name])


# --- domain guards: keep references finite on random inputs --------------------------------

def guard(kind: str | None, x: Any) -> Any:
    """Map a float value into the domain an op needs (written as ordinary lax ops)."""
    if kind is None or not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    one = lambda v: jnp.asarray(v, x.dtype)  # noqa: E731
    if kind == "pos":  # log, sqrt, lgamma: [0.5, inf)
        return lax.add(lax.abs(x), one(0.5))
    if kind == "unit":  # erf_inv, tan: (-0.9, 0.9)
        return lax.mul(lax.tanh(x), one(0.9))
    if kind == "bounded":  # exp, expm1, pow exponent: [-8, 8]
        return lax.clamp(one(-8.0), x, one(8.0))
    if kind == "near1":  # products: [0.8, 1.2]
        return lax.add(one(1.0), lax.mul(lax.tanh(x), one(0.2)))
    raise ValueError(f"unknown guard {kind!r}")


def int_nonzero(x: Any) -> Any:
    """Integer divisor without zero (and without INT_MIN/-1 overflow for signed types)."""
    if jnp.issubdtype(x.dtype, jnp.signedinteger):
        return lax.add(lax.rem(lax.abs(x), jnp.asarray(7, x.dtype)), jnp.asarray(1, x.dtype))
    return lax.max(x, jnp.asarray(1, x.dtype))


# --- planners ------------------------------------------------------------------------------

def same(n: int) -> Callable[[Ctx, Val], Plan]:
    """n operands of the primary operand's shape and dtype."""
    def plan(ctx: Ctx, x: Val) -> Plan:
        return [x] + [ctx.operand(x.shape, x.dtype) for _ in range(n - 1)], {}
    return plan


def _axis(ctx: Ctx, x: Val) -> int:
    return int(ctx.rng.integers(x.rank))


def _needs_rank(k: int, plan: Callable[[Ctx, Val], Plan | None]) -> Callable[[Ctx, Val], Plan | None]:
    def wrapped(ctx: Ctx, x: Val) -> Plan | None:
        return plan(ctx, x) if x.rank >= k else None
    return wrapped


# --- elementwise ---------------------------------------------------------------------------

def unary(name: str, fn: Callable[[Any], Any], dtypes: tuple[str, ...], guard_kind: str | None = None,
          discrete: bool = False, own_dtypes: bool = False, tags: frozenset[str] = frozenset()) -> None:
    def build(attrs: dict, x: Any) -> Any:
        return fn(guard(guard_kind, x))
    _reg(OpDef(name, "elementwise", dtypes, same(1), build, guard_kind, discrete, own_dtypes, tags))


def binary(name: str, fn: Callable[[Any, Any], Any], dtypes: tuple[str, ...],
           lhs_guard: str | None = None, rhs_guard: str | None = None, discrete: bool = False,
           own_dtypes: bool = False, int_rhs: Callable[[Any], Any] | None = None,
           tags: frozenset[str] = frozenset()) -> None:
    def build(attrs: dict, x: Any, y: Any) -> Any:
        if int_rhs is not None and not jnp.issubdtype(y.dtype, jnp.floating):
            y = int_rhs(y)
        return fn(guard(lhs_guard, x), guard(rhs_guard, y))
    _reg(OpDef(name, "elementwise", dtypes, same(2), build, lhs_guard or rhs_guard, discrete,
               own_dtypes, tags))


for _name, _fn, _g in [
    ("exp", lax.exp, "bounded"), ("log", lax.log, "pos"), ("log1p", lax.log1p, "pos"),
    ("expm1", lax.expm1, "bounded"), ("tanh", lax.tanh, None), ("logistic", lax.logistic, None),
    ("sqrt", lax.sqrt, "pos"), ("rsqrt", lax.rsqrt, "pos"), ("cbrt", lax.cbrt, None),
    ("sin", lax.sin, "bounded"), ("cos", lax.cos, "bounded"), ("tan", lax.tan, "unit"),
    ("erf", lax.erf, None), ("erf_inv", lax.erf_inv, "unit"), ("lgamma", lax.lgamma, "pos"),
    ("digamma", lax.digamma, "pos"), ("atanh", lax.atanh, "unit"), ("sinh", lax.sinh, "bounded"),
]:
    # Only sqrt is correctly rounded by IEEE 754; the others may err by an ulp ("approx").
    unary(_name, _fn, FLOATS, _g, tags=frozenset() if _name == "sqrt" else frozenset({"approx"}))
EXACT, SELECTS, ROUNDED = frozenset({"exact"}), frozenset({"selects"}), frozenset({"rounded"})
for _name, _fn in [("floor", lax.floor), ("ceil", lax.ceil), ("sign", lax.sign)]:
    unary(_name, _fn, FLOATS, discrete=True, tags=EXACT)
unary("round", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), FLOATS, discrete=True,
      tags=EXACT)
unary("round_away", lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), FLOATS,
      discrete=True, tags=EXACT)
unary("is_finite", lax.is_finite, FLOATS, discrete=True, tags=EXACT)
unary("abs", lax.abs, FLOATS + SIGNED, tags=SELECTS)
unary("neg", lax.neg, FLOATS + SIGNED, tags=SELECTS)
unary("not", lax.bitwise_not, INTS + ("bool",))
unary("population_count", lax.population_count, INTS)
unary("clz", lax.clz, INTS)

for _name, _fn, _tags in [("add", lax.add, ROUNDED), ("sub", lax.sub, ROUNDED),
                          ("mul", lax.mul, ROUNDED), ("max", lax.max, SELECTS),
                          ("min", lax.min, SELECTS)]:
    binary(_name, _fn, NUMERIC, tags=_tags)
binary("div", lax.div, NUMERIC, rhs_guard="pos", int_rhs=int_nonzero)
binary("rem", lax.rem, NUMERIC, rhs_guard="pos", discrete=True, int_rhs=int_nonzero)
binary("pow", lax.pow, FLOATS, lhs_guard="pos", rhs_guard="bounded", tags=frozenset({"approx"}))
binary("atan2", lax.atan2, FLOATS, tags=frozenset({"approx"}))
binary("nextafter", lax.nextafter, ("f32", "f64"), own_dtypes=True, tags=EXACT)
for _name, _fn in [("and", lax.bitwise_and), ("or", lax.bitwise_or), ("xor", lax.bitwise_xor)]:
    binary(_name, _fn, INTS + ("bool",))
for _name, _fn in [("shift_left", lax.shift_left), ("shift_right_logical", lax.shift_right_logical),
                   ("shift_right_arithmetic", lax.shift_right_arithmetic)]:
    binary(_name, _fn, INTS)
for _dir in ("eq", "ne", "lt", "le", "gt", "ge"):
    binary(f"compare_{_dir}", getattr(lax, _dir), NUMERIC, discrete=True, tags=EXACT)


def _plan_clamp(ctx: Ctx, x: Val) -> Plan:
    lo, hi = sorted(float(v) for v in ctx.rng.normal(size=2))
    return [x], {"lo": lo, "hi": hi}


def _build_clamp(attrs: dict, x: Any) -> Any:
    lo, hi = attrs["lo"], attrs["hi"]
    if not jnp.issubdtype(x.dtype, jnp.floating):
        lo, hi = math.floor(lo * 4), math.ceil(hi * 4)
        if jnp.issubdtype(x.dtype, jnp.unsignedinteger):
            lo, hi = abs(lo), abs(lo) + abs(hi)
    return lax.clamp(jnp.asarray(lo, x.dtype), x, jnp.asarray(hi, x.dtype))


_reg(OpDef("clamp", "elementwise", NUMERIC, _plan_clamp, _build_clamp, tags=SELECTS))


def _plan_select(ctx: Ctx, x: Val) -> Plan:
    return [ctx.operand(x.shape, "bool"), x, ctx.operand(x.shape, x.dtype)], {}


_reg(OpDef("select", "elementwise", ALL, _plan_select, lambda a, p, x, y: lax.select(p, x, y),
           tags=SELECTS))

COMPARE_DIRECTIONS = ("ge", "le", "gt", "lt", "eq", "ne")


def _plan_select_compare(ctx: Ctx, x: Val) -> Plan:
    # The predicate compares the selected values themselves (select(x >= y, x, y) and
    # friends): the max/min idioms simplifiers rewrite, and where compare ties matter.
    # A free bool predicate (`select`) almost never produces a tie.
    return [x, ctx.operand(x.shape, x.dtype)], {"dir": str(ctx.rng.choice(COMPARE_DIRECTIONS)),
                                                "swap": bool(ctx.rng.integers(2))}


def _build_select_compare(attrs: dict, x: Any, y: Any) -> Any:
    pred = getattr(lax, attrs["dir"])(x, y)
    return lax.select(pred, y, x) if attrs["swap"] else lax.select(pred, x, y)


_reg(OpDef("select_compare", "elementwise", NUMERIC, _plan_select_compare, _build_select_compare,
           discrete=True, tags=SELECTS))


def _plan_select_extremum(ctx: Ctx, x: Val) -> Plan:
    # A select whose predicate is certain to tie: where(x >= max(x, axis), y, z), the
    # one-hot/mask-at-the-max idiom of argmax, top-1 routing and max-pooling gradients.
    # select_compare picks between the compared values themselves, so a tie there
    # selects equal values either way; here the tie decides between other values.
    other = str(ctx.rng.choice(NUMERIC))
    return [x, ctx.operand(x.shape, other), ctx.operand(x.shape, other)], {
        "axis": int(ctx.rng.integers(x.rank)), "kind": str(ctx.rng.choice(["max", "min"]))}


def _build_select_extremum(attrs: dict, x: Any, y: Any, z: Any) -> Any:
    axis = attrs["axis"]
    reduce, compare = (lax.reduce_max, lax.ge) if attrs["kind"] == "max" else (lax.reduce_min, lax.le)
    kept = tuple(d for d in range(x.ndim) if d != axis)
    # The barrier materializes x once, in its own dtype, for both the reduction and the
    # compare: without it XLA may recompute x in excess precision in one fusion and
    # round it in the other, which legally breaks the tie.
    x = lax.optimization_barrier(x)
    extremum = lax.broadcast_in_dim(reduce(x, (axis,)), x.shape, kept)
    return lax.select(compare(x, extremum), y, z)


_reg(OpDef("select_extremum", "elementwise", NUMERIC, _needs_rank(1, _plan_select_extremum),
           _build_select_extremum, discrete=True, tags=EXACT))


# --- conversion ----------------------------------------------------------------------------

def _plan_convert(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dtype": str(ctx.rng.choice([d for d in ALL if d != x.dtype]))}


def _build_convert(attrs: dict, x: Any) -> Any:
    return lax.convert_element_type(x, _jdt(attrs["dtype"]))


_reg(OpDef("convert", "conversion", ALL, _plan_convert, _build_convert, discrete=True, tags=EXACT))

BITCAST_PAIRS = {"f32": ("s32", "u32"), "s32": ("f32", "u32"), "u32": ("f32", "s32"),
                 "s8": ("u8",), "u8": ("s8",), "f16": ("bf16",), "bf16": ("f16",)}


def _plan_bitcast(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dtype": str(ctx.rng.choice(BITCAST_PAIRS[x.dtype]))}


def _build_bitcast(attrs: dict, x: Any) -> Any:
    return lax.bitcast_convert_type(x, _jdt(attrs["dtype"]))


_reg(OpDef("bitcast_convert", "conversion", tuple(BITCAST_PAIRS), _plan_bitcast, _build_bitcast,
           discrete=True, own_dtypes=True, tags=EXACT))


def _plan_reduce_precision(ctx: Ctx, x: Val) -> Plan:
    e, m = [(5, 10), (8, 7), (4, 3), (5, 2), (8, 23)][int(ctx.rng.integers(5))]
    return [x], {"exponent_bits": e, "mantissa_bits": m}


# Discrete: rounding to 2 or 3 mantissa bits turns a legal 1-ulp difference of its input
# (f16 rounding vs excess precision) into a whole quantization step, like `round` does.
_reg(OpDef("reduce_precision", "conversion", FLOATS, _plan_reduce_precision,
           lambda a, x: lax.reduce_precision(x, a["exponent_bits"], a["mantissa_bits"]),
           discrete=True, tags=EXACT))


# --- reductions ----------------------------------------------------------------------------

def _plan_reduce(ctx: Ctx, x: Val) -> Plan:
    k = int(ctx.rng.integers(1, x.rank + 1))
    axes = sorted(int(a) for a in ctx.rng.choice(x.rank, size=k, replace=False))
    return [x], {"axes": axes}


for _name, _fn, _dt, _g in [
    ("reduce_sum", lax.reduce_sum, NUMERIC, None), ("reduce_max", lax.reduce_max, NUMERIC, None),
    ("reduce_min", lax.reduce_min, NUMERIC, None), ("reduce_prod", lax.reduce_prod, NUMERIC, "near1"),
    ("reduce_and", lax.reduce_and, ("bool",), None), ("reduce_or", lax.reduce_or, ("bool",), None),
]:
    _reg(OpDef(_name, "reduction", _dt, _needs_rank(1, _plan_reduce),
               (lambda fn, g: lambda a, x: fn(guard(g, x), tuple(a["axes"])))(_fn, _g), _g,
               tags=frozenset({"sums"}) if _name == "reduce_sum"
               else frozenset({"products"}) if _name == "reduce_prod"
               else SELECTS if _name in ("reduce_max", "reduce_min") else frozenset()))


def _plan_arg(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": _axis(ctx, x)}


_reg(OpDef("argmax", "reduction", NUMERIC, _needs_rank(1, _plan_arg),
           lambda a, x: lax.argmax(x, a["axis"], jnp.int32), discrete=True, tags=EXACT))
_reg(OpDef("argmin", "reduction", NUMERIC, _needs_rank(1, _plan_arg),
           lambda a, x: lax.argmin(x, a["axis"], jnp.int32), discrete=True, tags=EXACT))


def _plan_cumulative(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": _axis(ctx, x), "reverse": bool(ctx.rng.integers(2))}


for _name, _fn, _g in [("cumsum", lax.cumsum, None), ("cumprod", lax.cumprod, "near1"),
                       ("cummax", lax.cummax, None), ("cummin", lax.cummin, None)]:
    _reg(OpDef(_name, "reduction", NUMERIC, _needs_rank(1, _plan_cumulative),
               (lambda fn, g: lambda a, x: fn(guard(g, x), a["axis"], a["reverse"]))(_fn, _g), _g,
               tags=frozenset({"sums"}) if _name == "cumsum"
               else frozenset({"products"}) if _name == "cumprod" else SELECTS))


def _plan_reduce_window(ctx: Ctx, x: Val) -> Plan:
    win = [int(ctx.rng.integers(1, min(d, 3) + 1)) for d in x.shape]
    strides = [int(ctx.rng.integers(1, 3)) for _ in x.shape]
    return [x], {"kind": str(ctx.rng.choice(["add", "max", "min"])), "window": win,
                 "strides": strides, "padding": str(ctx.rng.choice(["VALID", "SAME"]))}


def _build_reduce_window(attrs: dict, x: Any) -> Any:
    fn = {"add": lax.add, "max": lax.max, "min": lax.min}[attrs["kind"]]
    if attrs["kind"] == "add":
        init = jnp.asarray(0, x.dtype)
    elif jnp.issubdtype(x.dtype, jnp.floating):
        init = jnp.asarray(-jnp.inf if attrs["kind"] == "max" else jnp.inf, x.dtype)
    else:
        info = jnp.iinfo(x.dtype)
        init = jnp.asarray(info.min if attrs["kind"] == "max" else info.max, x.dtype)
    return lax.reduce_window(x, init, fn, tuple(attrs["window"]), tuple(attrs["strides"]),
                             attrs["padding"])


_reg(OpDef("reduce_window", "reduction", NUMERIC, _needs_rank(1, _plan_reduce_window),
           _build_reduce_window, tags=frozenset({"sums"}) | SELECTS))  # by its kind


# --- linear algebra ------------------------------------------------------------------------

def _plan_dot(ctx: Ctx, x: Val) -> Plan | None:
    """lhs [batch..., free, contract] x rhs [batch..., contract, n] in general positions."""
    dims = list(range(x.rank))
    ctx.rng.shuffle(dims)
    contract = dims[0]
    batch = dims[1:2] if x.rank >= 3 and ctx.rng.random() < 0.5 else []
    n = ctx.dim()
    rhs_shape = [x.shape[b] for b in batch] + [x.shape[contract], n]
    if len(rhs_shape) > ctx.max_rank:
        return None
    y = ctx.operand(tuple(rhs_shape), x.dtype)
    nb = len(batch)
    return [x, y], {"lhs_contract": [contract], "rhs_contract": [nb], "lhs_batch": batch,
                    "rhs_batch": list(range(nb))}


def _build_dot(attrs: dict, x: Any, y: Any) -> Any:
    dn = ((tuple(attrs["lhs_contract"]), tuple(attrs["rhs_contract"])),
          (tuple(attrs["lhs_batch"]), tuple(attrs["rhs_batch"])))
    return lax.dot_general(x, y, dn)


_reg(OpDef("dot_general", "linalg", FLOATS + ("s32",), _needs_rank(1, _plan_dot), _build_dot,
           tags=frozenset({"sums"})))


def _plan_conv(ctx: Ctx, x: Val) -> Plan | None:
    """NC(spatial...) input, OI(spatial...) kernel, 1 or 2 spatial dims."""
    if x.rank not in (3, 4):
        # Few values have rank 3 or 4: start a fresh image so convolutions are drawn.
        spatial = [ctx.dim() for _ in range(int(ctx.rng.integers(1, 3)))]
        x = ctx.operand((int(ctx.rng.integers(1, 3)), int(ctx.rng.integers(1, 4)), *spatial), x.dtype)
    spatial = x.rank - 2
    ksize = [int(ctx.rng.integers(1, min(3, d) + 1)) for d in x.shape[2:]]
    out_ch = int(ctx.rng.choice([1, 2, 3, 4]))
    w = ctx.operand((out_ch, x.shape[1], *ksize), x.dtype)
    return [x, w], {
        "strides": [int(ctx.rng.integers(1, 3)) for _ in range(spatial)],
        "padding": str(ctx.rng.choice(["VALID", "SAME"])),
        "lhs_dilation": [int(ctx.rng.integers(1, 3)) for _ in range(spatial)],
        "rhs_dilation": [int(ctx.rng.integers(1, 3)) for _ in range(spatial)],
    }


def _build_conv(attrs: dict, x: Any, w: Any) -> Any:
    padding = attrs["padding"]
    if any(d > 1 for d in attrs["lhs_dilation"]):
        padding = [(0, 0)] * len(attrs["strides"])  # SAME is undefined with lhs dilation
    return lax.conv_general_dilated(x, w, tuple(attrs["strides"]), padding,
                                    tuple(attrs["lhs_dilation"]), tuple(attrs["rhs_dilation"]))


_reg(OpDef("conv_general_dilated", "linalg", FLOATS, _plan_conv, _build_conv,
           tags=frozenset({"sums"})))


# --- shape manipulation --------------------------------------------------------------------

def _plan_reshape(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank == 0:
        return [x], {"shape": [1] * int(ctx.rng.integers(1, 3))}
    r = ctx.rng.random()
    shape = list(x.shape)
    if r < 0.3 or x.rank == 1:
        shape = [x.size]
        if x.size > 1 and ctx.rng.random() < 0.5:
            f = next((p for p in (2, 3, 5, 7) if x.size % p == 0), None)
            shape = [f, x.size // f] if f else [x.size, 1]
    elif r < 0.65:
        i = int(ctx.rng.integers(x.rank - 1))
        shape[i:i + 2] = [shape[i] * shape[i + 1]]
    else:
        i = int(ctx.rng.integers(x.rank))
        shape.insert(i, 1)
    if len(shape) > ctx.max_rank:
        return None
    return [x], {"shape": shape}


_reg(OpDef("reshape", "shape", ALL, _plan_reshape, lambda a, x: lax.reshape(x, tuple(a["shape"])),
           tags=SELECTS))


def _plan_transpose(ctx: Ctx, x: Val) -> Plan:
    if len(set(x.shape)) > 1 and ctx.rng.random() < 0.3:
        # Shape-preserving transposes (square matrices) are where a transpose mistaken for
        # a copy or layout change goes unnoticed by shape checks: draw them on purpose.
        x = ctx.operand((x.shape[0],) * x.rank, x.dtype)
    return [x], {"perm": [int(p) for p in ctx.rng.permutation(x.rank)]}


_reg(OpDef("transpose", "shape", ALL, _needs_rank(2, _plan_transpose),
           lambda a, x: lax.transpose(x, tuple(a["perm"])),
           tags=SELECTS))


def _plan_broadcast(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank >= ctx.max_rank:
        return None
    pos = int(ctx.rng.integers(x.rank + 1))
    shape = list(x.shape)
    shape.insert(pos, ctx.dim())
    dims = [i for i in range(len(shape)) if i != pos]
    return [x], {"shape": shape, "dims": dims}


_reg(OpDef("broadcast_in_dim", "shape", ALL, _plan_broadcast,
           lambda a, x: lax.broadcast_in_dim(x, tuple(a["shape"]), tuple(a["dims"])),
           tags=SELECTS))


def _plan_squeeze(ctx: Ctx, x: Val) -> Plan | None:
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    return ([x], {"dims": ones}) if ones else None


_reg(OpDef("squeeze", "shape", ALL, _plan_squeeze, lambda a, x: lax.squeeze(x, tuple(a["dims"])),
           tags=SELECTS))


def _plan_expand(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank >= ctx.max_rank:
        return None
    return [x], {"dims": [int(ctx.rng.integers(x.rank + 1))]}


_reg(OpDef("expand_dims", "shape", ALL, _plan_expand,
           lambda a, x: lax.expand_dims(x, tuple(a["dims"])),
           tags=SELECTS))


def _plan_rev(ctx: Ctx, x: Val) -> Plan:
    k = int(ctx.rng.integers(1, x.rank + 1))
    return [x], {"dims": sorted(int(d) for d in ctx.rng.choice(x.rank, size=k, replace=False))}


_reg(OpDef("rev", "shape", ALL, _needs_rank(1, _plan_rev), lambda a, x: lax.rev(x, tuple(a["dims"])),
           tags=SELECTS))


def _plan_pad(ctx: Ctx, x: Val) -> Plan:
    config = []
    for d in x.shape:
        lo, hi = (int(v) for v in ctx.rng.integers(-1, 3, size=2))
        interior = int(ctx.rng.integers(0, 2)) if d > 1 else 0
        size = d + lo + hi + interior * max(d - 1, 0)
        if size < 1:
            lo, hi = 0, 0
        config.append([lo, hi, interior])
    return [x], {"config": config, "value": float(ctx.rng.choice([0.0, 1.0, -2.5]))}


def _build_pad(attrs: dict, x: Any) -> Any:
    value = attrs["value"]
    if x.dtype == jnp.bool_:
        value = bool(value)
    elif not jnp.issubdtype(x.dtype, jnp.floating):
        value = int(abs(value))
    return lax.pad(x, jnp.asarray(value, x.dtype), [tuple(c) for c in attrs["config"]])


_reg(OpDef("pad", "shape", ALL, _plan_pad, _build_pad, tags=SELECTS))


def _plan_concat(ctx: Ctx, x: Val) -> Plan:
    axis = _axis(ctx, x)
    others = []
    for _ in range(int(ctx.rng.integers(1, 3))):
        shape = list(x.shape)
        shape[axis] = ctx.dim()
        others.append(ctx.operand(tuple(shape), x.dtype))
    return [x, *others], {"axis": axis}


_reg(OpDef("concatenate", "shape", ALL, _needs_rank(1, _plan_concat),
           lambda a, *xs: lax.concatenate(xs, a["axis"]), tags=SELECTS))


def _plan_slice(ctx: Ctx, x: Val) -> Plan:
    start, limit, stride = [], [], []
    for d in x.shape:
        s = int(ctx.rng.integers(0, d))
        e = int(ctx.rng.integers(s + 1, d + 1))
        start.append(s)
        limit.append(e)
        stride.append(int(ctx.rng.integers(1, 3)))
    return [x], {"start": start, "limit": limit, "stride": stride}


_reg(OpDef("slice", "shape", ALL, _needs_rank(1, _plan_slice),
           lambda a, x: lax.slice(x, a["start"], a["limit"], a["stride"]), tags=SELECTS))


def _index_operands(ctx: Ctx, n: int) -> list[Val]:
    return [ctx.operand((), "s32") for _ in range(n)]


def _plan_dynamic_slice(ctx: Ctx, x: Val) -> Plan:
    sizes = [int(ctx.rng.integers(1, d + 1)) for d in x.shape]
    return [x, *_index_operands(ctx, x.rank)], {"sizes": sizes}


_reg(OpDef("dynamic_slice", "indexing", ALL, _needs_rank(1, _plan_dynamic_slice),
           lambda a, x, *idx: lax.dynamic_slice(x, idx, a["sizes"]),
           tags=frozenset({"index"}) | SELECTS))


def _plan_dus(ctx: Ctx, x: Val) -> Plan:
    update = ctx.operand(tuple(int(ctx.rng.integers(1, d + 1)) for d in x.shape), x.dtype)
    return [x, update, *_index_operands(ctx, x.rank)], {}


_reg(OpDef("dynamic_update_slice", "indexing", ALL, _needs_rank(1, _plan_dus),
           lambda a, x, u, *idx: lax.dynamic_update_slice(x, u, idx),
           tags=frozenset({"index"}) | SELECTS))


def _plan_gather(ctx: Ctx, x: Val) -> Plan:
    n = int(ctx.rng.integers(1, 6))
    return [x, ctx.operand((n, 1), "s32")], {"mode": str(ctx.rng.choice(["clip", "fill"]))}


def _row_dnums(rank: int) -> tuple[lax.GatherDimensionNumbers, tuple[int, ...]]:
    rest = tuple(range(1, rank))
    return lax.GatherDimensionNumbers(offset_dims=rest, collapsed_slice_dims=(0,),
                                      start_index_map=(0,)), rest


def _build_gather(attrs: dict, x: Any, idx: Any) -> Any:
    dn, _ = _row_dnums(x.ndim)
    mode = lax.GatherScatterMode.CLIP if attrs["mode"] == "clip" else lax.GatherScatterMode.FILL_OR_DROP
    return lax.gather(x, idx, dn, (1, *x.shape[1:]), mode=mode, fill_value=0)


_reg(OpDef("gather", "indexing", ALL, _needs_rank(1, _plan_gather), _build_gather,
           tags=frozenset({"index"}) | SELECTS))


def _plan_scatter(ctx: Ctx, x: Val) -> Plan:
    n = int(ctx.rng.integers(1, x.shape[0] + 1))
    updates = ctx.operand((n, *x.shape[1:]), x.dtype)
    # Rows are distinct so that `replace` has one defined result; for `add` they may
    # repeat (order of accumulation is a legal difference the oracle tolerates).
    rows = [int(r) for r in ctx.rng.permutation(x.shape[0])[:n]]
    return [x, updates], {"rows": rows, "kind": str(ctx.rng.choice(["add", "replace"]))}


def _build_scatter(attrs: dict, x: Any, u: Any) -> Any:
    idx = jnp.asarray(attrs["rows"], jnp.int32).reshape(-1, 1)
    dn = lax.ScatterDimensionNumbers(update_window_dims=tuple(range(1, x.ndim)),
                                     inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    if attrs["kind"] == "add" and x.dtype != jnp.bool_:
        return lax.scatter_add(x, idx, u, dn, unique_indices=True)
    return lax.scatter(x, idx, u, dn, unique_indices=True)


_reg(OpDef("scatter", "indexing", ALL, _needs_rank(1, _plan_scatter), _build_scatter,
           tags=SELECTS))  # by its kind: replace selects, add does not


def _plan_iota(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dim": _axis(ctx, x)}


def _build_iota(attrs: dict, x: Any) -> Any:
    # iota of x's shape and dtype, combined with x so the op stays connected to the graph.
    it = lax.broadcasted_iota(x.dtype if x.dtype != jnp.bool_ else jnp.int32, x.shape, attrs["dim"])
    return lax.add(x, it) if x.dtype != jnp.bool_ else lax.ne(it, jnp.asarray(0, it.dtype))


_reg(OpDef("iota", "shape", ALL, _needs_rank(1, _plan_iota), _build_iota, tags=ROUNDED))


def _plan_sort(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": _axis(ctx, x), "descending": bool(ctx.rng.integers(2))}


def _build_sort(attrs: dict, x: Any) -> Any:
    out = lax.sort(x, dimension=attrs["axis"], is_stable=True)
    return lax.rev(out, (attrs["axis"],)) if attrs["descending"] else out


_reg(OpDef("sort", "sort", NUMERIC, _needs_rank(1, _plan_sort), _build_sort, tags=SELECTS))


def _plan_top_k(ctx: Ctx, x: Val) -> Plan:
    return [x], {"k": int(ctx.rng.integers(1, x.shape[-1] + 1)), "output": int(ctx.rng.integers(2))}


_reg(OpDef("top_k", "sort", NUMERIC, _needs_rank(1, _plan_top_k),
           lambda a, x: lax.top_k(x, a["k"])[a["output"]], discrete=True, tags=SELECTS))


# --- control flow --------------------------------------------------------------------------

# Bodies of control flow are small, bounded elementwise maps, so loops cannot blow up.
BODIES: dict[str, Callable[[Any], Any]] = {
    "tanh": lax.tanh, "sin": lax.sin, "halve": lambda v: lax.mul(v, jnp.asarray(0.5, v.dtype)),
    "neg": lax.neg, "abs": lax.abs, "logistic": lax.logistic, "square": lambda v: lax.mul(v, v),
}
INT_BODIES = ("neg", "abs", "square")


def _body(name: str, v: Any) -> Any:
    if v.dtype == jnp.bool_:
        return lax.bitwise_not(v)
    if not jnp.issubdtype(v.dtype, jnp.floating) and name not in INT_BODIES:
        name = "neg" if jnp.issubdtype(v.dtype, jnp.signedinteger) else "square"
    if name == "neg" and jnp.issubdtype(v.dtype, jnp.unsignedinteger):
        name = "square"
    return BODIES[name](v)


def _plan_bodies(ctx: Ctx, k: int) -> list[str]:
    return [str(b) for b in ctx.rng.choice(list(BODIES), size=k)]


def _plan_cond(ctx: Ctx, x: Val) -> Plan:
    return [ctx.operand((), "bool"), x], {"branches": _plan_bodies(ctx, 2)}


_reg(OpDef("cond", "control", ALL, _plan_cond,
           lambda a, p, x: lax.cond(p, lambda v: _body(a["branches"][0], v),
                                    lambda v: _body(a["branches"][1], v), x)))


def _plan_loop(ctx: Ctx, x: Val) -> Plan:
    return [x], {"body": _plan_bodies(ctx, 1)[0], "trips": int(ctx.rng.integers(1, 5))}


def _build_while(attrs: dict, x: Any) -> Any:
    def body(c: Any) -> Any:
        return c[0] + 1, _body(attrs["body"], c[1])
    return lax.while_loop(lambda c: c[0] < attrs["trips"], body, (jnp.int32(0), x))[1]


_reg(OpDef("while_loop", "control", ALL, _plan_loop, _build_while))
_reg(OpDef("fori_loop", "control", ALL, _plan_loop,
           lambda a, x: lax.fori_loop(0, a["trips"], lambda i, v: _body(a["body"], v), x)))


def _build_scan(attrs: dict, x: Any) -> Any:
    def step(carry: Any, xt: Any) -> tuple[Any, Any]:
        new = _body(attrs["body"], carry)
        new = lax.bitwise_xor(new, xt) if x.dtype == jnp.bool_ else lax.add(new, xt)
        return new, new
    return lax.scan(step, x[0], x)[1]


_reg(OpDef("scan", "control", ALL, _needs_rank(1, _plan_loop), _build_scan))


def ops_for(dtype: str, allow: Sequence[str] = (), exclude: Sequence[str] = ()) -> list[OpDef]:
    """The ops that accept `dtype` as their primary operand, filtered by name."""
    return [op for op in OPS.values()
            if dtype in op.dtypes and (not allow or op.name in allow) and op.name not in exclude]
