"""Reduction entries: reductions over axes, argmax and argmin, cumulative scans and
windowed reductions, with the numpy forms that order signed zeros and NaN as lax does."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xla_sentinel.ops.numpy_forms import (
    REDUCERS,
    lax_signed_zeros,
    np_guard,
    np_is_float,
    np_reduce,
    np_reduce_window,
    same_pads,
)
from xla_sentinel.ops.spec import (
    EXACT,
    NUMERIC,
    PRODUCTS,
    SELECTS,
    SUMS,
    Attrs,
    Ctx,
    OpDef,
    Plan,
    Val,
    axis,
    needs_rank,
)


def _plan_reduce(ctx: Ctx, x: Val) -> Plan:
    k = int(ctx.rng.integers(1, x.rank + 1))
    axes = sorted(int(a) for a in ctx.rng.choice(x.rank, size=k, replace=False))
    return [x], {"axes": axes}


def _reduce(*, name: str, kind: str, dtypes: tuple[str, ...], guard: str | None = None,
            tags: frozenset[str] = frozenset()) -> OpDef:
    """A reduction with REDUCERS[kind] over the drawn axes, of the guarded operand."""
    return OpDef(name=name, category="reduction", dtypes=dtypes, plan=needs_rank(1, _plan_reduce),
                 guard=guard, tags=tags,
                 numpy=lambda a, x: np_reduce(np_guard(guard, x), kind, a["axes"]))


def _plan_arg(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": axis(ctx, x)}


def _plan_cumulative(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": axis(ctx, x), "reverse": bool(ctx.rng.integers(2))}


def _cumulative_numpy(kind: str, guard_kind: str | None) -> Callable[..., np.ndarray]:
    def column(attrs: Attrs, x: np.ndarray) -> np.ndarray:
        x, axis = np_guard(guard_kind, x), attrs["axis"]
        reverse = attrs["reverse"]

        def flip(v: np.ndarray) -> np.ndarray:
            return np.flip(v, axis) if reverse else v

        out: np.ndarray
        with np.errstate(over="ignore"):
            out = REDUCERS[kind].accumulate(flip(x), axis=axis, dtype=x.dtype)
        out = lax_signed_zeros(out, flip(x), kind, lambda m: np.logical_or.accumulate(m, axis=axis))
        return flip(out)
    return column


def _cumulative(*, name: str, kind: str, guard: str | None = None, tags: frozenset[str]) -> OpDef:
    """A cumulative REDUCERS[kind] along the drawn axis, forward or reversed."""
    return OpDef(name=name, category="reduction", dtypes=NUMERIC, plan=needs_rank(1, _plan_cumulative),
                 guard=guard, tags=tags, numpy=_cumulative_numpy(kind, guard))


def _plan_reduce_window(ctx: Ctx, x: Val) -> Plan:
    win = [int(ctx.rng.integers(1, min(d, 3) + 1)) for d in x.shape]
    strides = [int(ctx.rng.integers(1, 3)) for _ in x.shape]
    return [x], {"kind": str(ctx.rng.choice(["add", "max", "min"])), "window": win,
                 "strides": strides, "padding": str(ctx.rng.choice(["VALID", "SAME"]))}


def _reduce_window_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    kind = attrs["kind"]
    init: float
    if kind == "add":
        init = 0
    elif np_is_float(x):
        init = -np.inf if kind == "max" else np.inf
    else:
        init = np.iinfo(x.dtype).min if kind == "max" else np.iinfo(x.dtype).max
    pads = same_pads(x.shape, attrs["window"], attrs["strides"], attrs["padding"])
    return np_reduce_window(x, np.asarray(init, x.dtype), kind, attrs["window"], attrs["strides"], pads)


ENTRIES: list[OpDef] = [
    _reduce(name="reduce_sum", kind="add", dtypes=NUMERIC, tags=SUMS),
    _reduce(name="reduce_max", kind="max", dtypes=NUMERIC, tags=SELECTS),
    _reduce(name="reduce_min", kind="min", dtypes=NUMERIC, tags=SELECTS),
    _reduce(name="reduce_prod", kind="mul", dtypes=NUMERIC, guard="near1", tags=PRODUCTS),
    _reduce(name="reduce_and", kind="and", dtypes=("bool",)),
    _reduce(name="reduce_or", kind="or", dtypes=("bool",)),
    # numpy's argmax and argmin, like lax's, take the first NaN, else the first extremum.
    OpDef(name="argmax", category="reduction", dtypes=NUMERIC, plan=needs_rank(1, _plan_arg),
          discrete=True, tags=EXACT, numpy=lambda a, x: np.argmax(x, a["axis"]).astype(np.int32),
          # A reduce whose body compares and selects: those ops make it discrete.
          stablehlo=("stablehlo.compare", "stablehlo.select")),
    OpDef(name="argmin", category="reduction", dtypes=NUMERIC, plan=needs_rank(1, _plan_arg),
          discrete=True, tags=EXACT, numpy=lambda a, x: np.argmin(x, a["axis"]).astype(np.int32),
          stablehlo=("stablehlo.compare", "stablehlo.select")),
    _cumulative(name="cumsum", kind="add", tags=SUMS),
    _cumulative(name="cumprod", kind="mul", guard="near1", tags=PRODUCTS),
    _cumulative(name="cummax", kind="max", tags=SELECTS),
    _cumulative(name="cummin", kind="min", tags=SELECTS),
    OpDef(name="reduce_window", category="reduction", dtypes=NUMERIC, plan=needs_rank(1, _plan_reduce_window),
          tags=SUMS | SELECTS,  # by its kind
          numpy=_reduce_window_numpy),
]
