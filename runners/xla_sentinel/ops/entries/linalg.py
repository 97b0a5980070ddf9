"""Linear-algebra entries: dot_general and convolutions in general dimension positions,
whose numpy forms contract in float64 (integers wrap)."""

from __future__ import annotations

import numpy as np

from xla_sentinel.core.names import FLOATS
from xla_sentinel.ops.numpy_forms import np_conv, np_dot_general, same_pads
from xla_sentinel.ops.spec import SUMS, Attrs, Ctx, OpDef, Plan, Val, needs_rank


def plan_dot(ctx: Ctx, x: Val) -> Plan | None:
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


def dot_numpy(attrs: Attrs, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """dot_general's numpy form."""
    return np_dot_general(x, y, attrs["lhs_contract"], attrs["rhs_contract"], attrs["lhs_batch"],
                          attrs["rhs_batch"])


def plan_conv(ctx: Ctx, x: Val) -> Plan | None:
    """NC(spatial...) input, OI(spatial...) kernel, 1 or 2 spatial dims."""
    if x.rank not in (3, 4):
        # Few values have rank 3 or 4: start a fresh image so convolutions are drawn.
        sizes = [ctx.dim() for _ in range(int(ctx.rng.integers(1, 3)))]
        x = ctx.operand((int(ctx.rng.integers(1, 3)), int(ctx.rng.integers(1, 4)), *sizes), x.dtype)
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


def conv_numpy(attrs: Attrs, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """conv_general_dilated's numpy form (no padding with lhs dilation, as the builder)."""
    strides, lhs_d, rhs_d = attrs["strides"], attrs["lhs_dilation"], attrs["rhs_dilation"]
    if any(d > 1 for d in lhs_d):
        pads = [(0, 0)] * len(strides)
    else:
        span = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], rhs_d, strict=True)]
        pads = same_pads(x.shape[2:], span, strides, attrs["padding"])
    return np_conv(x, w, strides, pads, lhs_d, rhs_d)


ENTRIES: list[OpDef] = [
    OpDef(name="dot_general", category="linalg", dtypes=FLOATS + ("s32",), plan=needs_rank(1, plan_dot),
          tags=SUMS, numpy=dot_numpy, stablehlo=("stablehlo.dot_general",)),
    OpDef(name="conv_general_dilated", category="linalg", dtypes=FLOATS, plan=plan_conv, tags=SUMS,
          numpy=conv_numpy, stablehlo=("stablehlo.convolution",)),
]
