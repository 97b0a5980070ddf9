"""Shape-manipulation entries: reshape, transpose, broadcast, squeeze, expand_dims, rev,
pad, concatenate and slice; all move elements without computing on them."""

from __future__ import annotations

import numpy as np

from xla_sentinel.ops.numpy_forms import np_broadcast_in_dim, np_is_float, np_pad
from xla_sentinel.ops.spec import ALL, SELECTS, Attrs, Ctx, OpDef, Plan, Val, axis, needs_rank


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


def _plan_transpose(ctx: Ctx, x: Val) -> Plan:
    if len(set(x.shape)) > 1 and ctx.rng.random() < 0.3:
        # Shape-preserving transposes (square matrices) are where a transpose mistaken for
        # a copy or layout change goes unnoticed by shape checks: draw them on purpose.
        x = ctx.operand((x.shape[0],) * x.rank, x.dtype)
    return [x], {"perm": [int(p) for p in ctx.rng.permutation(x.rank)]}


def _plan_broadcast(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank >= ctx.max_rank:
        return None
    pos = int(ctx.rng.integers(x.rank + 1))
    shape = list(x.shape)
    shape.insert(pos, ctx.dim())
    dims = [i for i in range(len(shape)) if i != pos]
    return [x], {"shape": shape, "dims": dims}


def _plan_squeeze(ctx: Ctx, x: Val) -> Plan | None:
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    return ([x], {"dims": ones}) if ones else None


def _plan_expand(ctx: Ctx, x: Val) -> Plan | None:
    if x.rank >= ctx.max_rank:
        return None
    return [x], {"dims": [int(ctx.rng.integers(x.rank + 1))]}


def _plan_rev(ctx: Ctx, x: Val) -> Plan:
    k = int(ctx.rng.integers(1, x.rank + 1))
    return [x], {"dims": sorted(int(d) for d in ctx.rng.choice(x.rank, size=k, replace=False))}


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


def pad_value(attrs: Attrs, boolean: bool, floating: bool) -> bool | int | float:
    """pad's fill for an operand of a bool, float or integer type: the drawn value, made a
    bool, or an integer of its magnitude."""
    value = attrs["value"]
    if boolean:
        return bool(value)
    return value if floating else int(abs(value))


def _pad_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    value = pad_value(attrs, x.dtype == np.bool_, np_is_float(x))
    return np_pad(x, np.asarray(value, x.dtype), attrs["config"])


def _plan_concat(ctx: Ctx, x: Val) -> Plan:
    ax = axis(ctx, x)
    others = []
    for _ in range(int(ctx.rng.integers(1, 3))):
        shape = list(x.shape)
        shape[ax] = ctx.dim()
        others.append(ctx.operand(tuple(shape), x.dtype))
    return [x, *others], {"axis": ax}


def _plan_slice(ctx: Ctx, x: Val) -> Plan:
    start, limit, stride = [], [], []
    for d in x.shape:
        s = int(ctx.rng.integers(0, d))
        e = int(ctx.rng.integers(s + 1, d + 1))
        start.append(s)
        limit.append(e)
        stride.append(int(ctx.rng.integers(1, 3)))
    return [x], {"start": start, "limit": limit, "stride": stride}


ENTRIES: list[OpDef] = [
    OpDef(name="reshape", category="shape", dtypes=ALL, plan=_plan_reshape, tags=SELECTS,
          numpy=lambda a, x: np.reshape(x, a["shape"]), stablehlo=("stablehlo.reshape",)),
    OpDef(name="transpose", category="shape", dtypes=ALL, plan=needs_rank(2, _plan_transpose), tags=SELECTS,
          numpy=lambda a, x: np.transpose(x, a["perm"]), stablehlo=("stablehlo.transpose",)),
    OpDef(name="broadcast_in_dim", category="shape", dtypes=ALL, plan=_plan_broadcast, tags=SELECTS,
          numpy=lambda a, x: np_broadcast_in_dim(x, a["shape"], a["dims"]),
          stablehlo=("stablehlo.broadcast_in_dim",)),
    OpDef(name="squeeze", category="shape", dtypes=ALL, plan=_plan_squeeze, tags=SELECTS,
          numpy=lambda a, x: np.squeeze(x, tuple(a["dims"])), stablehlo=("stablehlo.reshape",)),
    OpDef(name="expand_dims", category="shape", dtypes=ALL, plan=_plan_expand, tags=SELECTS,
          numpy=lambda a, x: np.expand_dims(x, tuple(a["dims"])), stablehlo=("stablehlo.broadcast_in_dim",)),
    OpDef(name="rev", category="shape", dtypes=ALL, plan=needs_rank(1, _plan_rev), tags=SELECTS,
          numpy=lambda a, x: np.flip(x, tuple(a["dims"])), stablehlo=("stablehlo.reverse",)),
    OpDef(name="pad", category="shape", dtypes=ALL, plan=_plan_pad, tags=SELECTS, numpy=_pad_numpy,
          stablehlo=("stablehlo.pad",)),
    OpDef(name="concatenate", category="shape", dtypes=ALL, plan=needs_rank(1, _plan_concat), tags=SELECTS,
          numpy=lambda a, *xs: np.concatenate(xs, a["axis"]), stablehlo=("stablehlo.concatenate",)),
    OpDef(name="slice", category="shape", dtypes=ALL, plan=needs_rank(1, _plan_slice), tags=SELECTS,
          numpy=lambda a, x: x[tuple(slice(*t) for t in zip(a["start"], a["limit"], a["stride"], strict=True))],
          stablehlo=("stablehlo.slice",)),
]
