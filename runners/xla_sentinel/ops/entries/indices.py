"""The `indices` program shape from real bugs: slices, updates, gathers and scatters whose
indices are of every integer width and out of range, so that XLA must clamp or drop them."""

from __future__ import annotations

from typing import Any

import numpy as np

from xla_sentinel.ops.entries.indexing import index_operands
from xla_sentinel.ops.numpy_forms import np_dynamic_slice, np_dynamic_update_slice
from xla_sentinel.ops.spec import ALL, INDEX, NUMERIC, SELECTS, SUMS, Attrs, Ctx, OpDef, Plan, Val

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


def _as_index(attrs: Attrs, i: Any) -> np.ndarray:
    # C-style wrap, as XLA's integer convert.
    return np.asarray(i).astype(NP_INDEX[attrs["index_dtype"]]).astype(np.int64)


def _fits_index(x: Val) -> bool:
    return x.rank >= 1 and max(x.shape) <= MAX_INDEXED_DIM


def _plan_dynamic_slice_idx(ctx: Ctx, x: Val) -> Plan | None:
    if not _fits_index(x):
        return None
    sizes = [int(ctx.rng.integers(1, d + 1)) for d in x.shape]
    return [x, *index_operands(ctx, x.rank)], {"sizes": sizes, "index_dtype": _index_dtype(ctx)}


def _plan_dus_idx(ctx: Ctx, x: Val) -> Plan | None:
    if not _fits_index(x):
        return None
    update = ctx.operand(tuple(int(ctx.rng.integers(1, d + 1)) for d in x.shape), x.dtype)
    return [x, update, *index_operands(ctx, x.rank)], {"index_dtype": _index_dtype(ctx)}


def _plan_gather_idx(ctx: Ctx, x: Val) -> Plan | None:
    if not _fits_index(x):
        return None
    return [x, ctx.operand((int(ctx.rng.integers(1, 6)), 1), "s32")], {"index_dtype": _index_dtype(ctx)}


def _plan_scatter_add_idx(ctx: Ctx, x: Val) -> Plan | None:
    if not _fits_index(x):
        return None
    n = int(ctx.rng.integers(1, 6))
    return [x, ctx.operand((n, 1), "s32"), ctx.operand((n, *x.shape[1:]), x.dtype)], {
        "index_dtype": _index_dtype(ctx)}


def _scatter_add_idx_numpy(attrs: Attrs, x: np.ndarray, idx: np.ndarray, u: np.ndarray) -> np.ndarray:
    # Rows may repeat (accumulated) or fall outside x (dropped).
    rows = _as_index(attrs, idx)[:, 0]
    keep = (rows >= 0) & (rows < x.shape[0])
    out = x.copy()
    with np.errstate(over="ignore"):
        np.add.at(out, rows[keep], u[keep])
    return out


ENTRIES: list[OpDef] = [
    # No negative-index wrap (the builders pass allow_negative_indices=False): the starts
    # reach XLA as they are, and every out-of-range one (negative, or past dim - size) must
    # clamp.
    OpDef(name="dynamic_slice_idx", category="indexing", dtypes=ALL, plan=_plan_dynamic_slice_idx,
          tags=INDEX | SELECTS, family="indices",
          numpy=lambda a, x, *idx: np_dynamic_slice(x, [_as_index(a, i) for i in idx], a["sizes"])),
    OpDef(name="dynamic_update_slice_idx", category="indexing", dtypes=ALL, plan=_plan_dus_idx,
          tags=INDEX | SELECTS, family="indices",
          numpy=lambda a, x, u, *idx: np_dynamic_update_slice(x, u, [_as_index(a, i) for i in idx])),
    # PROMISE_IN_BOUNDS in the builder: jax adds no clamp of its own, so XLA's gather clamps.
    OpDef(name="gather_idx", category="indexing", dtypes=ALL, plan=_plan_gather_idx,
          tags=INDEX | SELECTS, family="indices",
          numpy=lambda a, x, idx: x[np.clip(_as_index(a, idx)[:, 0], 0, x.shape[0] - 1)]),
    OpDef(name="scatter_add_idx", category="indexing", dtypes=NUMERIC, plan=_plan_scatter_add_idx,
          tags=INDEX | SUMS, family="indices", numpy=_scatter_add_idx_numpy),
]
