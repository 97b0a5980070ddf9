"""The numpy library of the op table: float64 numpy with lax semantics, which the entries'
numpy forms and the numpy references (references/npref.py, own_precision.py) compute with.
It imports no jax and shares no code with XLA, so a bug XLA has in every configuration
(and so in every XLA-based reference) still shows against it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

import ml_dtypes
import numpy as np
import scipy.special

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.ops.spec import Attrs

# `OpDef.numpy(attrs, *args)` computes what the entry's builder computes, in numpy: float
# operands arrive as float64 (the float64 reference promotes them) except for `own_dtypes`
# ops, and the result has the builder's dtype. Where numpy's own semantics differ from
# lax's, the kernels below spell lax's out.

BF16 = np.dtype(ml_dtypes.bfloat16)
# np.finfo for every float here, bf16 included; ml_dtypes leaves its signature unannotated.
float_info: Callable[[np.dtype[Any]], np.finfo[Any]] = ml_dtypes.finfo


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
    tiny = float_info(x.dtype).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros((), x.dtype), x), x).astype(x.dtype)


def _unsigned(dt: np.dtype) -> np.dtype:
    return np.dtype(f"u{dt.itemsize}")


def _signed(dt: np.dtype) -> np.dtype:
    return np.dtype(f"i{dt.itemsize}")


def np_guard(kind: str | None, x: np.ndarray) -> np.ndarray:
    """Map a float value into the domain an op needs, which keeps float64 references finite
    on random inputs (lax_builders.guard is the same map in lax ops)."""
    if kind is None or not np_is_float(x):
        return x
    guarded: np.ndarray
    if kind == "pos":  # log, sqrt, lgamma: [0.5, inf)
        guarded = np.abs(x) + x.dtype.type(0.5)
    elif kind == "unit":  # erf_inv, tan: (-0.9, 0.9)
        guarded = np.tanh(x) * x.dtype.type(0.9)
    elif kind == "bounded":  # exp, expm1, pow exponent: [-8, 8]
        guarded = np_clamp(x.dtype.type(-8.0), x, x.dtype.type(8.0))
    elif kind == "near1":  # products: [0.8, 1.2]
        guarded = x.dtype.type(1.0) + np.tanh(x) * x.dtype.type(0.2)
    else:
        raise ValueError(f"unknown guard {kind!r}")
    return guarded


def np_int_nonzero(x: np.ndarray) -> np.ndarray:
    """lax_builders.int_nonzero in numpy (abs wraps at INT_MIN, rem truncates, as in lax)."""
    nonzero: np.ndarray
    if x.dtype.kind == "i":
        nonzero = (np.fmod(np.abs(x), x.dtype.type(7)) + x.dtype.type(1)).astype(x.dtype)
    else:
        nonzero = np.maximum(x, x.dtype.type(1))
    return nonzero


def np_sign(x: np.ndarray) -> np.ndarray:
    # lax.sign keeps the zero's sign and NaN.
    if not np_is_float(x):
        sign: np.ndarray = np.sign(x)
        return sign
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, x)).astype(x.dtype)


def np_round_away(x: np.ndarray) -> np.ndarray:
    # Half away from zero; x - trunc(x) is exact, unlike floor(x + 0.5).
    t = np.trunc(x)
    r = np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)
    rounded: np.ndarray = np.copysign(r, x).astype(x.dtype)
    return rounded


def np_logistic(x: np.ndarray) -> np.ndarray:
    logistic: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return logistic


def np_popcount(x: np.ndarray) -> np.ndarray:
    # numpy counts the bits of |x| for signed types; lax counts the two's complement bits.
    count: np.ndarray = np.bitwise_count(x.view(_unsigned(x.dtype))).astype(x.dtype)
    return count


def np_clz(x: np.ndarray) -> np.ndarray:
    u = x.view(_unsigned(x.dtype)).astype(np.float64)  # exact: at most 32 bits
    bit_length = np.where(u == 0, 0, np.frexp(u)[1])
    return (x.dtype.itemsize * 8 - bit_length).astype(x.dtype)


def np_not(x: np.ndarray) -> np.ndarray:
    inverted: np.ndarray = np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)
    return inverted


def np_max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.max: NaN-propagating (as np.maximum), and +0 above -0 in either order (numpy
    returns its first operand for equal zeros)."""
    out: np.ndarray = np.maximum(x, y)
    if np_is_float(out):
        out = np.where((x == 0) & (y == 0), x + y, out)  # -0 only if both are -0
    return out


