"""The `eager` reference in numpy: a generated program op by op at its own precision.

`eager` means what the program literally says: every op evaluated alone and rounded to
its own dtype. Through XLA that is one small compile per op, shape and dtype, about half
of a campaign's worker time once the float64 reference moved to numpy (issue 16). numpy
computes many ops bit for bit as XLA:CPU does, so those are evaluated here and only the
rest are handed to XLA (evaluate.literal).

numpy reproduces an op (`reproduces`) when its result is fixed by IEEE 754 and lax semantics:
- no float anywhere (integer and bool ops wrap as XLA's do; the op table's numpy form
  spells out lax's semantics for division by zero, shifts and the like);
- data movement and selection (`selects`), compares, conversions and rounding to integers
  (`exact`): computed on float64 copies, which hold every narrower float exactly, or at the
  operands' own dtypes where the column rounds a constant to it (clamp bounds, iota);
- one correctly rounded operation (`rounded` + - *, and sqrt, div; rem is exact): computed
  in float64 and rounded to the dtype along XLA:CPU's path. XLA:CPU computes bf16 and f16
  in f32 and converts, so a result goes float64 -> f32 -> dtype. Each step is innocuous:
  a format of more than twice the bits plus two, rounded to the narrower one, gives the
  correctly rounded result of + - * / sqrt (Figueroa, 1995; 53 >= 2*24+2, 24 >= 2*11+2).
  A conversion from f64 is another matter: XLA:CPU also converts f64 to bf16 and f16
  through f32, which rounds twice (1 + 2^-8 + 2^-30 becomes 1, not 1 + 2^-7), and so
  does s32 or u32 to bf16; numpy rounds once, so conversions take the same path.
A domain guard the entry applies first (|x| + 0.5, a clamp) is itself such ops, rounded
at the dtype; a guard through tanh is not. Not reproduced, so evaluated by XLA:
transcendental functions (XLA:CPU's own polynomials, a few ulps from numpy's), sums and
products of many terms (their order), and entries whose numpy form works in float64
throughout (loops, composites).

Denormals (measured on XLA:CPU 0.10.2; f16 is computed in f32, where its subnormals are
normal, so none of this touches it): arithmetic, max, min, clamp, compares and
conversions through a float instruction read an f32, bf16 or f64 subnormal as zero and
flush a subnormal result (FTZ, DAZ); data movement, select, abs, neg and bitcasts copy
its bits; sort and the compare-and-select idioms compare it as zero and copy its bits;
a bf16 subnormal converted to bool is true, an f32 one false; a max reduction of one
element copies it. Rather than a rule per path, an op XLA:CPU does not compute on bits
(`ON_BITS`) whose operand holds such a subnormal is left to XLA (`apply` returns
None), as is a result within twice the smallest normal number, where the hardware's
flush decision is not reproduced here. Both are rare (special inputs; 1e-38 results).
`tests/fuzz/test_own_precision.py` holds the two evaluations equal, value for value, per
(op, dtype) on random and special inputs and on generated programs.
"""

from __future__ import annotations

import numpy as np

from xla_sentinel.core import cpu_account
from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.names import FLOATS
from xla_sentinel.ops.numpy_forms import (
    Elementwise,
    float_info,
    flush_subnormals,
    np_convert,
    np_guard,
    np_int_nonzero,
    np_is_float,
)
from xla_sentinel.ops.spec import Attrs, OpDef
from xla_sentinel.ops.table import OPS

# One correctly rounded result (sqrt, div) or an exact one (rem: fmod is exact in IEEE 754),
# beyond the ops tagged `rounded`.
CORRECTLY_ROUNDED = frozenset({"sqrt", "div", "rem"})
# Guards made of reproduced ops: |x| + 0.5 and a clamp. "unit" and "near1" go through tanh.
REPRODUCED_GUARDS = frozenset({None, "pos", "bounded"})
# Entries whose numpy form evaluates a whole computation in float64 (a loop body, a
# template of several ops): numpy does not round between their steps as XLA does.
WHOLE_COMPUTATIONS = frozenset({"loops", "templates"})
# Ops XLA:CPU computes on bits: operand bits moved, chosen by integers or booleans, or with
# the sign bit changed, bitcasts, and reduce_precision's integer rounding (its numpy form
# is XLA's algorithm on the format's own bits). A subnormal passes through them unflushed,
# in XLA:CPU as in numpy (measured: reduce_precision of f16, bf16, f32 and f64 subnormals
# agrees bitwise).
ON_BITS = frozenset({
    "reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "rev", "pad",
    "concatenate", "slice", "dynamic_slice", "dynamic_update_slice", "gather",
    "dynamic_slice_idx", "dynamic_update_slice_idx", "gather_idx", "scatter", "select",
    "abs", "neg", "bitcast_convert", "reduce_precision"})
# Columns that round a constant to the operand's dtype as the builder does (clamp's bounds,
# iota's index ramp): evaluated at the operands' own dtypes, not on float64 copies.
OWN_DTYPE_COLUMNS = frozenset({"clamp", "iota"})
assert ON_BITS | OWN_DTYPE_COLUMNS <= set(OPS), (ON_BITS | OWN_DTYPE_COLUMNS) - set(OPS)

