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

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import scipy.special
from jax import lax

from . import templates
from .campaign import SHAPE_FAMILIES
from .dtypes import FLOATS, INTS, NP_DTYPES

ALL = FLOATS + INTS + ("bool",)
NUMERIC = FLOATS + INTS
SIGNED = tuple(d for d in INTS if NP_DTYPES[d].kind == "i")
INT_BITS = {d: 8 * NP_DTYPES[d].itemsize for d in INTS}


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
    # numpy(attrs, *args): what `build` computes, in float64 numpy with lax semantics (the
    # numpy reference section below); None where the op has no numpy form.
    numpy: Callable[..., Any] | None = None
    # The program shape from real bugs this op belongs to (campaign.SHAPE_FAMILIES): drawn only
    # when the campaign's `generator.shapes` names it, or when `generator.ops` names the op.
    family: str | None = None
    # The StableHLO ops this entry lowers to that carry its meaning. With one op, the
    # entry's bitwise tags hold for that op wherever it appears (a replayed module, a
    # bisector's cut); `discrete` holds for each op named. Ops with regions whose body
    # decides their meaning (reduce, scatter, sort) are named by no entry.
    stablehlo: tuple[str, ...] = ()


OPS: dict[str, OpDef] = {}



def _reg(op: OpDef) -> None:
    assert op.name not in OPS, op.name
    assert op.family is None or op.family in SHAPE_FAMILIES, op.family
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


# --- numpy reference column: float64 numpy with lax semantics ------------------------------
#
# `OpDef.numpy(attrs, *args)` computes what `build(attrs, *args)` computes, in numpy: float
# operands arrive as float64 (the float64 reference promotes them) except for `own_dtypes`
# ops, and the result has build's dtype. It shares no code with XLA, so a bug that XLA has
# in every configuration (and so in every XLA-based reference) still shows against it.
# Where numpy's own semantics differ from lax's, the kernels below spell lax's out.

BF16 = np.dtype(ml_dtypes.bfloat16)


def np_is_float(x: Any) -> bool:
    dt = np.asarray(x).dtype
    return dt.kind == "f" or dt == BF16


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """XLA:CPU runs with denormals flushed (FTZ and DAZ): a subnormal operand reads as a
    zero of its sign and a subnormal result is one. Measured: ceil(1e-310) is 0 and
    1e-310 == 0 is true under jit and eager, f32 and f64 alike."""
    # f16 is not a hardware format here: XLA widens it to f32, where its subnormals are
    # normal numbers. bf16 subnormals are f32 subnormals.
    if not np_is_float(x) or x.dtype == np.float16:
        return x
    tiny = ml_dtypes.finfo(x.dtype).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros((), x.dtype), x), x).astype(x.dtype)


def _unsigned(dt: np.dtype) -> np.dtype:
    return np.dtype(f"u{dt.itemsize}")


def _signed(dt: np.dtype) -> np.dtype:
    return np.dtype(f"i{dt.itemsize}")


def np_guard(kind: str | None, x: np.ndarray) -> np.ndarray:
    """`guard` in numpy."""
    if kind is None or not np_is_float(x):
        return x
    if kind == "pos":
        return np.abs(x) + x.dtype.type(0.5)
    if kind == "unit":
        return np.tanh(x) * x.dtype.type(0.9)
    if kind == "bounded":
        return np_clamp(x.dtype.type(-8.0), x, x.dtype.type(8.0))
    if kind == "near1":
        return x.dtype.type(1.0) + np.tanh(x) * x.dtype.type(0.2)
    raise ValueError(f"unknown guard {kind!r}")


def np_int_nonzero(x: np.ndarray) -> np.ndarray:
    """`int_nonzero` in numpy (abs wraps at INT_MIN, rem truncates, as in lax)."""
    if x.dtype.kind == "i":
        return (np.fmod(np.abs(x), x.dtype.type(7)) + x.dtype.type(1)).astype(x.dtype)
    return np.maximum(x, x.dtype.type(1))


def np_sign(x: np.ndarray) -> np.ndarray:
    # lax.sign keeps the zero's sign and NaN.
    if not np_is_float(x):
        return np.sign(x)
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, x)).astype(x.dtype)


def np_round_away(x: np.ndarray) -> np.ndarray:
    # Half away from zero; x - trunc(x) is exact, unlike floor(x + 0.5).
    t = np.trunc(x)
    r = np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)
    return np.copysign(r, x).astype(x.dtype)


def np_logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def np_popcount(x: np.ndarray) -> np.ndarray:
    # numpy counts the bits of |x| for signed types; lax counts the two's complement bits.
    return np.bitwise_count(x.view(_unsigned(x.dtype))).astype(x.dtype)


def np_clz(x: np.ndarray) -> np.ndarray:
    u = x.view(_unsigned(x.dtype)).astype(np.float64)  # exact: at most 32 bits
    bit_length = np.where(u == 0, 0, np.frexp(u)[1])
    return (x.dtype.itemsize * 8 - bit_length).astype(x.dtype)


def np_not(x: np.ndarray) -> np.ndarray:
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def np_max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.max: NaN-propagating (as np.maximum), and +0 above -0 in either order (numpy
    returns its first operand for equal zeros)."""
    out = np.maximum(x, y)
    if np_is_float(out):
        out = np.where((x == 0) & (y == 0), x + y, out)  # -0 only if both are -0
    return out


def np_min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.min: NaN-propagating, -0 below +0 in either order."""
    out = np.minimum(x, y)
    if np_is_float(out):
        out = np.where((x == 0) & (y == 0), -(-x - y), out)  # +0 only if both are +0
    return out


def np_clamp(lo: Any, x: np.ndarray, hi: Any) -> np.ndarray:
    """lax.clamp: min(max(x, lo), hi), NaN-propagating."""
    return np.minimum(np.maximum(x, lo), hi).astype(np.asarray(x).dtype)


