"""The `loops` program shape from real bugs: loops that carry a buffer updated in place,
for the aliasing, copy insertion and loop-invariant code motion that real bugs hit in KV
caches and optimizer states."""

from __future__ import annotations

from typing import Any

import numpy as np

from xla_sentinel.ops.entries.control import np_body, plan_bodies
from xla_sentinel.ops.spec import ALL, NUMERIC, SUMS, Attrs, Ctx, OpDef, Plan, Val


def _plan_carried(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank == 0:
        return None
    return [x], {"loop": str(ctx.rng.choice(["scan", "fori"])), "body": plan_bodies(ctx, 1)[0],
                 "trips": int(ctx.rng.integers(1, 5)), "step": int(ctx.rng.integers(0, 3)),
                 "offset": int(ctx.rng.integers(0, 2))}


def _rows(attrs: Attrs, n: int) -> list[tuple[int, int]]:
    """(read row, write row) per trip: the step-th row each trip, written `offset` later."""
    return [((t * attrs["step"]) % n, (t * attrs["step"] + attrs["offset"]) % n)
            for t in range(attrs["trips"])]


def _loop_dus_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    acc = x.copy()
    for read, write in _rows(attrs, x.shape[0]):
        acc[write] = np_body(attrs["body"], acc[read])
    return acc


def _plan_loop_scatter_add(ctx: Ctx, x: Val) -> Plan | None:
    planned = _plan_carried(ctx, x)
    return None if planned is None else ([x, ctx.operand(x.shape, x.dtype)], planned[1])


def _loop_scatter_add_numpy(attrs: Attrs, x: np.ndarray, u: np.ndarray) -> np.ndarray:
    acc = x.copy()
    for t, (_, write) in enumerate(_rows(attrs, x.shape[0])):
        with np.errstate(over="ignore"):
            acc[write] = (acc[write] + np_body(attrs["body"], u[t % x.shape[0]])).astype(x.dtype)
    return acc


def _plan_loop_shift(ctx: Ctx, x: Val) -> Plan | None:
    axes = [d for d, n in enumerate(x.shape) if n >= 2]
    planned = _plan_carried(ctx, x)
    if not axes or planned is None:
        return None
    return [x], {**planned[1], "axis": int(ctx.rng.choice(axes))}


def shift_indices(axis: int) -> tuple[tuple[Any, ...], ...]:
    """Index tuples of the head, the tail and all but the last element along `axis`: each
    trip of loop_shift sets tail from rest (a shift register), then a new head."""
    return tuple((slice(None),) * axis + (s,) for s in (slice(0, 1), slice(1, None), slice(None, -1)))


def _loop_shift_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    head, tail, rest = shift_indices(attrs["axis"])
    v = x.copy()
    for _ in range(attrs["trips"]):
        first = v[head].copy()
        v[tail] = v[rest].copy()
        v[head] = np_body(attrs["body"], first)
    return v


ENTRIES: list[OpDef] = [
    OpDef(name="loop_dus", category="control", dtypes=ALL, plan=_plan_carried, family="loops",
          numpy=_loop_dus_numpy),
    OpDef(name="loop_scatter_add", category="control", dtypes=NUMERIC, plan=_plan_loop_scatter_add,
          tags=SUMS, family="loops", numpy=_loop_scatter_add_numpy),
    OpDef(name="loop_shift", category="control", dtypes=ALL, plan=_plan_loop_shift, family="loops",
          numpy=_loop_shift_numpy),
]
