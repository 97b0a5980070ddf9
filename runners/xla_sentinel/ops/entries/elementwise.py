"""Elementwise entries: unary and binary lax ops on operands of one shape, clamp and the
select idioms; each numpy form is an `Elementwise` kernel or written out below."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.special

from xla_sentinel.core.names import FLOATS, INTS
from xla_sentinel.ops.numpy_forms import (
    COMPARES,
    Elementwise,
    np_clamp,
    np_clz,
    np_digamma,
    np_div,
    np_is_float,
    np_logistic,
    np_max,
    np_min,
    np_nextafter,
    np_not,
    np_popcount,
    np_reduce,
    np_rem,
    np_round_away,
    np_shift_left,
    np_shift_right_arithmetic,
    np_shift_right_logical,
    np_sign,
)
from xla_sentinel.ops.spec import (
    ALL,
    APPROX,
    EXACT,
    NUMERIC,
    ROUNDED,
    SELECTS,
    SIGNED,
    Attrs,
    Ctx,
    OpDef,
    Plan,
    Val,
    needs_rank,
    same,
)


def unary(*, name: str, kernel: Callable[[np.ndarray], np.ndarray], dtypes: tuple[str, ...],
          guard: str | None = None, discrete: bool = False, tags: frozenset[str] = frozenset(),
          stablehlo: str | None = None) -> OpDef:
    """An entry of one operand, which `guard` maps into the op's domain first; `kernel`
    is the op alone in numpy."""
    return OpDef(name=name, category="elementwise", dtypes=dtypes, plan=same(1), guard=guard,
                 discrete=discrete, tags=tags, numpy=Elementwise(kernel, (guard,)),
                 stablehlo=(stablehlo,) if stablehlo else ())


def binary(*, name: str, kernel: Callable[[np.ndarray, np.ndarray], np.ndarray],
           dtypes: tuple[str, ...], lhs_guard: str | None = None, rhs_guard: str | None = None,
           int_rhs: bool = False, discrete: bool = False, own_dtypes: bool = False,
           tags: frozenset[str] = frozenset(), stablehlo: str | None = None) -> OpDef:
    """An entry of two operands of one shape and dtype, each guarded into the op's domain;
    `int_rhs`: an integer right operand is made a divisor without zero first."""
    return OpDef(name=name, category="elementwise", dtypes=dtypes, plan=same(2),
                 guard=lhs_guard or rhs_guard, discrete=discrete, own_dtypes=own_dtypes, tags=tags,
                 numpy=Elementwise(kernel, (lhs_guard, rhs_guard), int_rhs),
                 stablehlo=(stablehlo,) if stablehlo else ())


# --- clamp and the select idioms ---------------------------------------------------------

def _plan_clamp(ctx: Ctx, x: Val) -> Plan:
    lo, hi = sorted(float(v) for v in ctx.rng.normal(size=2))
    return [x], {"lo": lo, "hi": hi}


def clamp_bounds(attrs: Attrs, floating: bool, unsigned: bool) -> tuple[float, float]:
    """clamp's bounds for an operand of a float, signed or unsigned type: as drawn for a
    float; floor(4 lo) and ceil(4 hi) for an integer; |lo| and |lo| + |hi| of those for
    an unsigned one."""
    lo, hi = attrs["lo"], attrs["hi"]
    if not floating:
        lo, hi = math.floor(lo * 4), math.ceil(hi * 4)
        if unsigned:
            lo, hi = abs(lo), abs(lo) + abs(hi)
    return lo, hi


def _clamp_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    lo, hi = clamp_bounds(attrs, np_is_float(x), x.dtype.kind == "u")
    return np_clamp(np.asarray(lo, x.dtype), x, np.asarray(hi, x.dtype))


def _plan_select(ctx: Ctx, x: Val) -> Plan:
    return [ctx.operand(x.shape, "bool"), x, ctx.operand(x.shape, x.dtype)], {}


COMPARE_DIRECTIONS = ("ge", "le", "gt", "lt", "eq", "ne")


def _plan_select_compare(ctx: Ctx, x: Val) -> Plan:
    # The predicate compares the selected values themselves (select(x >= y, x, y) and
    # friends): the max/min idioms simplifiers rewrite, and where compare ties matter.
    # A free bool predicate (`select`) almost never produces a tie.
    return [x, ctx.operand(x.shape, x.dtype)], {"dir": str(ctx.rng.choice(COMPARE_DIRECTIONS)),
                                                "swap": bool(ctx.rng.integers(2))}


def _select_compare_numpy(attrs: Attrs, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    pred = COMPARES[attrs["dir"]](x, y)
    return np.where(pred, y, x) if attrs["swap"] else np.where(pred, x, y)


def _plan_select_extremum(ctx: Ctx, x: Val) -> Plan:
    # A select whose predicate is certain to tie: where(x >= max(x, axis), y, z), the
    # one-hot/mask-at-the-max idiom of argmax, top-1 routing and max-pooling gradients.
    # select_compare picks between the compared values themselves, so a tie there
    # selects equal values either way; here the tie decides between other values.
    other = str(ctx.rng.choice(NUMERIC))
    return [x, ctx.operand(x.shape, other), ctx.operand(x.shape, other)], {
        "axis": int(ctx.rng.integers(x.rank)), "kind": str(ctx.rng.choice(["max", "min"]))}


def _select_extremum_numpy(attrs: Attrs, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    axis = attrs["axis"]
    kind, compare = ("max", np.greater_equal) if attrs["kind"] == "max" else ("min", np.less_equal)
    extremum = np.expand_dims(np_reduce(x, kind, (axis,)), axis)
    return np.where(compare(x, extremum), y, z)


ENTRIES: list[OpDef] = [
    # Transcendental functions: only sqrt is correctly rounded by IEEE 754; the others may
    # err by an ulp ("approx").
    unary(name="exp", kernel=np.exp, dtypes=FLOATS, guard="bounded", tags=APPROX,
          stablehlo="stablehlo.exponential"),
    unary(name="log", kernel=np.log, dtypes=FLOATS, guard="pos", tags=APPROX, stablehlo="stablehlo.log"),
    unary(name="log1p", kernel=np.log1p, dtypes=FLOATS, guard="pos", tags=APPROX,
          stablehlo="stablehlo.log_plus_one"),
    unary(name="expm1", kernel=np.expm1, dtypes=FLOATS, guard="bounded", tags=APPROX,
          stablehlo="stablehlo.exponential_minus_one"),
    unary(name="tanh", kernel=np.tanh, dtypes=FLOATS, tags=APPROX, stablehlo="stablehlo.tanh"),
    # No StableHLO name: jax lowers logistic to exp, add and divide.
    unary(name="logistic", kernel=np_logistic, dtypes=FLOATS, tags=APPROX),
    unary(name="sqrt", kernel=np.sqrt, dtypes=FLOATS, guard="pos", stablehlo="stablehlo.sqrt"),
    unary(name="rsqrt", kernel=lambda x: 1.0 / np.sqrt(x), dtypes=FLOATS, guard="pos", tags=APPROX,
          stablehlo="stablehlo.rsqrt"),
    unary(name="cbrt", kernel=np.cbrt, dtypes=FLOATS, tags=APPROX, stablehlo="stablehlo.cbrt"),
    unary(name="sin", kernel=np.sin, dtypes=FLOATS, guard="bounded", tags=APPROX, stablehlo="stablehlo.sine"),
    unary(name="cos", kernel=np.cos, dtypes=FLOATS, guard="bounded", tags=APPROX,
          stablehlo="stablehlo.cosine"),
    unary(name="tan", kernel=np.tan, dtypes=FLOATS, guard="unit", tags=APPROX, stablehlo="stablehlo.tan"),
    unary(name="erf", kernel=scipy.special.erf, dtypes=FLOATS, tags=APPROX, stablehlo="chlo.erf"),
    unary(name="erf_inv", kernel=scipy.special.erfinv, dtypes=FLOATS, guard="unit", tags=APPROX,
          stablehlo="chlo.erf_inv"),
    unary(name="lgamma", kernel=scipy.special.gammaln, dtypes=FLOATS, guard="pos", tags=APPROX,
          stablehlo="chlo.lgamma"),
    unary(name="digamma", kernel=np_digamma, dtypes=FLOATS, guard="pos", tags=APPROX,
          stablehlo="chlo.digamma"),
    unary(name="atanh", kernel=np.arctanh, dtypes=FLOATS, guard="unit", tags=APPROX, stablehlo="chlo.atanh"),
    unary(name="sinh", kernel=np.sinh, dtypes=FLOATS, guard="bounded", tags=APPROX, stablehlo="chlo.sinh"),
    # Rounding to integers and classifying.
    unary(name="floor", kernel=np.floor, dtypes=FLOATS, discrete=True, tags=EXACT, stablehlo="stablehlo.floor"),
    unary(name="ceil", kernel=np.ceil, dtypes=FLOATS, discrete=True, tags=EXACT, stablehlo="stablehlo.ceil"),
    unary(name="sign", kernel=np_sign, dtypes=FLOATS, discrete=True, tags=EXACT, stablehlo="stablehlo.sign"),
    unary(name="round", kernel=np.rint, dtypes=FLOATS, discrete=True, tags=EXACT,
          stablehlo="stablehlo.round_nearest_even"),
    unary(name="round_away", kernel=np_round_away, dtypes=FLOATS, discrete=True, tags=EXACT,
          stablehlo="stablehlo.round_nearest_afz"),
    unary(name="is_finite", kernel=np.isfinite, dtypes=FLOATS, discrete=True, tags=EXACT,
          stablehlo="stablehlo.is_finite"),
    # Sign and bits.
    unary(name="abs", kernel=np.abs, dtypes=FLOATS + SIGNED, tags=SELECTS, stablehlo="stablehlo.abs"),
    unary(name="neg", kernel=np.negative, dtypes=FLOATS + SIGNED, tags=SELECTS, stablehlo="stablehlo.negate"),
    unary(name="not", kernel=np_not, dtypes=INTS + ("bool",), stablehlo="stablehlo.not"),
    unary(name="population_count", kernel=np_popcount, dtypes=INTS, stablehlo="stablehlo.popcnt"),
    unary(name="clz", kernel=np_clz, dtypes=INTS, stablehlo="stablehlo.count_leading_zeros"),
    # Arithmetic.
    binary(name="add", kernel=np.add, dtypes=NUMERIC, tags=ROUNDED, stablehlo="stablehlo.add"),
    binary(name="sub", kernel=np.subtract, dtypes=NUMERIC, tags=ROUNDED, stablehlo="stablehlo.subtract"),
    binary(name="mul", kernel=np.multiply, dtypes=NUMERIC, tags=ROUNDED, stablehlo="stablehlo.multiply"),
    binary(name="max", kernel=np_max, dtypes=NUMERIC, tags=SELECTS, stablehlo="stablehlo.maximum"),
    binary(name="min", kernel=np_min, dtypes=NUMERIC, tags=SELECTS, stablehlo="stablehlo.minimum"),
    binary(name="div", kernel=np_div, dtypes=NUMERIC, rhs_guard="pos", int_rhs=True,
           stablehlo="stablehlo.divide"),
    binary(name="rem", kernel=np_rem, dtypes=NUMERIC, rhs_guard="pos", int_rhs=True, discrete=True,
           stablehlo="stablehlo.remainder"),
    binary(name="pow", kernel=np.power, dtypes=FLOATS, lhs_guard="pos", rhs_guard="bounded", tags=APPROX,
           stablehlo="stablehlo.power"),
    binary(name="atan2", kernel=np.arctan2, dtypes=FLOATS, tags=APPROX, stablehlo="stablehlo.atan2"),
    binary(name="nextafter", kernel=np_nextafter, dtypes=("f32", "f64"), own_dtypes=True, tags=EXACT,
           stablehlo="chlo.next_after"),
    # Bitwise.
    binary(name="and", kernel=np.bitwise_and, dtypes=INTS + ("bool",), stablehlo="stablehlo.and"),
    binary(name="or", kernel=np.bitwise_or, dtypes=INTS + ("bool",), stablehlo="stablehlo.or"),
    binary(name="xor", kernel=np.bitwise_xor, dtypes=INTS + ("bool",), stablehlo="stablehlo.xor"),
    binary(name="shift_left", kernel=np_shift_left, dtypes=INTS, stablehlo="stablehlo.shift_left"),
    binary(name="shift_right_logical", kernel=np_shift_right_logical, dtypes=INTS,
           stablehlo="stablehlo.shift_right_logical"),
    binary(name="shift_right_arithmetic", kernel=np_shift_right_arithmetic, dtypes=INTS,
           stablehlo="stablehlo.shift_right_arithmetic"),
    # Compares.
    binary(name="compare_eq", kernel=COMPARES["eq"], dtypes=NUMERIC, discrete=True, tags=EXACT,
           stablehlo="stablehlo.compare"),
    binary(name="compare_ne", kernel=COMPARES["ne"], dtypes=NUMERIC, discrete=True, tags=EXACT,
           stablehlo="stablehlo.compare"),
    binary(name="compare_lt", kernel=COMPARES["lt"], dtypes=NUMERIC, discrete=True, tags=EXACT,
           stablehlo="stablehlo.compare"),
    binary(name="compare_le", kernel=COMPARES["le"], dtypes=NUMERIC, discrete=True, tags=EXACT,
           stablehlo="stablehlo.compare"),
    binary(name="compare_gt", kernel=COMPARES["gt"], dtypes=NUMERIC, discrete=True, tags=EXACT,
           stablehlo="stablehlo.compare"),
    binary(name="compare_ge", kernel=COMPARES["ge"], dtypes=NUMERIC, discrete=True, tags=EXACT,
           stablehlo="stablehlo.compare"),
    OpDef(name="clamp", category="elementwise", dtypes=NUMERIC, plan=_plan_clamp, tags=SELECTS,
          numpy=_clamp_numpy, stablehlo=("stablehlo.clamp",)),
    OpDef(name="select", category="elementwise", dtypes=ALL, plan=_plan_select, tags=SELECTS,
          numpy=lambda a, p, x, y: np.where(p, x, y), stablehlo=("stablehlo.select",)),
    OpDef(name="select_compare", category="elementwise", dtypes=NUMERIC, plan=_plan_select_compare,
          discrete=True, tags=SELECTS, numpy=_select_compare_numpy,
          stablehlo=("stablehlo.compare", "stablehlo.select")),
    OpDef(name="select_extremum", category="elementwise", dtypes=NUMERIC,
          plan=needs_rank(1, _plan_select_extremum), discrete=True, tags=EXACT,
          numpy=_select_extremum_numpy, stablehlo=("stablehlo.compare", "stablehlo.select")),
]
