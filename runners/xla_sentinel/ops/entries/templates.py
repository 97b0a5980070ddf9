"""The `templates` program shape: the blocks real models are built from (softmax, layer
norm, masked attention, residual MLP, top-k routing), with their float64 numpy forms. Drawn
among random ops, a template puts a realistic neighbourhood in front of XLA's fusion decisions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from xla_sentinel.core.dtypes import FLOATS, NP_DTYPES
from xla_sentinel.ops.numpy_forms import total_order_key
from xla_sentinel.ops.spec import APPROX, SUMS, Ctx, OpDef, Plan, Val, axis, needs_rank

# Each template holds transcendental functions and sums, so it is tagged as both: the
# noise model scales its rounding by its terms.
COMPOSITE = APPROX | SUMS
LAYER_NORM_EPS = 1e-5
ACTIVATIONS = ("relu", "tanh", "silu")


def np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)


def np_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta."""
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=-1, keepdims=True) / x.shape[-1]
        centred = x - mean
        var = np.sum(centred * centred, axis=-1, keepdims=True) / x.shape[-1]
        return centred * (1.0 / np.sqrt(var + LAYER_NORM_EPS)) * gamma + beta


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, low: float) -> np.ndarray:
    """softmax(q . k / sqrt(D), masked positions at `low`) . v, as the builder computes it."""
    with np.errstate(all="ignore"):
        scores = np.matmul(q, np.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(q.shape[-1]))
        p = np_softmax(np.where(mask, scores, low), -1)
        return np.matmul(p, v)


def _np_activation(kind: str, h: np.ndarray) -> np.ndarray:
    if kind == "relu":
        return np.maximum(h, 0.0)
    if kind == "tanh":
        return np.tanh(h)
    return h * (1.0 / (1.0 + np.exp(-h)))


def np_mlp_block(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray,
                 act: str) -> np.ndarray:
    """x + act(x @ w1 + b1) @ w2 + b2 over the last axis of x."""
    with np.errstate(all="ignore"):
        return x + (_np_activation(act, x @ w1 + b1) @ w2 + b2)


def np_topk_routing(x: np.ndarray, k: int) -> np.ndarray:
    """Mixture-of-experts gates over the last axis: softmax, keep the top k in lax.top_k's
    order, renormalize, scatter back to a dense gate array."""
    probs = np_softmax(x, -1)
    key = total_order_key(np.where(np.isnan(probs), np.nan, probs))
    idx = np.argsort(-key, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(probs, idx, -1)
    with np.errstate(all="ignore"):
        weights = vals / np.sum(vals, axis=-1, keepdims=True)
    out = np.zeros(x.shape, np.float64)
    np.put_along_axis(out, idx, weights, -1)
    return out


def _plan_softmax(ctx: Ctx, x: Val) -> Plan:
    return [x], {"axis": axis(ctx, x)}


def _plan_layer_norm(ctx: Ctx, x: Val) -> Plan:
    d = x.shape[-1]
    return [x, ctx.operand((d,), x.dtype), ctx.operand((d,), x.dtype)], {}


def _plan_attention(ctx: Ctx, q: Val) -> Plan:
    if q.rank not in (2, 3):
        q = ctx.operand((*(ctx.dim() for _ in range(int(ctx.rng.integers(2, 4)))),), q.dtype)
    *batch, s, d = q.shape
    t = ctx.dim()
    k = ctx.operand((*batch, t, d), q.dtype)
    v = ctx.operand((*batch, t, ctx.dim()), q.dtype)
    return [q, k, v, ctx.operand((s, t), "bool")], {
        "low": float(ml_dtypes.finfo(NP_DTYPES[q.dtype]).min)}


def _plan_mlp_block(ctx: Ctx, x: Val) -> Plan:
    d, h = x.shape[-1], ctx.dim()
    return [x, ctx.operand((d, h), x.dtype), ctx.operand((h,), x.dtype), ctx.operand((h, d), x.dtype),
            ctx.operand((d,), x.dtype)], {"act": str(ctx.rng.choice(ACTIVATIONS))}


def _plan_topk_routing(ctx: Ctx, x: Val) -> Plan:
    return [x], {"k": int(ctx.rng.integers(1, min(4, x.shape[-1]) + 1))}


ENTRIES: list[OpDef] = [
    OpDef(name="softmax", category="composite", dtypes=FLOATS, plan=needs_rank(1, _plan_softmax),
          tags=COMPOSITE, family="templates", numpy=lambda a, x: np_softmax(x, a["axis"])),
    OpDef(name="layer_norm", category="composite", dtypes=FLOATS, plan=needs_rank(1, _plan_layer_norm),
          tags=COMPOSITE, family="templates", numpy=lambda a, x, g, b: np_layer_norm(x, g, b)),
    OpDef(name="attention", category="composite", dtypes=FLOATS, plan=_plan_attention, tags=COMPOSITE,
          family="templates", numpy=lambda a, q, k, v, mask: np_attention(q, k, v, mask, a["low"])),
    OpDef(name="mlp_block", category="composite", dtypes=FLOATS, plan=needs_rank(1, _plan_mlp_block),
          tags=COMPOSITE, family="templates", numpy=lambda a, *xs: np_mlp_block(*xs, a["act"])),
    # Discrete: top-k picks experts by comparing probabilities, which legal rounding can flip.
    OpDef(name="topk_routing", category="composite", dtypes=FLOATS, plan=needs_rank(1, _plan_topk_routing),
          discrete=True, tags=COMPOSITE, family="templates", numpy=lambda a, x: np_topk_routing(x, a["k"])),
]


# What each template's result must satisfy whatever legal rounding does, as plain
# declarations (attrs, result shape) -> [{"kind": ...}] that judge/invariants.py reads and
# checks on every configuration where the template's result is an output (docs/detection.md,
# "Invariants"). Declaring draws nothing: the programs a seed gives are unchanged.
PROBABILITIES = ({"kind": "range", "low": 0.0, "high": 1.0}, {"kind": "finite"})
INVARIANTS: dict[str, Callable[[dict[str, Any], tuple[int, ...]], list[dict[str, Any]]]] = {
    # Rows sum to one, each in [0, 1], and no NaN from finite logits (x - max(x) <= 0).
    "softmax": lambda attrs, shape: [{"kind": "sum", "axis": attrs["axis"]}, *PROBABILITIES],
    # The renormalized top-k gates: a row's k kept gates sum to one, the rest are zero.
    "topk_routing": lambda attrs, shape: [{"kind": "sum", "axis": len(shape) - 1}, *PROBABILITIES],
    # var + eps > 0, so finite input gives a finite output (a negative variance below -eps
    # makes rsqrt NaN); scale and shift leave nothing else to check on the output.
    "layer_norm": lambda attrs, shape: [{"kind": "finite"}],
}