F32 = np.dtype(np.float32)
# The formats XLA:CPU flushes (f16 is computed in f32, where its subnormals are normal).
FLUSHED = frozenset({"f32", "bf16", "f64"})


def _guards(op: OpDef) -> tuple[str | None, ...]:
    if isinstance(op.numpy, Elementwise):
        return op.numpy.guards
    return (op.guard,)


def reproduces(op: OpDef, attrs: Attrs, arg_dtypes: list[str], dtype: str) -> bool:
    """Does numpy compute this op's result at its own precision bit for bit as XLA:CPU
    (on operands without subnormals: `apply` checks those)?"""
    if op.numpy is None or op.family in WHOLE_COMPUTATIONS:
        return False
    if dtype not in FLOATS and not any(d in FLOATS for d in arg_dtypes):
        return True
    if attrs.get("kind") == "add":  # reduce_window, scatter: adding up terms in some order
        return False
    if op.name == "convert" and dtype == "f16" and "f64" in arg_dtypes:
        # XLA:CPU's f64 -> f16 convert depends on the host: through f32 (two roundings) on
        # the earlier test hosts, once (correctly rounded) on a later one, same jaxlib 0.10.2
        # (tests/fuzz/test_own_precision.py). bf16 goes through f32 on both. XLA decides it.
        return False
    if not set(_guards(op)) <= REPRODUCED_GUARDS:
        return False
    return bool(op.tags & {"exact", "selects", "rounded"}) or op.name in CORRECTLY_ROUNDED


def _flushable_subnormal(x: np.ndarray) -> bool:
    if not np_is_float(x) or x.dtype == np.float16:
        return False
    tiny = float_info(x.dtype).tiny
    return bool(((x != 0) & (np.abs(x) < tiny)).any())


def _near_flush(r: np.ndarray, dtype: str) -> bool:
    """A float64 result within twice the smallest normal number of the format XLA:CPU
    flushes it in (f32 for bf16, computed in f32)."""
    if dtype not in FLUSHED:
        return False
    tiny = float(float_info(NP_DTYPES["f64" if dtype == "f64" else "f32"]).tiny)
    mag = np.abs(np.asarray(r, np.float64))
    return bool(((mag > 0) & (mag < 2 * tiny)).any())


def _xla_round(r: np.ndarray, dtype: str) -> np.ndarray | None:
    """A result computed in float64, rounded to `dtype` as XLA:CPU does: bf16 and f16
    through f32, the flushing formats with subnormal results flushed. None near the
    flush threshold."""
    dt = NP_DTYPES[dtype]
    if dtype not in FLOATS:
        return np.asarray(r).astype(dt)
    if _near_flush(r, dtype):
        return None
    r = np.asarray(r)
    with np.errstate(over="ignore"):
        if dtype == "f64":
            return flush_subnormals(r.astype(dt))
        return flush_subnormals(r.astype(F32)).astype(dt)


def _promote(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64) if np_is_float(x) else x


def apply(op: OpDef, attrs: Attrs, xs: list[np.ndarray], dtype: str) -> np.ndarray | None:
    """The op on operands in their own dtypes, as XLA:CPU computes it (`reproduces`
    holds), or None where numpy does not reproduce it on these operands."""
    # Apart in the CPU account: what `eager` spends beside it is its ops through XLA.
    with cpu_account.stage("numpy"):
        return _apply(op, attrs, xs, dtype)


def _apply(op: OpDef, attrs: Attrs, xs: list[np.ndarray], dtype: str) -> np.ndarray | None:
    form = op.numpy
    if form is None or (op.name not in ON_BITS and any(_flushable_subnormal(x) for x in xs)):
        return None
    dt = NP_DTYPES[dtype]
    if op.name in ON_BITS or op.own_dtypes:
        # Bits, at the operands' own dtypes (bitcasts and nextafter make subnormals there).
        return np.asarray(form(attrs, *xs)).astype(dt)
    with np.errstate(all="ignore"):
        if op.name in OWN_DTYPE_COLUMNS:
            out = np.asarray(form(attrs, *xs))
            return _xla_round(out, dtype) if np_is_float(out) else out.astype(dt)
        if op.name == "convert":
            # To a float: the exact value (every operand type fits float64 exactly), then
            # XLA:CPU's path to the dtype; to an integer or bool: the column's rule.
            (x,) = xs
            return _xla_round(np_convert(x, "f64"), dtype) if dtype in FLOATS else np_convert(x, dtype)
        if isinstance(form, Elementwise):
            # The guard at the operands' own precision (its add rounds there), then the op alone.
            xs = [np_guard(g, x) for g, x in zip(form.guards, xs, strict=False)]
            if form.int_rhs and not np_is_float(xs[1]):
                xs[1] = np_int_nonzero(xs[1])
            out = form.kernel(*map(_promote, xs))
        else:
            out = form(attrs, *map(_promote, xs))
    return _xla_round(np.asarray(out), dtype)
