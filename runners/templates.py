"""Composite templates: the blocks real models are built from (softmax, layer norm, masked
attention, residual MLP, top-k routing), each in jax.lax and in float64 numpy.

The op table (ops.py) declares each template once, with its planner; here is only the
math, so that a template drawn among random ops puts a realistic neighbourhood in front of
XLA's fusion decisions. Nothing here imports the rest of xla_sentinel.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

LAYER_NORM_EPS = 1e-5
ACTIVATIONS = ("relu", "tanh", "silu")


def _c(v: float, like: Any) -> Any:
    return jnp.asarray(v, like.dtype)


def softmax(x: Any, axis: int) -> Any:
    m = lax.broadcast_in_dim(lax.reduce_max(x, (axis,)), x.shape,
                             tuple(d for d in range(x.ndim) if d != axis))
    e = lax.exp(lax.sub(x, m))
    s = lax.broadcast_in_dim(lax.reduce_sum(e, (axis,)), x.shape,
                             tuple(d for d in range(x.ndim) if d != axis))
    return lax.div(e, s)


def np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)


def layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
    """Over the last axis: (x - mean) * rsqrt(var + eps) * gamma + beta."""
    last = x.ndim - 1
    keep = tuple(range(last))
    n = _c(x.shape[-1], x)
    mean = lax.broadcast_in_dim(lax.div(lax.reduce_sum(x, (last,)), n), x.shape, keep)
    centred = lax.sub(x, mean)
    var = lax.div(lax.reduce_sum(lax.mul(centred, centred), (last,)), n)
    inv = lax.broadcast_in_dim(lax.rsqrt(lax.add(var, _c(LAYER_NORM_EPS, x))), x.shape, keep)
    scale = lax.broadcast_in_dim(gamma, x.shape, (last,))
    shift = lax.broadcast_in_dim(beta, x.shape, (last,))
    return lax.add(lax.mul(lax.mul(centred, inv), scale), shift)


def np_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=-1, keepdims=True) / x.shape[-1]
        centred = x - mean
        var = np.sum(centred * centred, axis=-1, keepdims=True) / x.shape[-1]
        return centred * (1.0 / np.sqrt(var + LAYER_NORM_EPS)) * gamma + beta


def _masked_scores(q: Any, k: Any, mask: Any, low: float) -> Any:
    """q [..., S, D] . k [..., T, D] / sqrt(D), masked positions at `low`, the program
    dtype's lowest finite value (what models use instead of -inf, so a fully masked row
    stays finite; the float64 reference fills the same value)."""
    batch = tuple(range(q.ndim - 2))
    dn = (((q.ndim - 1,), (k.ndim - 1,)), (batch, batch))
    scores = lax.mul(lax.dot_general(q, k, dn), _c(1.0 / np.sqrt(q.shape[-1]), q))
    fill = jnp.full(scores.shape, low, q.dtype)
    return lax.select(lax.broadcast_in_dim(mask, scores.shape, (q.ndim - 2, q.ndim - 1)), scores, fill)


def attention(q: Any, k: Any, v: Any, mask: Any, low: float) -> Any:
    batch = tuple(range(q.ndim - 2))
    p = softmax(_masked_scores(q, k, mask, low), q.ndim - 1)
    return lax.dot_general(p, v, (((q.ndim - 1,), (q.ndim - 2,)), (batch, batch)))


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, low: float) -> np.ndarray:
    """`low` is the mask's fill, as in `attention`."""
    with np.errstate(all="ignore"):
        scores = np.matmul(q, np.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(q.shape[-1]))
        p = np_softmax(np.where(mask, scores, low), -1)
        return np.matmul(p, v)


def _activation(kind: str, h: Any) -> Any:
    if kind == "relu":
        return lax.max(h, _c(0.0, h))
    if kind == "tanh":
        return lax.tanh(h)
    return lax.mul(h, lax.logistic(h))  # silu


def _np_activation(kind: str, h: np.ndarray) -> np.ndarray:
    if kind == "relu":
        return np.maximum(h, 0.0)
    if kind == "tanh":
        return np.tanh(h)
    return h * (1.0 / (1.0 + np.exp(-h)))


def mlp_block(x: Any, w1: Any, b1: Any, w2: Any, b2: Any, act: str) -> Any:
    """x + act(x @ w1 + b1) @ w2 + b2 over the last axis of x."""
    last = x.ndim - 1
    h = lax.dot_general(x, w1, (((last,), (0,)), ((), ())))
    h = _activation(act, lax.add(h, lax.broadcast_in_dim(b1, h.shape, (last,))))
    y = lax.dot_general(h, w2, (((last,), (0,)), ((), ())))
    return lax.add(x, lax.add(y, lax.broadcast_in_dim(b2, y.shape, (last,))))


def np_mlp_block(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray,
                 act: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x + (_np_activation(act, x @ w1 + b1) @ w2 + b2)


def topk_routing(x: Any, k: int) -> Any:
    """Mixture-of-experts gates over the last axis: softmax, keep the top k, renormalize,
    scatter back to a dense [..., experts] gate array (zeros off the chosen experts)."""
    last = x.ndim - 1
    probs = softmax(x, last)
    vals, idx = lax.top_k(probs, k)
    total = lax.broadcast_in_dim(lax.reduce_sum(vals, (last,)), vals.shape, tuple(range(last)))
    weights = lax.div(vals, total)
    experts = lax.broadcasted_iota(jnp.int32, (*x.shape[:-1], k, x.shape[-1]), x.ndim)
    onehot = lax.eq(lax.broadcast_in_dim(idx, experts.shape, tuple(range(x.ndim))), experts)
    spread = lax.select(onehot, lax.broadcast_in_dim(weights, experts.shape, tuple(range(x.ndim))),
                        jnp.zeros(experts.shape, x.dtype))
    return lax.reduce_sum(spread, (last,))


def np_topk_routing(x: np.ndarray, k: int, order_key: Any) -> np.ndarray:
    """`order_key(probs)`: an integer key in lax.top_k's order (ops.total_order_key)."""
    probs = np_softmax(x, -1)
    key = order_key(np.where(np.isnan(probs), np.nan, probs))
    idx = np.argsort(-key, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(probs, idx, -1)
    with np.errstate(all="ignore"):
        weights = vals / np.sum(vals, axis=-1, keepdims=True)
    out = np.zeros(x.shape, np.float64)
    np.put_along_axis(out, idx, weights, -1)
    return out
