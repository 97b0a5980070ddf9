"""Indexing entries: dynamic slices and updates at s32 starts, gathers and scatters of
rows, and iota; the numpy forms clamp and wrap indices as jax and XLA do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_sentinel.ops.numpy_forms import np_dynamic_slice, np_dynamic_update_slice
from xla_sentinel.ops.spec import (
    ALL,
    INDEX,
    ROUNDED,
    SELECTS,
    Attrs,
    Ctx,
    OpDef,
    Plan,
    Val,
    axis,
    needs_rank,
)


def index_operands(ctx: Ctx, n: int) -> list[Val]:
    """n scalar s32 start indices."""
    return [ctx.operand((), "s32") for _ in range(n)]


def _wrap_negative(x: np.ndarray, idx: Sequence[Any]) -> list[int]:
    # jax, before the (clamping) StableHLO op: a negative start counts from the end, in
    # int32 arithmetic (INT_MIN + dim stays negative and is clamped to 0 afterwards).
    return [int(i) + d if int(i) < 0 else int(i) for i, d in zip(idx, x.shape, strict=True)]


def _plan_dynamic_slice(ctx: Ctx, x: Val) -> Plan:
    sizes = [int(ctx.rng.integers(1, d + 1)) for d in x.shape]
    return [x, *index_operands(ctx, x.rank)], {"sizes": sizes}


def _plan_dus(ctx: Ctx, x: Val) -> Plan:
    update = ctx.operand(tuple(int(ctx.rng.integers(1, d + 1)) for d in x.shape), x.dtype)
    return [x, update, *index_operands(ctx, x.rank)], {}


def _plan_gather(ctx: Ctx, x: Val) -> Plan:
    n = int(ctx.rng.integers(1, 6))
    return [x, ctx.operand((n, 1), "s32")], {"mode": str(ctx.rng.choice(["clip", "fill"]))}


def _gather_numpy(attrs: Attrs, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    # Rows of x: `clip` clamps each index into range, `fill` gives 0 for an index out of it.
    rows = idx[:, 0].astype(np.int64)
    out = x[np.clip(rows, 0, x.shape[0] - 1)]
    if attrs["mode"] == "fill":
        bad = (rows < 0) | (rows >= x.shape[0])
        out = np.where(bad.reshape(-1, *[1] * (x.ndim - 1)), np.zeros((), x.dtype), out)
    return out


def _plan_scatter(ctx: Ctx, x: Val) -> Plan:
    n = int(ctx.rng.integers(1, x.shape[0] + 1))
    updates = ctx.operand((n, *x.shape[1:]), x.dtype)
    # Rows are distinct so that `replace` has one defined result; for `add` they may
    # repeat (order of accumulation is a legal difference the oracle tolerates).
    rows = [int(r) for r in ctx.rng.permutation(x.shape[0])[:n]]
    return [x, updates], {"rows": rows, "kind": str(ctx.rng.choice(["add", "replace"]))}


def _scatter_numpy(attrs: Attrs, x: np.ndarray, u: np.ndarray) -> np.ndarray:
    out = x.copy()
    if attrs["kind"] == "add" and x.dtype != np.bool_:
        with np.errstate(over="ignore"):
            np.add.at(out, np.asarray(attrs["rows"]), u)
    else:
        out[np.asarray(attrs["rows"])] = u
    return out


def _plan_iota(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dim": axis(ctx, x)}


def _iota_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    dt = x.dtype if x.dtype != np.bool_ else np.dtype(np.int32)
    it = np.broadcast_to(np.expand_dims(np.arange(x.shape[attrs["dim"]]),
                                        [d for d in range(x.ndim) if d != attrs["dim"]]), x.shape).astype(dt)
    with np.errstate(over="ignore"):
        return (x + it).astype(x.dtype) if x.dtype != np.bool_ else it != 0


ENTRIES: list[OpDef] = [
    OpDef(name="dynamic_slice", category="indexing", dtypes=ALL, plan=needs_rank(1, _plan_dynamic_slice),
          tags=INDEX | SELECTS,
          numpy=lambda a, x, *idx: np_dynamic_slice(x, _wrap_negative(x, idx), a["sizes"]),
          stablehlo=("stablehlo.dynamic_slice",)),
    OpDef(name="dynamic_update_slice", category="indexing", dtypes=ALL, plan=needs_rank(1, _plan_dus),
          tags=INDEX | SELECTS,
          numpy=lambda a, x, u, *idx: np_dynamic_update_slice(x, u, _wrap_negative(x, idx)),
          stablehlo=("stablehlo.dynamic_update_slice",)),
    OpDef(name="gather", category="indexing", dtypes=ALL, plan=needs_rank(1, _plan_gather),
          tags=INDEX | SELECTS, numpy=_gather_numpy, stablehlo=("stablehlo.gather",)),
    OpDef(name="scatter", category="indexing", dtypes=ALL, plan=needs_rank(1, _plan_scatter),
          tags=SELECTS,  # by its kind: replace selects, add does not
          numpy=_scatter_numpy),
    # An index ramp of the operand's shape (a shape op), listed after scatter: the table's
    # order is the generator's draw order (ops/table.py).
    OpDef(name="iota", category="shape", dtypes=ALL, plan=needs_rank(1, _plan_iota), tags=ROUNDED,
          numpy=_iota_numpy),
]