def _int_division(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Truncated quotient and remainder where defined; masks of division by zero and of
    INT_MIN / -1 (the two cases lax defines apart from C)."""
    zero = y == 0
    overflow = np.zeros_like(zero)
    if x.dtype.kind == "i":
        overflow = (x == np.iinfo(x.dtype).min) & (y == -1)
    safe = np.where(zero | overflow, 1, y).astype(x.dtype)
    q = np.trunc(x.astype(np.float64) / safe.astype(np.float64))  # exact below 2**53
    r = x.astype(np.int64) - q.astype(np.int64) * safe.astype(np.int64)
    return q.astype(np.int64), r, zero, overflow


def np_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.div: IEEE for floats; for integers truncated toward zero, x / 0 = -1 (all bits
    set) and INT_MIN / -1 = INT_MIN."""
    if np_is_float(x):
        return (x / y).astype(x.dtype)
    q, _, zero, overflow = _int_division(x, y)
    q = np.where(zero, -1, np.where(overflow, np.iinfo(x.dtype).min, q))
    return q.astype(x.dtype) if x.dtype.kind == "i" else q.astype(np.int64).astype(_signed(x.dtype)).view(x.dtype)


def np_rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.rem: the sign of the dividend (C fmod); x % 0 = x and INT_MIN % -1 = 0."""
    if np_is_float(x):
        return np.fmod(x, y)
    _, r, zero, overflow = _int_division(x, y)
    return np.where(zero, x, np.where(overflow, 0, r)).astype(x.dtype)


def _shift_amount(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shift amounts read as unsigned, and where they reach the bit width (lax defines
    those: 0 for left and logical shifts, the sign fill for arithmetic ones)."""
    amount = np.asarray(y).view(_unsigned(np.asarray(y).dtype))
    past = amount >= x.dtype.itemsize * 8
    return np.where(past, 0, amount).astype(_unsigned(x.dtype)), past


def np_shift_left(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    s, past = _shift_amount(x, y)
    u = np.left_shift(x.view(_unsigned(x.dtype)), s)
    return np.where(past, 0, u).astype(_unsigned(x.dtype)).view(x.dtype)


def np_shift_right_logical(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    s, past = _shift_amount(x, y)
    u = np.right_shift(x.view(_unsigned(x.dtype)), s)
    return np.where(past, 0, u).astype(_unsigned(x.dtype)).view(x.dtype)


def np_shift_right_arithmetic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    s, past = _shift_amount(x, y)
    v = x.view(_signed(x.dtype))
    shifted = np.right_shift(v, s.astype(v.dtype))
    fill = np.where(v < 0, -1, 0).astype(v.dtype)
    return np.where(past, fill, shifted).astype(v.dtype).view(x.dtype)


def np_digamma(x: np.ndarray) -> np.ndarray:
    # lax.digamma is NaN at its poles (0, -1, -2, ...), where scipy gives +-inf or NaN.
    return np.where((x <= 0) & (x == np.floor(x)), np.nan, scipy.special.psi(x))


def np_nextafter(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.nextafter(x, y)


def np_convert(x: np.ndarray, dtype: str) -> np.ndarray:
    """lax.convert_element_type: floats round to nearest even (ml_dtypes for bf16), a
    float to an integer truncates, saturates at the integer's range and maps NaN to 0;
    anything to bool is `!= 0` (NaN is true); integers wrap."""
    dt = NP_DTYPES[dtype]
    x = np.asarray(x)
    if dt == np.bool_:
        return x != 0
    if np_is_float(x) and dt.kind in "iu":
        info = np.iinfo(dt)
        v = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0, posinf=info.max, neginf=info.min)
        return np.clip(v, info.min, info.max).astype(dt)
    if x.dtype == BF16 or x.dtype.kind in "iub":
        x = x.astype(np.float64) if dt.kind == "f" or dt == BF16 else x
    with np.errstate(over="ignore"):
        return x.astype(dt)


def np_bitcast(x: np.ndarray, dtype: str) -> np.ndarray:
    return np.asarray(x).view(NP_DTYPES[dtype])


def np_reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """lax.reduce_precision on the bits of x's own format, XLA's algorithm (integer
    operations, so XLA:CPU's denormal flushing does not apply): round the mantissa to
    nearest even, then, if the target has fewer exponent bits, send exponents above its
    range to inf and those at or below its smallest normal exponent to zero; NaN stays
    NaN. The float64 reference passes float64 (the promoted module's type); the
    own-precision one passes the program's type, where an f16 subnormal keeps its bits
    under exponent_bits 5 (measured against XLA:CPU)."""
    x = np.asarray(x)
    info = ml_dtypes.finfo(x.dtype)
    nexp, nmant, width = info.nexp, info.nmant, 8 * x.dtype.itemsize
    u = _unsigned(x.dtype).type
    bits = x.view(_unsigned(x.dtype)).copy()
    if mantissa_bits < nmant:
        last = 1 << (nmant - mantissa_bits)
        bias = (bits & u(last)) >> u(nmant - mantissa_bits)
        bits = (bits + bias + u((last >> 1) - 1)) & ~u(last - 1)
    if exponent_bits < nexp:
        exp_mask = u(((1 << nexp) - 1) << nmant)
        src_bias = (1 << (nexp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exp_mask
        sign = bits & u(1 << (width - 1))
        bits = np.where(exponent > u((src_bias + reduced_bias) << nmant), sign | exp_mask,
                        np.where(exponent <= u((src_bias - reduced_bias) << nmant), sign, bits))
    out = np.asarray(bits, _unsigned(x.dtype)).view(x.dtype)
    return np.where(np.isnan(x), x, out)


def total_order_key(x: np.ndarray) -> np.ndarray:
    """An int64 key whose order is IEEE 754 totalOrder on float64 (-NaN < -inf < -0 < 0
    < inf < NaN); integers keep their own order."""
    if not np_is_float(x):
        return x.astype(np.int64)
    b = np.asarray(x, np.float64).view(np.int64)
    return np.where(b < 0, b ^ np.int64(0x7FFFFFFFFFFFFFFF), b)


def np_sort(x: np.ndarray, axis: int) -> np.ndarray:
    """lax.sort: ascending and stable; -0 and 0 are equal (they keep their order) and every
    NaN sorts last."""
    key = x
    if np_is_float(x):
        key = np.where(np.isnan(x), np.nan, np.where(x == 0, 0.0, x))
    order = np.argsort(total_order_key(key), axis=axis, kind="stable")
    return np.take_along_axis(x, order, axis)


def np_top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """lax.top_k along the last axis: the k largest, descending, ties to the lower index,
    in IEEE 754 totalOrder as XLA sorts for it (a stable sort comparing the bits: +NaN
    ranks above inf, -NaN below -inf, -0 below 0; measured on XLA:CPU)."""
    key = total_order_key(x)
    # ~key reverses the order without overflow (-key of int64's minimum, an all-ones -NaN).
    order = np.argsort(~key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, order, -1), order.astype(np.int32)


def np_pad(x: np.ndarray, value: Any, config: Sequence[Sequence[int]]) -> np.ndarray:
    """lax.pad: low, high (negative crops) and interior padding per dimension."""
    out = x
    for d, (lo, hi, interior) in enumerate(config):
        n = out.shape[d]
        if interior and n > 1:
            shape = list(out.shape)
            shape[d] = n + (n - 1) * interior
            spread = np.full(shape, value, x.dtype)
            idx = [slice(None)] * out.ndim
            idx[d] = slice(None, None, interior + 1)
            spread[tuple(idx)] = out
            out = spread
        widths = [(0, 0)] * out.ndim
        widths[d] = (max(lo, 0), max(hi, 0))
        out = np.pad(out, widths, constant_values=np.asarray(value, x.dtype))
        idx = [slice(None)] * out.ndim
        idx[d] = slice(max(-lo, 0), out.shape[d] - max(-hi, 0))
        out = out[tuple(idx)]
    return out


def same_pads(sizes: Sequence[int], window: Sequence[int], strides: Sequence[int],
              padding: str) -> list[tuple[int, int]]:
    """lax.padtype_to_pads: VALID is none; SAME pads to ceil(n / stride) outputs, the odd
    element at the end."""
    if padding == "VALID":
        return [(0, 0)] * len(sizes)
    pads = []
    for n, w, s in zip(sizes, window, strides, strict=True):
        total = max((-(-n // s) - 1) * s + w - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


REDUCERS: dict[str, Any] = {"add": np.add, "max": np.maximum, "min": np.minimum,
                            "mul": np.multiply, "and": np.logical_and, "or": np.logical_or}


def _lax_signed_zeros(out: np.ndarray, x: np.ndarray, kind: str,
                      any_over: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """lax's max reduction gives +0 where it meets both zeros, its min -0 (as lax.max and
    lax.min do); numpy's maximum keeps whichever zero comes first. `any_over(mask)`
    reduces the mask over the same elements `out` covers."""
    if kind not in ("max", "min") or not np_is_float(out):
        return out
    wanted = (x == 0) & (np.signbit(x) == (kind == "min"))
    zero = np.zeros((), out.dtype)
    signed = np.where(any_over(wanted), zero if kind == "max" else -zero, -zero if kind == "max" else zero)
    return np.where(out == 0, signed, out).astype(out.dtype)


def np_reduce(x: np.ndarray, kind: str, axes: Sequence[int]) -> np.ndarray:
    """A reduction with one of REDUCERS (max and min propagate NaN and order zeros as lax
    does, integers wrap)."""
    with np.errstate(over="ignore"):
        out = REDUCERS[kind].reduce(x, axis=tuple(axes), dtype=x.dtype) if kind in (
            "add", "mul") else REDUCERS[kind].reduce(x, axis=tuple(axes))
    return _lax_signed_zeros(out, x, kind, lambda m: np.logical_or.reduce(m, axis=tuple(axes)))


def np_reduce_window(x: np.ndarray, init: Any, kind: str, window: Sequence[int],
                     strides: Sequence[int], pads: Sequence[Sequence[int]],
                     base_dilation: Sequence[int] | None = None,
                     window_dilation: Sequence[int] | None = None) -> np.ndarray:
    """lax.reduce_window with one of REDUCERS: the operand padded (and base-dilated) with
    `init`, windows strided and window-dilated."""
    base_dilation = base_dilation or [1] * x.ndim
    window_dilation = window_dilation or [1] * x.ndim
    padded = np_pad(x, init, [(lo, hi, b - 1) for (lo, hi), b in zip(pads, base_dilation, strict=True)])
    span = [(w - 1) * d + 1 for w, d in zip(window, window_dilation, strict=True)]
    if any(s > n for s, n in zip(span, padded.shape, strict=True)):
        shape = [max((n - s) // st + 1, 0) for n, s, st in zip(padded.shape, span, strides, strict=True)]
        return np.full(shape, init, x.dtype)
    views = np.lib.stride_tricks.sliding_window_view(padded, span)
    views = views[tuple(slice(None, None, s) for s in strides)]
    views = views[(Ellipsis, *(slice(None, None, d) for d in window_dilation))]
    axes = tuple(range(x.ndim, 2 * x.ndim))
    out = np_reduce(np.ascontiguousarray(views), kind, axes)
    return REDUCERS[kind](out, np.asarray(init, x.dtype)).astype(x.dtype)


def np_dot_general(x: np.ndarray, y: np.ndarray, lhs_contract: Sequence[int],
                   rhs_contract: Sequence[int], lhs_batch: Sequence[int],
                   rhs_batch: Sequence[int]) -> np.ndarray:
    """lax.dot_general: result dims are batch, lhs free, rhs free; integers wrap."""
    lf = [d for d in range(x.ndim) if d not in lhs_contract and d not in lhs_batch]
    rf = [d for d in range(y.ndim) if d not in rhs_contract and d not in rhs_batch]
    bshape = [x.shape[d] for d in lhs_batch]
    lhs = x.transpose([*lhs_batch, *lf, *lhs_contract]).reshape(
        math.prod(bshape), math.prod(x.shape[d] for d in lf), -1)
    rhs = y.transpose([*rhs_batch, *rhs_contract, *rf]).reshape(
        math.prod(bshape), lhs.shape[2], -1)
    out = np.matmul(lhs, rhs)
    return out.reshape(*bshape, *(x.shape[d] for d in lf), *(y.shape[d] for d in rf)).astype(x.dtype)


def np_conv(x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[Sequence[int]],
            lhs_dilation: Sequence[int], rhs_dilation: Sequence[int]) -> np.ndarray:
    """lax.conv_general_dilated on NC(spatial) inputs and OI(spatial) kernels, one feature
    group: a correlation (no kernel flip), lhs dilation as interior zeros."""
    zero = np.zeros((), x.dtype)
    xp = np_pad(x, zero, [(0, 0, 0), (0, 0, 0),
                          *((lo, hi, d - 1) for (lo, hi), d in zip(pads, lhs_dilation, strict=True))])
    spatial = xp.shape[2:]
    ksize = w.shape[2:]
    span = [(k - 1) * d + 1 for k, d in zip(ksize, rhs_dilation, strict=True)]
    out_sp = [max((n - s) // st + 1, 0) for n, s, st in zip(spatial, span, strides, strict=True)]
    # XLA skips padding and dilation holes rather than multiplying zeros by the kernel:
    # an inf in the kernel over padding adds nothing (0 * inf would be NaN).
    real = np_pad(np.ones(x.shape[2:], bool), False,
                  [(lo, hi, d - 1) for (lo, hi), d in zip(pads, lhs_dilation, strict=True)])
    out = np.zeros((x.shape[0], w.shape[0], *out_sp), np.result_type(x, w))
    for pos in np.ndindex(*ksize):
        idx = tuple(slice(p * d, p * d + (o - 1) * st + 1, st)
                    for p, d, o, st in zip(pos, rhs_dilation, out_sp, strides, strict=True))
        window = xp[(slice(None), slice(None), *idx)]
        term = np.einsum("nc...,oc->no...", window, w[(slice(None), slice(None), *pos)])
        out += np.where(real[idx], term, np.zeros((), out.dtype))
    return out.astype(x.dtype)


def np_dynamic_slice(x: np.ndarray, starts: Sequence[Any], sizes: Sequence[int]) -> np.ndarray:
    """lax.dynamic_slice: each start index clamped into [0, dim - size]."""
    s = [int(np.clip(int(i), 0, d - n)) for i, d, n in zip(starts, x.shape, sizes, strict=True)]
    return x[tuple(slice(a, a + n) for a, n in zip(s, sizes, strict=True))].copy()


def np_dynamic_update_slice(x: np.ndarray, u: np.ndarray, starts: Sequence[Any]) -> np.ndarray:
    """lax.dynamic_update_slice: start indices clamped so the update fits."""
    s = [int(np.clip(int(i), 0, d - n)) for i, d, n in zip(starts, x.shape, u.shape, strict=True)]
    out = x.copy()
    out[tuple(slice(a, a + n) for a, n in zip(s, u.shape, strict=True))] = u
    return out


@dataclass(frozen=True)
class Elementwise:
    """The numpy column of an elementwise entry. `kernel` is the op alone, on operands
    already in its domain: what the StableHLO evaluator applies; calling the column applies
    the entry's guards (and its nonzero integer divisor) first, as `build` does."""

    kernel: Callable[..., Any]
    guards: tuple[str | None, ...] = (None, None)
    int_rhs: bool = False

    def __call__(self, attrs: dict, *args: np.ndarray) -> np.ndarray:
        xs = [np_guard(g, x) for g, x in zip(self.guards, args, strict=False)]
        if self.int_rhs and not np_is_float(xs[1]):
            xs[1] = np_int_nonzero(xs[1])
        with np.errstate(all="ignore"):
            return self.kernel(*xs)


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

def _hlo(name: str) -> tuple[str, ...]:
    """A StableHLO op name, `stablehlo.` implied unless another dialect is given."""
    if not name:
        return ()
    return (name if "." in name else f"stablehlo.{name}",)


def unary(name: str, fn: Callable[[Any], Any], dtypes: tuple[str, ...], guard_kind: str | None = None,
          discrete: bool = False, own_dtypes: bool = False, tags: frozenset[str] = frozenset(),
          ref: Callable[[np.ndarray], np.ndarray] | None = None, hlo: str = "") -> None:
    def build(attrs: dict, x: Any) -> Any:
        return fn(guard(guard_kind, x))
    _reg(OpDef(name, "elementwise", dtypes, same(1), build, guard_kind, discrete, own_dtypes, tags,
               Elementwise(ref, (guard_kind,)) if ref is not None else None, stablehlo=_hlo(hlo)))


def binary(name: str, fn: Callable[[Any, Any], Any], dtypes: tuple[str, ...],
           lhs_guard: str | None = None, rhs_guard: str | None = None, discrete: bool = False,
           own_dtypes: bool = False, int_rhs: Callable[[Any], Any] | None = None,
           tags: frozenset[str] = frozenset(),
           ref: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None, hlo: str = "") -> None:
    def build(attrs: dict, x: Any, y: Any) -> Any:
        if int_rhs is not None and not jnp.issubdtype(y.dtype, jnp.floating):
            y = int_rhs(y)
        return fn(guard(lhs_guard, x), guard(rhs_guard, y))
    column = Elementwise(ref, (lhs_guard, rhs_guard), int_rhs is not None) if ref is not None else None
    _reg(OpDef(name, "elementwise", dtypes, same(2), build, lhs_guard or rhs_guard, discrete,
               own_dtypes, tags, column, stablehlo=_hlo(hlo)))


# logistic has no entry: jax lowers it to exp, add and divide.
_APPROX_HLO = {"exp": "exponential", "log": "log", "log1p": "log_plus_one",
               "expm1": "exponential_minus_one", "tanh": "tanh",
               "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "cbrt", "sin": "sine", "cos": "cosine",
               "tan": "tan", "erf": "chlo.erf", "erf_inv": "chlo.erf_inv", "lgamma": "chlo.lgamma",
               "digamma": "chlo.digamma", "atanh": "chlo.atanh", "sinh": "chlo.sinh"}
for _name, _fn, _g, _ref in [
    ("exp", lax.exp, "bounded", np.exp), ("log", lax.log, "pos", np.log),
    ("log1p", lax.log1p, "pos", np.log1p), ("expm1", lax.expm1, "bounded", np.expm1),
    ("tanh", lax.tanh, None, np.tanh), ("logistic", lax.logistic, None, np_logistic),
    ("sqrt", lax.sqrt, "pos", np.sqrt), ("rsqrt", lax.rsqrt, "pos", lambda x: 1.0 / np.sqrt(x)),
    ("cbrt", lax.cbrt, None, np.cbrt), ("sin", lax.sin, "bounded", np.sin),
    ("cos", lax.cos, "bounded", np.cos), ("tan", lax.tan, "unit", np.tan),
    ("erf", lax.erf, None, scipy.special.erf), ("erf_inv", lax.erf_inv, "unit", scipy.special.erfinv),
    ("lgamma", lax.lgamma, "pos", scipy.special.gammaln),
    ("digamma", lax.digamma, "pos", lambda x: np_digamma(x)),
    ("atanh", lax.atanh, "unit", np.arctanh), ("sinh", lax.sinh, "bounded", np.sinh),
]:
    # Only sqrt is correctly rounded by IEEE 754; the others may err by an ulp ("approx").
    unary(_name, _fn, FLOATS, _g, tags=frozenset() if _name == "sqrt" else frozenset({"approx"}),
          ref=_ref, hlo=_APPROX_HLO.get(_name, ""))
EXACT, SELECTS, ROUNDED = frozenset({"exact"}), frozenset({"selects"}), frozenset({"rounded"})
for _name, _fn, _ref in [("floor", lax.floor, np.floor), ("ceil", lax.ceil, np.ceil),
                         ("sign", lax.sign, np_sign)]:
    unary(_name, _fn, FLOATS, discrete=True, tags=EXACT, ref=_ref, hlo=_name)
unary("round", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), FLOATS, discrete=True,
      tags=EXACT, ref=np.rint, hlo="round_nearest_even")
unary("round_away", lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), FLOATS,
      discrete=True, tags=EXACT, ref=np_round_away, hlo="round_nearest_afz")
unary("is_finite", lax.is_finite, FLOATS, discrete=True, tags=EXACT, ref=np.isfinite, hlo="is_finite")
unary("abs", lax.abs, FLOATS + SIGNED, tags=SELECTS, ref=np.abs, hlo="abs")
unary("neg", lax.neg, FLOATS + SIGNED, tags=SELECTS, ref=np.negative, hlo="negate")
unary("not", lax.bitwise_not, INTS + ("bool",), ref=np_not, hlo="not")
unary("population_count", lax.population_count, INTS, ref=np_popcount, hlo="popcnt")
unary("clz", lax.clz, INTS, ref=np_clz, hlo="count_leading_zeros")

for _name, _fn, _tags, _ref, _h in [
        ("add", lax.add, ROUNDED, np.add, "add"), ("sub", lax.sub, ROUNDED, np.subtract, "subtract"),
        ("mul", lax.mul, ROUNDED, np.multiply, "multiply"), ("max", lax.max, SELECTS, np_max, "maximum"),
        ("min", lax.min, SELECTS, np_min, "minimum")]:
    binary(_name, _fn, NUMERIC, tags=_tags, ref=_ref, hlo=_h)
binary("div", lax.div, NUMERIC, rhs_guard="pos", int_rhs=int_nonzero, ref=np_div, hlo="divide")
binary("rem", lax.rem, NUMERIC, rhs_guard="pos", discrete=True, int_rhs=int_nonzero, ref=np_rem, hlo="remainder")
binary("pow", lax.pow, FLOATS, lhs_guard="pos", rhs_guard="bounded", tags=frozenset({"approx"}),
       ref=np.power, hlo="power")
binary("atan2", lax.atan2, FLOATS, tags=frozenset({"approx"}), ref=np.arctan2, hlo="atan2")
binary("nextafter", lax.nextafter, ("f32", "f64"), own_dtypes=True, tags=EXACT, ref=np_nextafter, hlo="chlo.next_after")
for _name, _fn, _ref in [("and", lax.bitwise_and, np.bitwise_and), ("or", lax.bitwise_or, np.bitwise_or),
                         ("xor", lax.bitwise_xor, np.bitwise_xor)]:
    binary(_name, _fn, INTS + ("bool",), ref=_ref, hlo=_name)
for _name, _fn, _ref in [("shift_left", lax.shift_left, np_shift_left),
                         ("shift_right_logical", lax.shift_right_logical, np_shift_right_logical),
                         ("shift_right_arithmetic", lax.shift_right_arithmetic, np_shift_right_arithmetic)]:
    binary(_name, _fn, INTS, ref=_ref, hlo=_name)
COMPARES = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}
for _dir in ("eq", "ne", "lt", "le", "gt", "ge"):
    # numpy compares NaN as IEEE does (false, except ne), like lax.
    binary(f"compare_{_dir}", getattr(lax, _dir), NUMERIC, discrete=True, tags=EXACT, ref=COMPARES[_dir],
           hlo="compare")


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


def _np_clamp_entry(attrs: dict, x: np.ndarray) -> np.ndarray:
    lo, hi = attrs["lo"], attrs["hi"]
    if not np_is_float(x):
        lo, hi = math.floor(lo * 4), math.ceil(hi * 4)
        if x.dtype.kind == "u":
            lo, hi = abs(lo), abs(lo) + abs(hi)
    return np_clamp(np.asarray(lo, x.dtype), x, np.asarray(hi, x.dtype))


_reg(OpDef("clamp", "elementwise", NUMERIC, _plan_clamp, _build_clamp, tags=SELECTS,
           numpy=_np_clamp_entry,
           stablehlo=("stablehlo.clamp",)))


def _plan_select(ctx: Ctx, x: Val) -> Plan:
    return [ctx.operand(x.shape, "bool"), x, ctx.operand(x.shape, x.dtype)], {}


_reg(OpDef("select", "elementwise", ALL, _plan_select, lambda a, p, x, y: lax.select(p, x, y),
           tags=SELECTS, numpy=lambda a, p, x, y: np.where(p, x, y),
           stablehlo=("stablehlo.select",)))

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


def _np_select_compare(attrs: dict, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    pred = COMPARES[attrs["dir"]](x, y)
    return np.where(pred, y, x) if attrs["swap"] else np.where(pred, x, y)


_reg(OpDef("select_compare", "elementwise", NUMERIC, _plan_select_compare, _build_select_compare,
           discrete=True, tags=SELECTS, numpy=_np_select_compare,
           stablehlo=("stablehlo.compare", "stablehlo.select")))


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


def _np_select_extremum(attrs: dict, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    axis = attrs["axis"]
    kind, compare = ("max", np.greater_equal) if attrs["kind"] == "max" else ("min", np.less_equal)
    extremum = np.expand_dims(np_reduce(x, kind, (axis,)), axis)
    return np.where(compare(x, extremum), y, z)


_reg(OpDef("select_extremum", "elementwise", NUMERIC, _needs_rank(1, _plan_select_extremum),
           _build_select_extremum, discrete=True, tags=EXACT, numpy=_np_select_extremum,
           stablehlo=("stablehlo.compare", "stablehlo.select")))


# --- conversion ----------------------------------------------------------------------------

def _plan_convert(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dtype": str(ctx.rng.choice([d for d in ALL if d != x.dtype]))}


def _build_convert(attrs: dict, x: Any) -> Any:
    return lax.convert_element_type(x, _jdt(attrs["dtype"]))


_reg(OpDef("convert", "conversion", ALL, _plan_convert, _build_convert, discrete=True, tags=EXACT,
           numpy=lambda a, x: np_convert(x, a["dtype"]),
           stablehlo=("stablehlo.convert",)))

BITCAST_PAIRS = {"f32": ("s32", "u32"), "s32": ("f32", "u32"), "u32": ("f32", "s32"),
                 "s8": ("u8",), "u8": ("s8",), "f16": ("bf16",), "bf16": ("f16",)}


def _plan_bitcast(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dtype": str(ctx.rng.choice(BITCAST_PAIRS[x.dtype]))}


def _build_bitcast(attrs: dict, x: Any) -> Any:
    return lax.bitcast_convert_type(x, _jdt(attrs["dtype"]))


_reg(OpDef("bitcast_convert", "conversion", tuple(BITCAST_PAIRS), _plan_bitcast, _build_bitcast,
           discrete=True, own_dtypes=True, tags=EXACT, numpy=lambda a, x: np_bitcast(x, a["dtype"]),
           stablehlo=("stablehlo.bitcast_convert",)))


def _plan_reduce_precision(ctx: Ctx, x: Val) -> Plan:
    e, m = [(5, 10), (8, 7), (4, 3), (5, 2), (8, 23)][int(ctx.rng.integers(5))]
    return [x], {"exponent_bits": e, "mantissa_bits": m}


# Discrete: rounding to 2 or 3 mantissa bits turns a legal 1-ulp difference of its input
# (f16 rounding vs excess precision) into a whole quantization step, like `round` does.
_reg(OpDef("reduce_precision", "conversion", FLOATS, _plan_reduce_precision,
           lambda a, x: lax.reduce_precision(x, a["exponent_bits"], a["mantissa_bits"]),
           discrete=True, tags=EXACT,
           numpy=lambda a, x: np_reduce_precision(x, a["exponent_bits"], a["mantissa_bits"]).astype(x.dtype),
           stablehlo=("stablehlo.reduce_precision",)))


# --- reductions ----------------------------------------------------------------------------

def _plan_reduce(ctx: Ctx, x: Val) -> Plan:
    k = int(ctx.rng.integers(1, x.rank + 1))
    axes = sorted(int(a) for a in ctx.rng.choice(x.rank, size=k, replace=False))
    return [x], {"axes": axes}


for _name, _fn, _dt, _g, _kind in [
    ("reduce_sum", lax.reduce_sum, NUMERIC, None, "add"), ("reduce_max", lax.reduce_max, NUMERIC, None, "max"),
    ("reduce_min", lax.reduce_min, NUMERIC, None, "min"),
    ("reduce_prod", lax.reduce_prod, NUMERIC, "near1", "mul"),
    ("reduce_and", lax.reduce_and, ("bool",), None, "and"), ("reduce_or", lax.reduce_or, ("bool",), None, "or"),
]:
    _reg(OpDef(_name, "reduction", _dt, _needs_rank(1, _plan_reduce),
               (lambda fn, g: lambda a, x: fn(guard(g, x), tuple(a["axes"])))(_fn, _g), _g,
               tags=frozenset({"sums"}) if _name == "reduce_sum"
               else frozenset({"products"}) if _name == "reduce_prod"
               else SELECTS if _name in ("reduce_max", "reduce_min") else frozenset(),
               numpy=(lambda k, g: lambda a, x: np_reduce(np_guard(g, x), k, a["axes"]))(_kind, _g)))


def _plan_arg(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": _axis(ctx, x)}


# numpy's argmax and argmin, like lax's, take the first NaN, else the first extremum.
_reg(OpDef("argmax", "reduction", NUMERIC, _needs_rank(1, _plan_arg),
           lambda a, x: lax.argmax(x, a["axis"], jnp.int32), discrete=True, tags=EXACT,
           numpy=lambda a, x: np.argmax(x, a["axis"]).astype(np.int32),
           # A reduce whose body compares and selects: those ops make it discrete.
           stablehlo=("stablehlo.compare", "stablehlo.select")))
_reg(OpDef("argmin", "reduction", NUMERIC, _needs_rank(1, _plan_arg),
           lambda a, x: lax.argmin(x, a["axis"], jnp.int32), discrete=True, tags=EXACT,
           numpy=lambda a, x: np.argmin(x, a["axis"]).astype(np.int32),
           stablehlo=("stablehlo.compare", "stablehlo.select")))


def _plan_cumulative(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": _axis(ctx, x), "reverse": bool(ctx.rng.integers(2))}


def _np_cumulative(kind: str, guard_kind: str | None) -> Callable[..., np.ndarray]:
    def column(attrs: dict, x: np.ndarray) -> np.ndarray:
        x, axis = np_guard(guard_kind, x), attrs["axis"]
        flip = (lambda v: np.flip(v, axis)) if attrs["reverse"] else (lambda v: v)
        with np.errstate(over="ignore"):
            out = REDUCERS[kind].accumulate(flip(x), axis=axis, dtype=x.dtype)
        out = _lax_signed_zeros(out, flip(x), kind, lambda m: np.logical_or.accumulate(m, axis=axis))
        return flip(out)
    return column


for _name, _fn, _g, _kind in [("cumsum", lax.cumsum, None, "add"), ("cumprod", lax.cumprod, "near1", "mul"),
                              ("cummax", lax.cummax, None, "max"), ("cummin", lax.cummin, None, "min")]:
    _reg(OpDef(_name, "reduction", NUMERIC, _needs_rank(1, _plan_cumulative),
               (lambda fn, g: lambda a, x: fn(guard(g, x), a["axis"], a["reverse"]))(_fn, _g), _g,
               tags=frozenset({"sums"}) if _name == "cumsum"
               else frozenset({"products"}) if _name == "cumprod" else SELECTS,
               numpy=_np_cumulative(_kind, _g)))


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


def _np_reduce_window_entry(attrs: dict, x: np.ndarray) -> np.ndarray:
    kind = attrs["kind"]
    if kind == "add":
        init = 0
    elif np_is_float(x):
        init = -np.inf if kind == "max" else np.inf
    else:
        init = np.iinfo(x.dtype).min if kind == "max" else np.iinfo(x.dtype).max
    pads = same_pads(x.shape, attrs["window"], attrs["strides"], attrs["padding"])
    return np_reduce_window(x, np.asarray(init, x.dtype), kind, attrs["window"], attrs["strides"], pads)


_reg(OpDef("reduce_window", "reduction", NUMERIC, _needs_rank(1, _plan_reduce_window),
           _build_reduce_window, tags=frozenset({"sums"}) | SELECTS,  # by its kind
           numpy=_np_reduce_window_entry))


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
           tags=frozenset({"sums"}),
           numpy=lambda a, x, y: np_dot_general(x, y, a["lhs_contract"], a["rhs_contract"],
                                                a["lhs_batch"], a["rhs_batch"]),
           stablehlo=("stablehlo.dot_general",)))


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


def _np_conv_entry(attrs: dict, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    strides, lhs_d, rhs_d = attrs["strides"], attrs["lhs_dilation"], attrs["rhs_dilation"]
    if any(d > 1 for d in lhs_d):
        pads = [(0, 0)] * len(strides)
    else:
        span = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], rhs_d, strict=True)]
        pads = same_pads(x.shape[2:], span, strides, attrs["padding"])
    return np_conv(x, w, strides, pads, lhs_d, rhs_d)


_reg(OpDef("conv_general_dilated", "linalg", FLOATS, _plan_conv, _build_conv,
           tags=frozenset({"sums"}), numpy=_np_conv_entry,
           stablehlo=("stablehlo.convolution",)))


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
           tags=SELECTS, numpy=lambda a, x: np.reshape(x, a["shape"]),
           stablehlo=("stablehlo.reshape",)))


def _plan_transpose(ctx: Ctx, x: Val) -> Plan:
    if len(set(x.shape)) > 1 and ctx.rng.random() < 0.3:
        # Shape-preserving transposes (square matrices) are where a transpose mistaken for
        # a copy or layout change goes unnoticed by shape checks: draw them on purpose.
        x = ctx.operand((x.shape[0],) * x.rank, x.dtype)
    return [x], {"perm": [int(p) for p in ctx.rng.permutation(x.rank)]}


_reg(OpDef("transpose", "shape", ALL, _needs_rank(2, _plan_transpose),
           lambda a, x: lax.transpose(x, tuple(a["perm"])),
           tags=SELECTS, numpy=lambda a, x: np.transpose(x, a["perm"]),
           stablehlo=("stablehlo.transpose",)))


def _plan_broadcast(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank >= ctx.max_rank:
        return None
    pos = int(ctx.rng.integers(x.rank + 1))
    shape = list(x.shape)
    shape.insert(pos, ctx.dim())
    dims = [i for i in range(len(shape)) if i != pos]
    return [x], {"shape": shape, "dims": dims}


def np_broadcast_in_dim(x: np.ndarray, shape: Sequence[int], dims: Sequence[int]) -> np.ndarray:
    """lax.broadcast_in_dim: operand dimension i becomes result dimension dims[i]."""
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, expanded), tuple(shape))


_reg(OpDef("broadcast_in_dim", "shape", ALL, _plan_broadcast,
           lambda a, x: lax.broadcast_in_dim(x, tuple(a["shape"]), tuple(a["dims"])),
           tags=SELECTS, numpy=lambda a, x: np_broadcast_in_dim(x, a["shape"], a["dims"]),
           stablehlo=("stablehlo.broadcast_in_dim",)))


def _plan_squeeze(ctx: Ctx, x: Val) -> Plan | None:
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    return ([x], {"dims": ones}) if ones else None


_reg(OpDef("squeeze", "shape", ALL, _plan_squeeze, lambda a, x: lax.squeeze(x, tuple(a["dims"])),
           tags=SELECTS, numpy=lambda a, x: np.squeeze(x, tuple(a["dims"])),
           stablehlo=("stablehlo.reshape",)))


def _plan_expand(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank >= ctx.max_rank:
        return None
    return [x], {"dims": [int(ctx.rng.integers(x.rank + 1))]}


_reg(OpDef("expand_dims", "shape", ALL, _plan_expand,
           lambda a, x: lax.expand_dims(x, tuple(a["dims"])),
           tags=SELECTS, numpy=lambda a, x: np.expand_dims(x, tuple(a["dims"])),
           stablehlo=("stablehlo.broadcast_in_dim",)))


def _plan_rev(ctx: Ctx, x: Val) -> Plan:
    k = int(ctx.rng.integers(1, x.rank + 1))
    return [x], {"dims": sorted(int(d) for d in ctx.rng.choice(x.rank, size=k, replace=False))}


_reg(OpDef("rev", "shape", ALL, _needs_rank(1, _plan_rev), lambda a, x: lax.rev(x, tuple(a["dims"])),
           tags=SELECTS, numpy=lambda a, x: np.flip(x, tuple(a["dims"])),
           stablehlo=("stablehlo.reverse",)))


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


def _np_pad_entry(attrs: dict, x: np.ndarray) -> np.ndarray:
    value = attrs["value"]
    if x.dtype == np.bool_:
        value = bool(value)
    elif not np_is_float(x):
        value = int(abs(value))
    return np_pad(x, np.asarray(value, x.dtype), attrs["config"])


_reg(OpDef("pad", "shape", ALL, _plan_pad, _build_pad, tags=SELECTS, numpy=_np_pad_entry,
           stablehlo=("stablehlo.pad",)))


def _plan_concat(ctx: Ctx, x: Val) -> Plan:
    axis = _axis(ctx, x)
    others = []
    for _ in range(int(ctx.rng.integers(1, 3))):
        shape = list(x.shape)
        shape[axis] = ctx.dim()
        others.append(ctx.operand(tuple(shape), x.dtype))
    return [x, *others], {"axis": axis}


_reg(OpDef("concatenate", "shape", ALL, _needs_rank(1, _plan_concat),
           lambda a, *xs: lax.concatenate(xs, a["axis"]), tags=SELECTS,
           numpy=lambda a, *xs: np.concatenate(xs, a["axis"]),
           stablehlo=("stablehlo.concatenate",)))


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
           lambda a, x: lax.slice(x, a["start"], a["limit"], a["stride"]), tags=SELECTS,
           numpy=lambda a, x: x[tuple(slice(*t) for t in zip(a["start"], a["limit"], a["stride"], strict=True))],
           stablehlo=("stablehlo.slice",)))


def _index_operands(ctx: Ctx, n: int) -> list[Val]:
    return [ctx.operand((), "s32") for _ in range(n)]


def _wrap_negative(x: np.ndarray, idx: Sequence[Any]) -> list[int]:
    # jax, before the (clamping) StableHLO op: a negative start counts from the end, in
    # int32 arithmetic (INT_MIN + dim stays negative and is clamped to 0 afterwards).
    return [int(i) + d if int(i) < 0 else int(i) for i, d in zip(idx, x.shape, strict=True)]


def _plan_dynamic_slice(ctx: Ctx, x: Val) -> Plan:
    sizes = [int(ctx.rng.integers(1, d + 1)) for d in x.shape]
    return [x, *_index_operands(ctx, x.rank)], {"sizes": sizes}


_reg(OpDef("dynamic_slice", "indexing", ALL, _needs_rank(1, _plan_dynamic_slice),
           lambda a, x, *idx: lax.dynamic_slice(x, idx, a["sizes"]),
           tags=frozenset({"index"}) | SELECTS,
           numpy=lambda a, x, *idx: np_dynamic_slice(x, _wrap_negative(x, idx), a["sizes"]),
           stablehlo=("stablehlo.dynamic_slice",)))


def _plan_dus(ctx: Ctx, x: Val) -> Plan:
    update = ctx.operand(tuple(int(ctx.rng.integers(1, d + 1)) for d in x.shape), x.dtype)
    return [x, update, *_index_operands(ctx, x.rank)], {}


_reg(OpDef("dynamic_update_slice", "indexing", ALL, _needs_rank(1, _plan_dus),
           lambda a, x, u, *idx: lax.dynamic_update_slice(x, u, idx),
           tags=frozenset({"index"}) | SELECTS,
           numpy=lambda a, x, u, *idx: np_dynamic_update_slice(x, u, _wrap_negative(x, idx)),
           stablehlo=("stablehlo.dynamic_update_slice",)))


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


def _np_gather_entry(attrs: dict, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    # Rows of x: `clip` clamps each index into range, `fill` gives 0 for an index out of it.
    rows = idx[:, 0].astype(np.int64)
    out = x[np.clip(rows, 0, x.shape[0] - 1)]
    if attrs["mode"] == "fill":
        bad = (rows < 0) | (rows >= x.shape[0])
        out = np.where(bad.reshape(-1, *[1] * (x.ndim - 1)), np.zeros((), x.dtype), out)
    return out


_reg(OpDef("gather", "indexing", ALL, _needs_rank(1, _plan_gather), _build_gather,
           tags=frozenset({"index"}) | SELECTS, numpy=_np_gather_entry,
           stablehlo=("stablehlo.gather",)))


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


def _np_scatter_entry(attrs: dict, x: np.ndarray, u: np.ndarray) -> np.ndarray:
    out = x.copy()
    if attrs["kind"] == "add" and x.dtype != np.bool_:
        with np.errstate(over="ignore"):
            np.add.at(out, np.asarray(attrs["rows"]), u)
    else:
        out[np.asarray(attrs["rows"])] = u
    return out


_reg(OpDef("scatter", "indexing", ALL, _needs_rank(1, _plan_scatter), _build_scatter,
           tags=SELECTS,  # by its kind: replace selects, add does not
           numpy=_np_scatter_entry))


def _plan_iota(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dim": _axis(ctx, x)}


def _build_iota(attrs: dict, x: Any) -> Any:
    # iota of x's shape and dtype, combined with x so the op stays connected to the graph.
    it = lax.broadcasted_iota(x.dtype if x.dtype != jnp.bool_ else jnp.int32, x.shape, attrs["dim"])
    return lax.add(x, it) if x.dtype != jnp.bool_ else lax.ne(it, jnp.asarray(0, it.dtype))


def _np_iota_entry(attrs: dict, x: np.ndarray) -> np.ndarray:
    dt = x.dtype if x.dtype != np.bool_ else np.dtype(np.int32)
    it = np.broadcast_to(np.expand_dims(np.arange(x.shape[attrs["dim"]]),
                                        [d for d in range(x.ndim) if d != attrs["dim"]]), x.shape).astype(dt)
    with np.errstate(over="ignore"):
        return (x + it).astype(x.dtype) if x.dtype != np.bool_ else it != 0


_reg(OpDef("iota", "shape", ALL, _needs_rank(1, _plan_iota), _build_iota, tags=ROUNDED,
           numpy=_np_iota_entry))


def _plan_sort(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": _axis(ctx, x), "descending": bool(ctx.rng.integers(2))}


def _build_sort(attrs: dict, x: Any) -> Any:
    out = lax.sort(x, dimension=attrs["axis"], is_stable=True)
    return lax.rev(out, (attrs["axis"],)) if attrs["descending"] else out


def _np_sort_entry(attrs: dict, x: np.ndarray) -> np.ndarray:
    out = np_sort(x, attrs["axis"])
    return np.flip(out, attrs["axis"]) if attrs["descending"] else out


_reg(OpDef("sort", "sort", NUMERIC, _needs_rank(1, _plan_sort), _build_sort, tags=SELECTS,
           numpy=_np_sort_entry))


def _plan_top_k(ctx: Ctx, x: Val) -> Plan:
    return [x], {"k": int(ctx.rng.integers(1, x.shape[-1] + 1)), "output": int(ctx.rng.integers(2))}


_reg(OpDef("top_k", "sort", NUMERIC, _needs_rank(1, _plan_top_k),
           lambda a, x: lax.top_k(x, a["k"])[a["output"]], discrete=True, tags=SELECTS,
           numpy=lambda a, x: np_top_k(x, a["k"])[a["output"]],
           # jax emits chlo.top_k; a module lowered further holds the sort it becomes.
           stablehlo=("chlo.top_k", "stablehlo.sort")))


# --- control flow --------------------------------------------------------------------------

# Bodies of control flow are small, bounded elementwise maps, so loops cannot blow up.
BODIES: dict[str, Callable[[Any], Any]] = {
    "tanh": lax.tanh, "sin": lax.sin, "halve": lambda v: lax.mul(v, jnp.asarray(0.5, v.dtype)),
    "neg": lax.neg, "abs": lax.abs, "logistic": lax.logistic, "square": lambda v: lax.mul(v, v),
}
INT_BODIES = ("neg", "abs", "square")
NP_BODIES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh, "sin": np.sin, "halve": lambda v: v * v.dtype.type(0.5), "neg": np.negative,
    "abs": np.abs, "logistic": np_logistic, "square": lambda v: v * v,
}


def _body(name: str, v: Any) -> Any:
    if v.dtype == jnp.bool_:
        return lax.bitwise_not(v)
    if not jnp.issubdtype(v.dtype, jnp.floating) and name not in INT_BODIES:
        name = "neg" if jnp.issubdtype(v.dtype, jnp.signedinteger) else "square"
    if name == "neg" and jnp.issubdtype(v.dtype, jnp.unsignedinteger):
        name = "square"
    return BODIES[name](v)


def _np_body(name: str, v: np.ndarray) -> np.ndarray:
    """`_body` in numpy."""
    if v.dtype == np.bool_:
        return np.logical_not(v)
    if not np_is_float(v) and name not in INT_BODIES:
        name = "neg" if v.dtype.kind == "i" else "square"
    if name == "neg" and v.dtype.kind == "u":
        name = "square"
    with np.errstate(all="ignore"):
        return NP_BODIES[name](v).astype(v.dtype)


def _plan_bodies(ctx: Ctx, k: int) -> list[str]:
    return [str(b) for b in ctx.rng.choice(list(BODIES), size=k)]


def _plan_cond(ctx: Ctx, x: Val) -> Plan:
    return [ctx.operand((), "bool"), x], {"branches": _plan_bodies(ctx, 2)}


# lax.cond(p, true_fn, false_fn): the first branch where p holds.
_reg(OpDef("cond", "control", ALL, _plan_cond,
           lambda a, p, x: lax.cond(p, lambda v: _body(a["branches"][0], v),
                                    lambda v: _body(a["branches"][1], v), x),
           numpy=lambda a, p, x: _np_body(a["branches"][0 if p else 1], x)))


def _plan_loop(ctx: Ctx, x: Val) -> Plan:
    return [x], {"body": _plan_bodies(ctx, 1)[0], "trips": int(ctx.rng.integers(1, 5))}


def _build_while(attrs: dict, x: Any) -> Any:
    def body(c: Any) -> Any:
        return c[0] + 1, _body(attrs["body"], c[1])
    return lax.while_loop(lambda c: c[0] < attrs["trips"], body, (jnp.int32(0), x))[1]


def _np_loop(attrs: dict, x: np.ndarray) -> np.ndarray:
    for _ in range(attrs["trips"]):
        x = _np_body(attrs["body"], x)
    return x


_reg(OpDef("while_loop", "control", ALL, _plan_loop, _build_while, numpy=_np_loop))
_reg(OpDef("fori_loop", "control", ALL, _plan_loop,
           lambda a, x: lax.fori_loop(0, a["trips"], lambda i, v: _body(a["body"], v), x),
           numpy=_np_loop))


def _build_scan(attrs: dict, x: Any) -> Any:
    def step(carry: Any, xt: Any) -> tuple[Any, Any]:
        new = _body(attrs["body"], carry)
        new = lax.bitwise_xor(new, xt) if x.dtype == jnp.bool_ else lax.add(new, xt)
        return new, new
    return lax.scan(step, x[0], x)[1]


def _np_scan(attrs: dict, x: np.ndarray) -> np.ndarray:
    carry, out = x[0], []
    for xt in x:
        new = _np_body(attrs["body"], carry)
        with np.errstate(over="ignore"):
            carry = np.logical_xor(new, xt) if x.dtype == np.bool_ else (new + xt).astype(x.dtype)
        out.append(carry)
    return np.stack(out)


_reg(OpDef("scan", "control", ALL, _needs_rank(1, _plan_loop), _build_scan, numpy=_np_scan))


# --- program shapes from real bugs (issue 13): each entry has a SHAPE_FAMILIES family ---

# Index operands of every integer width: drawn as s32 inputs (so special values reach
# them: INT_MIN, 1000, negatives) and converted in the program, which wraps them into the
# narrow type; s64 needs jax_enable_x64 (the workers set it), else jax makes it s32.
INDEX_DTYPES = ("s8", "u8", "s16", "u32", "s64")
NP_INDEX = {"s8": np.int8, "u8": np.uint8, "s16": np.int16, "u32": np.uint32, "s64": np.int64}
# Largest indexed dimension: every valid start fits the narrowest type (s8), so what an
# index means never depends on wrapping inside XLA's own clamp arithmetic.
MAX_INDEXED_DIM = 127


def _index_dtype(ctx: Ctx) -> str:
    return str(ctx.rng.choice(INDEX_DTYPES))


def _as_index(attrs: dict, i: Any) -> Any:
    return lax.convert_element_type(i, jnp.dtype(NP_INDEX[attrs["index_dtype"]]))


def _np_as_index(attrs: dict, i: Any) -> np.ndarray:
    # C-style wrap, as XLA's integer convert.
    return np.asarray(i).astype(NP_INDEX[attrs["index_dtype"]]).astype(np.int64)


def _fits_index(x: Val) -> bool:
    return x.rank >= 1 and max(x.shape) <= MAX_INDEXED_DIM


def _plan_dynamic_slice_idx(ctx: Ctx, x: Val) -> Plan | None:
    if not _fits_index(x):
        return None
    sizes = [int(ctx.rng.integers(1, d + 1)) for d in x.shape]
    return [x, *_index_operands(ctx, x.rank)], {"sizes": sizes, "index_dtype": _index_dtype(ctx)}


# No negative-index wrap (allow_negative_indices=False): the starts reach XLA as they are,
# and every out-of-range one (negative, or past dim - size) must clamp.
_reg(OpDef("dynamic_slice_idx", "indexing", ALL, _plan_dynamic_slice_idx,
           lambda a, x, *idx: lax.dynamic_slice(x, [_as_index(a, i) for i in idx], a["sizes"],
                                                allow_negative_indices=False),
           tags=frozenset({"index"}) | SELECTS, family="indices",
           numpy=lambda a, x, *idx: np_dynamic_slice(x, [_np_as_index(a, i) for i in idx], a["sizes"])))


def _plan_dus_idx(ctx: Ctx, x: Val) -> Plan | None:
    if not _fits_index(x):
        return None
    update = ctx.operand(tuple(int(ctx.rng.integers(1, d + 1)) for d in x.shape), x.dtype)
    return [x, update, *_index_operands(ctx, x.rank)], {"index_dtype": _index_dtype(ctx)}


_reg(OpDef("dynamic_update_slice_idx", "indexing", ALL, _plan_dus_idx,
           lambda a, x, u, *idx: lax.dynamic_update_slice(x, u, [_as_index(a, i) for i in idx],
                                                          allow_negative_indices=False),
           tags=frozenset({"index"}) | SELECTS, family="indices",
           numpy=lambda a, x, u, *idx: np_dynamic_update_slice(x, u, [_np_as_index(a, i) for i in idx])))


def _plan_gather_idx(ctx: Ctx, x: Val) -> Plan | None:
    if not _fits_index(x):
        return None
    return [x, ctx.operand((int(ctx.rng.integers(1, 6)), 1), "s32")], {"index_dtype": _index_dtype(ctx)}


def _build_gather_idx(attrs: dict, x: Any, idx: Any) -> Any:
    # PROMISE_IN_BOUNDS: jax adds no clamp of its own, so XLA's gather clamps each start.
    dn, _ = _row_dnums(x.ndim)
    return lax.gather(x, _as_index(attrs, idx), dn, (1, *x.shape[1:]),
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


_reg(OpDef("gather_idx", "indexing", ALL, _plan_gather_idx, _build_gather_idx,
           tags=frozenset({"index"}) | SELECTS, family="indices",
           numpy=lambda a, x, idx: x[np.clip(_np_as_index(a, idx)[:, 0], 0, x.shape[0] - 1)]))


def _plan_scatter_add_idx(ctx: Ctx, x: Val) -> Plan | None:
    if not _fits_index(x):
        return None
    n = int(ctx.rng.integers(1, 6))
    return [x, ctx.operand((n, 1), "s32"), ctx.operand((n, *x.shape[1:]), x.dtype)], {
        "index_dtype": _index_dtype(ctx)}


def _build_scatter_add_idx(attrs: dict, x: Any, idx: Any, u: Any) -> Any:
    # Rows may repeat (accumulated) or fall outside x (dropped: FILL_OR_DROP).
    dn = lax.ScatterDimensionNumbers(update_window_dims=tuple(range(1, x.ndim)),
                                     inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    return lax.scatter_add(x, _as_index(attrs, idx), u, dn, mode=lax.GatherScatterMode.FILL_OR_DROP)


def _np_scatter_add_idx(attrs: dict, x: np.ndarray, idx: np.ndarray, u: np.ndarray) -> np.ndarray:
    rows = _np_as_index(attrs, idx)[:, 0]
    keep = (rows >= 0) & (rows < x.shape[0])
    out = x.copy()
    with np.errstate(over="ignore"):
        np.add.at(out, rows[keep], u[keep])
    return out


_reg(OpDef("scatter_add_idx", "indexing", NUMERIC, _plan_scatter_add_idx, _build_scatter_add_idx,
           tags=frozenset({"index", "sums"}), family="indices", numpy=_np_scatter_add_idx))


# Loops that carry a buffer updated in place: the aliasing, copy insertion and
# loop-invariant code motion that real bugs hit in KV caches and optimizer states.

def _plan_carried(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank == 0:
        return None
    return [x], {"loop": str(ctx.rng.choice(["scan", "fori"])), "body": _plan_bodies(ctx, 1)[0],
                 "trips": int(ctx.rng.integers(1, 5)), "step": int(ctx.rng.integers(0, 3)),
                 "offset": int(ctx.rng.integers(0, 2))}


def _run_loop(attrs: dict, step: Callable[[Any, Any], Any], init: Any) -> Any:
    """`step(t, carry)` for t in range(trips), as a fori_loop or a scan."""
    if attrs["loop"] == "fori":
        return lax.fori_loop(0, attrs["trips"], step, init)
    return lax.scan(lambda c, t: (step(t, c), None), init, jnp.arange(attrs["trips"], dtype=jnp.int32))[0]


def _rows(attrs: dict, n: int) -> list[tuple[int, int]]:
    """(read row, write row) per trip: the step-th row each trip, written `offset` later."""
    return [((t * attrs["step"]) % n, (t * attrs["step"] + attrs["offset"]) % n)
            for t in range(attrs["trips"])]


def _build_loop_dus(attrs: dict, x: Any) -> Any:
    n = x.shape[0]

    def step(t: Any, acc: Any) -> Any:
        read = lax.rem(t * attrs["step"], n)
        write = lax.rem(t * attrs["step"] + attrs["offset"], n)
        row = lax.dynamic_index_in_dim(acc, read, 0, keepdims=True)
        return lax.dynamic_update_index_in_dim(acc, _body(attrs["body"], row), write, 0)
    return _run_loop(attrs, step, x)


def _np_loop_dus(attrs: dict, x: np.ndarray) -> np.ndarray:
    acc = x.copy()
    for read, write in _rows(attrs, x.shape[0]):
        acc[write] = _np_body(attrs["body"], acc[read])
    return acc


_reg(OpDef("loop_dus", "control", ALL, _plan_carried, _build_loop_dus, family="loops",
           numpy=_np_loop_dus))


def _plan_loop_scatter_add(ctx: Ctx, x: Val) -> Plan | None:
    planned = _plan_carried(ctx, x)
    return None if planned is None else ([x, ctx.operand(x.shape, x.dtype)], planned[1])


def _build_loop_scatter_add(attrs: dict, x: Any, u: Any) -> Any:
    n = x.shape[0]
    dn = lax.ScatterDimensionNumbers(update_window_dims=tuple(range(1, x.ndim)),
                                     inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))

    def step(t: Any, acc: Any) -> Any:
        row = lax.rem(t * attrs["step"] + attrs["offset"], n)
        update = _body(attrs["body"], lax.dynamic_index_in_dim(u, lax.rem(t, n), 0, keepdims=True))
        return lax.scatter_add(acc, lax.reshape(row, (1, 1)), update, dn)
    return _run_loop(attrs, step, x)


def _np_loop_scatter_add(attrs: dict, x: np.ndarray, u: np.ndarray) -> np.ndarray:
    acc = x.copy()
    for t, (_, write) in enumerate(_rows(attrs, x.shape[0])):
        with np.errstate(over="ignore"):
            acc[write] = (acc[write] + _np_body(attrs["body"], u[t % x.shape[0]])).astype(x.dtype)
    return acc


_reg(OpDef("loop_scatter_add", "control", NUMERIC, _plan_loop_scatter_add, _build_loop_scatter_add,
           tags=frozenset({"sums"}), family="loops", numpy=_np_loop_scatter_add))


def _plan_loop_shift(ctx: Ctx, x: Val) -> Plan | None:
    axes = [d for d, n in enumerate(x.shape) if n >= 2]
    planned = _plan_carried(ctx, x)
    if not axes or planned is None:
        return None
    return [x], {**planned[1], "axis": int(ctx.rng.choice(axes))}


def _shift_index(axis: int, s: slice | int) -> tuple[Any, ...]:
    return (slice(None),) * axis + (s,)


def _build_loop_shift(attrs: dict, x: Any) -> Any:
    """Each trip: x.at[1:].set(x[:-1]) along the axis (a shift register), then a new head."""
    head, tail, rest = (_shift_index(attrs["axis"], s) for s in (slice(0, 1), slice(1, None), slice(None, -1)))

    def step(t: Any, v: Any) -> Any:
        first = v[head]
        v = v.at[tail].set(v[rest])
        return v.at[head].set(_body(attrs["body"], first))
    return _run_loop(attrs, step, x)


def _np_loop_shift(attrs: dict, x: np.ndarray) -> np.ndarray:
    head, tail, rest = (_shift_index(attrs["axis"], s) for s in (slice(0, 1), slice(1, None), slice(None, -1)))
    v = x.copy()
    for _ in range(attrs["trips"]):
        first = v[head].copy()
        v[tail] = v[rest].copy()
        v[head] = _np_body(attrs["body"], first)
    return v


_reg(OpDef("loop_shift", "control", ALL, _plan_loop_shift, _build_loop_shift, family="loops",
           numpy=_np_loop_shift))


# Mixed precision: bf16/f16 operands accumulated in f32 (preferred_element_type).
LOW_PRECISION = ("bf16", "f16")


def _f32_acc(x: Any) -> Any:
    """f32 accumulation for bf16/f16 operands; None (the operands' own type) for the
    float64 reference, whose operands are promoted and which jax would refuse to narrow."""
    return jnp.float32 if jnp.dtype(x.dtype).itemsize < 4 else None


def _np_f32_acc(out: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`_f32_acc` for the numpy column: f32 where build accumulates in f32."""
    return out.astype(np.float32) if x.dtype.itemsize < 4 else out


def _build_dot_acc(attrs: dict, x: Any, y: Any) -> Any:
    dn = ((tuple(attrs["lhs_contract"]), tuple(attrs["rhs_contract"])),
          (tuple(attrs["lhs_batch"]), tuple(attrs["rhs_batch"])))
    return lax.dot_general(x, y, dn, preferred_element_type=_f32_acc(x))


_reg(OpDef("dot_general_acc", "linalg", LOW_PRECISION, _needs_rank(1, _plan_dot), _build_dot_acc,
           tags=frozenset({"sums"}), family="mixed_precision",
           numpy=lambda a, x, y: _np_f32_acc(np_dot_general(x, y, a["lhs_contract"], a["rhs_contract"],
                                                            a["lhs_batch"], a["rhs_batch"]), x)))


def _build_conv_acc(attrs: dict, x: Any, w: Any) -> Any:
    padding = attrs["padding"]
    if any(d > 1 for d in attrs["lhs_dilation"]):
        padding = [(0, 0)] * len(attrs["strides"])
    return lax.conv_general_dilated(x, w, tuple(attrs["strides"]), padding,
                                    tuple(attrs["lhs_dilation"]), tuple(attrs["rhs_dilation"]),
                                    preferred_element_type=_f32_acc(x))


_reg(OpDef("conv_acc", "linalg", LOW_PRECISION, _plan_conv, _build_conv_acc, tags=frozenset({"sums"}),
           family="mixed_precision", numpy=lambda a, x, w: _np_f32_acc(_np_conv_entry(a, x, w), x)))


def _plan_batched_matvec(ctx: Ctx, x: Val) -> Plan:
    if x.rank != 3:
        x = ctx.operand((ctx.dim(), ctx.dim(), ctx.dim()), x.dtype)
    return [x, ctx.operand((x.shape[0], x.shape[2]), x.dtype)], {
        "reduce": str(ctx.rng.choice(["sum", "max"])), "axis": int(ctx.rng.integers(2)),
        "f32_acc": x.dtype in LOW_PRECISION and bool(ctx.rng.integers(2))}


def _build_batched_matvec(attrs: dict, m: Any, v: Any) -> Any:
    """vmap(m_b @ v_b) over the batch, then a reduction of the products."""
    acc = _f32_acc(m) if attrs["f32_acc"] else None
    y = jax.vmap(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                              preferred_element_type=acc))(m, v)
    reduce = lax.reduce_sum if attrs["reduce"] == "sum" else lax.reduce_max
    return reduce(y, (attrs["axis"],))


def _np_batched_matvec(attrs: dict, m: np.ndarray, v: np.ndarray) -> np.ndarray:
    y = np.einsum("bnk,bk->bn", m, v)
    out = np_reduce(y, "add" if attrs["reduce"] == "sum" else "max", (attrs["axis"],))
    return _np_f32_acc(out, m) if attrs["f32_acc"] else out


_reg(OpDef("batched_matvec", "linalg", FLOATS, _plan_batched_matvec, _build_batched_matvec,
           tags=frozenset({"sums"}), family="mixed_precision", numpy=_np_batched_matvec))


# Composite templates (runners/templates.py). Each holds transcendental functions and
# sums, so it is tagged as both: the noise model scales its rounding by its terms.
COMPOSITE = frozenset({"approx", "sums"})


def _plan_softmax(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": _axis(ctx, x)}


_reg(OpDef("softmax", "composite", FLOATS, _needs_rank(1, _plan_softmax),
           lambda a, x: templates.softmax(x, a["axis"]), tags=COMPOSITE, family="templates",
           numpy=lambda a, x: templates.np_softmax(x, a["axis"])))


def _plan_layer_norm(ctx: Ctx, x: Val) -> Plan:
    d = x.shape[-1]
    return [x, ctx.operand((d,), x.dtype), ctx.operand((d,), x.dtype)], {}


_reg(OpDef("layer_norm", "composite", FLOATS, _needs_rank(1, _plan_layer_norm),
           lambda a, x, g, b: templates.layer_norm(x, g, b), tags=COMPOSITE, family="templates",
           numpy=lambda a, x, g, b: templates.np_layer_norm(x, g, b)))


def _plan_attention(ctx: Ctx, q: Val) -> Plan:
    if q.rank not in (2, 3):
        q = ctx.operand((*(ctx.dim() for _ in range(int(ctx.rng.integers(2, 4)))),), q.dtype)
    *batch, s, d = q.shape
    t = ctx.dim()
    k = ctx.operand((*batch, t, d), q.dtype)
    v = ctx.operand((*batch, t, ctx.dim()), q.dtype)
    return [q, k, v, ctx.operand((s, t), "bool")], {
        "low": float(ml_dtypes.finfo(NP_DTYPES[q.dtype]).min)}


def _build_attention(attrs: dict, q: Any, k: Any, v: Any, mask: Any) -> Any:
    return templates.attention(q, k, v, mask, attrs["low"])


_reg(OpDef("attention", "composite", FLOATS, _plan_attention, _build_attention, tags=COMPOSITE,
           family="templates",
           numpy=lambda a, q, k, v, mask: templates.np_attention(q, k, v, mask, a["low"])))


def _plan_mlp_block(ctx: Ctx, x: Val) -> Plan:
    d, h = x.shape[-1], ctx.dim()
    return [x, ctx.operand((d, h), x.dtype), ctx.operand((h,), x.dtype), ctx.operand((h, d), x.dtype),
            ctx.operand((d,), x.dtype)], {"act": str(ctx.rng.choice(templates.ACTIVATIONS))}


_reg(OpDef("mlp_block", "composite", FLOATS, _needs_rank(1, _plan_mlp_block),
           lambda a, *xs: templates.mlp_block(*xs, a["act"]), tags=COMPOSITE, family="templates",
           numpy=lambda a, *xs: templates.np_mlp_block(*xs, a["act"])))


def _plan_topk_routing(ctx: Ctx, x: Val) -> Plan:
    return [x], {"k": int(ctx.rng.integers(1, min(4, x.shape[-1]) + 1))}


# Discrete: top-k picks experts by comparing probabilities, which legal rounding can flip.
_reg(OpDef("topk_routing", "composite", FLOATS, _needs_rank(1, _plan_topk_routing),
           lambda a, x: templates.topk_routing(x, a["k"]), discrete=True, tags=COMPOSITE,
           family="templates",
           numpy=lambda a, x: templates.np_topk_routing(x, a["k"], total_order_key)))


def ops_for(dtype: str, allow: Sequence[str] = (), exclude: Sequence[str] = (),
            families: Sequence[str] = ()) -> list[OpDef]:
    """The ops that accept `dtype` as their primary operand, filtered by name; an op of a
    shape family only where `families` holds it or `allow` names it."""
    return [op for op in OPS.values()
            if dtype in op.dtypes and (not allow or op.name in allow) and op.name not in exclude
            and (op.family is None or op.family in families or op.name in allow)]


# StableHLO ops that no entry lowers to alone but every module may hold, with their
# bitwise tags: literals, index ramps and barriers (they pass their operands through).
STABLEHLO_ONLY_TAGS: dict[str, frozenset[str]] = {
    "stablehlo.constant": EXACT,
    "stablehlo.iota": EXACT,
    "stablehlo.optimization_barrier": SELECTS,
}
