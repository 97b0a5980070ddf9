"""The `mixed_precision` program shape from real bugs: bf16 and f16 contractions that
accumulate in f32 (preferred_element_type), and batched matrix-vector products."""

from __future__ import annotations

import numpy as np

from xla_sentinel.core.names import FLOATS
from xla_sentinel.ops.entries.linalg import conv_numpy, dot_numpy, plan_conv, plan_dot
from xla_sentinel.ops.numpy_forms import np_reduce
from xla_sentinel.ops.spec import SUMS, Attrs, Ctx, OpDef, Plan, Val, needs_rank

LOW_PRECISION = ("bf16", "f16")


def _f32_acc(out: np.ndarray, x: np.ndarray) -> np.ndarray:
    """f32 where the builder accumulates in f32 (lax_builders.f32_acc: bf16 and f16
    operands); float64 operands, promoted by the float64 reference, keep their type."""
    return out.astype(np.float32) if x.dtype.itemsize < 4 else out


def _plan_batched_matvec(ctx: Ctx, x: Val) -> Plan:
    if x.rank != 3:
        x = ctx.operand((ctx.dim(), ctx.dim(), ctx.dim()), x.dtype)
    return [x, ctx.operand((x.shape[0], x.shape[2]), x.dtype)], {
        "reduce": str(ctx.rng.choice(["sum", "max"])), "axis": int(ctx.rng.integers(2)),
        "f32_acc": x.dtype in LOW_PRECISION and bool(ctx.rng.integers(2))}


def _batched_matvec_numpy(attrs: Attrs, m: np.ndarray, v: np.ndarray) -> np.ndarray:
    y = np.einsum("bnk,bk->bn", m, v)
    out = np_reduce(y, "add" if attrs["reduce"] == "sum" else "max", (attrs["axis"],))
    return _f32_acc(out, m) if attrs["f32_acc"] else out


ENTRIES: list[OpDef] = [
    OpDef(name="dot_general_acc", category="linalg", dtypes=LOW_PRECISION, plan=needs_rank(1, plan_dot),
          tags=SUMS, family="mixed_precision", numpy=lambda a, x, y: _f32_acc(dot_numpy(a, x, y), x)),
    OpDef(name="conv_acc", category="linalg", dtypes=LOW_PRECISION, plan=plan_conv, tags=SUMS,
          family="mixed_precision", numpy=lambda a, x, w: _f32_acc(conv_numpy(a, x, w), x)),
    OpDef(name="batched_matvec", category="linalg", dtypes=FLOATS, plan=_plan_batched_matvec, tags=SUMS,
          family="mixed_precision", numpy=_batched_matvec_numpy),
]
