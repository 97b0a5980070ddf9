"""Sorting entries: a stable sort along an axis and top_k, whose numpy forms order NaN,
-0 and 0 as XLA's comparators do."""

from __future__ import annotations

import numpy as np

from xla_sentinel.ops.numpy_forms import np_sort, np_top_k
from xla_sentinel.ops.spec import NUMERIC, SELECTS, Attrs, Ctx, OpDef, Plan, Val, axis, needs_rank


def _plan_sort(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": axis(ctx, x), "descending": bool(ctx.rng.integers(2))}


def _sort_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    out = np_sort(x, attrs["axis"])
    return np.flip(out, attrs["axis"]) if attrs["descending"] else out


def _plan_top_k(ctx: Ctx, x: Val) -> Plan:
    return [x], {"k": int(ctx.rng.integers(1, x.shape[-1] + 1)), "output": int(ctx.rng.integers(2))}


ENTRIES: list[OpDef] = [
    OpDef(name="sort", category="sort", dtypes=NUMERIC, plan=needs_rank(1, _plan_sort), tags=SELECTS,
          numpy=_sort_numpy),
    OpDef(name="top_k", category="sort", dtypes=NUMERIC, plan=needs_rank(1, _plan_top_k), discrete=True,
          tags=SELECTS, numpy=lambda a, x: np_top_k(x, a["k"])[a["output"]],
          # jax emits chlo.top_k; a module lowered further holds the sort it becomes.
          stablehlo=("chlo.top_k", "stablehlo.sort")),
]