def np_min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.min: NaN-propagating, -0 below +0 in either order."""
    out: np.ndarray = np.minimum(x, y)
    if np_is_float(out):
        out = np.where((x == 0) & (y == 0), -(-x - y), out)  # +0 only if both are +0
    return out


def np_clamp(lo: Any, x: np.ndarray, hi: Any) -> np.ndarray:
    """lax.clamp: min(max(x, lo), hi), NaN-propagating."""
    clamped: np.ndarray = np.minimum(np.maximum(x, lo), hi).astype(np.asarray(x).dtype)
    return clamped


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
        quotient: np.ndarray = (x / y).astype(x.dtype)
        return quotient
    q, _, zero, overflow = _int_division(x, y)
    q = np.where(zero, -1, np.where(overflow, np.iinfo(x.dtype).min, q))
    return q.astype(x.dtype) if x.dtype.kind == "i" else q.astype(np.int64).astype(_signed(x.dtype)).view(x.dtype)


def np_rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.rem: the sign of the dividend (C fmod); x % 0 = x and INT_MIN % -1 = 0."""
    if np_is_float(x):
        remainder: np.ndarray = np.fmod(x, y)
        return remainder
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
    after: np.ndarray = np.nextafter(x, y)
    return after


def np_convert(x: np.ndarray, dtype: str | np.dtype) -> np.ndarray:
    """lax.convert_element_type: floats round to nearest even (ml_dtypes for bf16), a
    float to an integer truncates, saturates at the integer's range and maps NaN to 0;
    anything to bool is `!= 0` (NaN is true); integers wrap. `dtype`: a program dtype's
    name, or a numpy dtype (the wider index integers a module can hold, s16 to u64)."""
    dt = NP_DTYPES[dtype] if isinstance(dtype, str) else np.dtype(dtype)
    x = np.asarray(x)
    if dt == np.bool_:
        truth: np.ndarray = x != 0
        return truth
    if np_is_float(x) and dt.kind in "iu":
        info = np.iinfo(dt)
        v = np.trunc(x.astype(np.float64))
        # Compared in float64, where 2**(bits-1) (2**bits unsigned) is exact although the
        # integer's max is not for 64 bits: clipping to float(max) would round up to 2**63
        # and overflow the cast.
        high, low = v >= float(info.max) + 1, v < float(info.min)
        safe = np.where(high | low | np.isnan(v), 0, v).astype(dt)
        return np.where(high, dt.type(info.max), np.where(low, dt.type(info.min), safe))
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
    info = float_info(x.dtype)
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

def np_broadcast_in_dim(x: np.ndarray, shape: Sequence[int], dims: Sequence[int]) -> np.ndarray:
    """lax.broadcast_in_dim: operand dimension i becomes result dimension dims[i]."""
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, expanded), tuple(shape))


# numpy compares NaN as IEEE does (false, except ne), like lax.
COMPARES = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}


REDUCERS: dict[str, np.ufunc] = {"add": np.add, "max": np.maximum, "min": np.minimum,
                                 "mul": np.multiply, "and": np.logical_and, "or": np.logical_or}


def lax_signed_zeros(out: np.ndarray, x: np.ndarray, kind: str,
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
    return lax_signed_zeros(out, x, kind, lambda m: np.logical_or.reduce(m, axis=tuple(axes)))


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
    dilated: tuple[EllipsisType | slice, ...] = (
        Ellipsis, *(slice(None, None, d) for d in window_dilation))
    views = views[dilated]
    axes = tuple(range(x.ndim, 2 * x.ndim))
    out = np_reduce(np.ascontiguousarray(views), kind, axes)
    with_init: np.ndarray = REDUCERS[kind](out, np.asarray(init, x.dtype)).astype(x.dtype)
    return with_init


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
    out: np.ndarray = np.matmul(lhs, rhs)
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
    """The numpy form of an elementwise entry, and where its operand guards are declared
    (lax_builders applies the same `guards` and `int_rhs` before the lax op). `kernel` is
    the op alone, on operands already in its domain: what the StableHLO evaluator applies;
    calling the form applies the guards (and the nonzero integer divisor) first."""

    kernel: Callable[..., np.ndarray]
    guards: tuple[str | None, ...] = (None, None)
    int_rhs: bool = False

    def __call__(self, attrs: Attrs, *args: np.ndarray) -> np.ndarray:
        xs = [np_guard(g, x) for g, x in zip(self.guards, args, strict=False)]
        if self.int_rhs and not np_is_float(xs[1]):
            xs[1] = np_int_nonzero(xs[1])
        with np.errstate(all="ignore"):
            return self.kernel(*xs)

