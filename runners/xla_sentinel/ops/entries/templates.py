"""The `templates` program shape: the blocks real models are built from (softmax, layer
norm, masked attention, residual MLP, top-k routing), with their float64 numpy forms. Drawn
among random ops, a template puts a realistic neighbourhood in front of XLA's fusion decisions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.names import FLOATS
from xla_sentinel.ops.numpy_forms import float_info, total_order_key
from xla_sentinel.ops.spec import APPROX, SUMS, Attrs, Ctx, OpDef, Plan, Val, axis, needs_rank

# Each template holds transcendental functions and sums, so it is tagged as both: the
# noise model scales its rounding by its terms.
COMPOSITE = APPROX | SUMS
LAYER_NORM_EPS = 1e-5
ACTIVATIONS = ("relu", "tanh", "silu")


def np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        probs: np.ndarray = e / np.sum(e, axis=axis, keepdims=True)
    return probs


def np_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta."""
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=-1, keepdims=True) / x.shape[-1]
        centred = x - mean
        var = np.sum(centred * centred, axis=-1, keepdims=True) / x.shape[-1]
        normed: np.ndarray = centred * (1.0 / np.sqrt(var + LAYER_NORM_EPS)) * gamma + beta
    return normed


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, low: float) -> np.ndarray:
    """softmax(q . k / sqrt(D), masked positions at `low`) . v, as the builder computes it."""
    with np.errstate(all="ignore"):
        scores = np.matmul(q, np.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(q.shape[-1]))
        p = np_softmax(np.where(mask, scores, low), -1)
        attended: np.ndarray = np.matmul(p, v)
    return attended


def _np_activation(kind: str, h: np.ndarray) -> np.ndarray:
    activated: np.ndarray
    if kind == "relu":
        activated = np.maximum(h, 0.0)
    elif kind == "tanh":
        activated = np.tanh(h)
    else:
        activated = h * (1.0 / (1.0 + np.exp(-h)))
    return activated


def np_mlp_block(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray,
                 act: str) -> np.ndarray:
    """x + act(x @ w1 + b1) @ w2 + b2 over the last axis of x."""
    with np.errstate(all="ignore"):
        out: np.ndarray = x + (_np_activation(act, x @ w1 + b1) @ w2 + b2)
    return out


def _ranked(probs: np.ndarray) -> np.ndarray:
    """Indices along the last axis in lax.top_k's order: largest first, ties to the lower index."""
    key = total_order_key(np.where(np.isnan(probs), np.nan, probs))
    return np.argsort(-key, axis=-1, kind="stable")


def _gates(probs: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The chosen experts' probabilities renormalized, scattered back to a dense array."""
    vals = np.take_along_axis(probs, idx, -1)
    with np.errstate(all="ignore"):
        weights = vals / np.sum(vals, axis=-1, keepdims=True)
    out = np.zeros(probs.shape, np.float64)
    np.put_along_axis(out, idx, weights, -1)
    return out


def np_topk_routing(x: np.ndarray, k: int) -> np.ndarray:
    """Mixture-of-experts gates over the last axis: softmax, keep the top k in lax.top_k's
    order, renormalize, scatter back to a dense gate array."""
    probs = np_softmax(x, -1)
    return _gates(probs, _ranked(probs)[..., :k])


def rank_bound(x: np.ndarray) -> np.ndarray:
    """Per element, in units of u of the program's dtype, how far legal rounding can move a
    softmax probability relative to the others of its row: x - max(x) rounded (|x - max|,
    an absolute error that exp makes relative), exp one ulp (2), the division half an
    ulp (1). The row's sum divides every element alike, so it moves no ranking."""
    with np.errstate(all="ignore"):
        bound = np.abs(x - np.max(x, axis=-1, keepdims=True)) + 3.0
    # Not finite (a NaN or inf in the row): its probability is 0 or NaN and moves nothing.
    return np.where(np.isfinite(bound), bound, 0.0)


def _shared_by_equals(values: np.ndarray, step: np.ndarray) -> np.ndarray:
    """`step` with equal values of a row (last axis) given one step, the first of theirs in
    sorted order. Equal probabilities (equal logits) are computed alike by every
    configuration and tie to the lower index everywhere, so no sample may part them."""
    order = np.argsort(values, axis=-1, kind="stable")
    ranked = np.take_along_axis(values, order, -1)
    n = values.shape[-1]
    starts = np.ones(ranked.shape, bool)
    starts[..., 1:] = ranked[..., 1:] != ranked[..., :-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0), axis=-1)
    shared = np.empty_like(step)
    np.put_along_axis(shared, order, np.take_along_axis(np.take_along_axis(step, order, -1), first, -1), -1)
    return shared


def _within_rounding(p_a: np.ndarray, b_a: np.ndarray, p_b: np.ndarray, b_b: np.ndarray,
                     u: float) -> np.ndarray:
    """Probabilities a > b that legal rounding can bring together (each moved by u times its
    `rank_bound`). Strictly apart: an exact tie (equal logits) goes to the lower index in
    every configuration, so it is no near-tie."""
    with np.errstate(all="ignore"):
        within: np.ndarray = (p_a > p_b) & (p_a - p_b <= u * (b_a * p_a + b_b * p_b))
    return within


def near_tie_rows(x: np.ndarray, k: int, u: float) -> np.ndarray:
    """Per row of logits x (last axis), whether topk_routing's choice of k experts in float64
    is within rounding of a tie: some chosen probability and some left out (not equal) that
    legal rounding of the program's dtype (unit roundoff u) can bring together, so that a
    legal configuration chooses otherwise (s31-i184, f16: 13 of the 192 rows of its k = 3
    output). Exactly the rows whose choice the noise model's samples may flip
    (noisy_topk_routing)."""
    probs = np_softmax(x, -1)
    n = probs.shape[-1]
    if k >= n:
        return np.zeros(probs.shape[:-1], bool)
    bound = rank_bound(x)
    order = _ranked(probs)
    p, b = np.take_along_axis(probs, order, -1), np.take_along_axis(bound, order, -1)
    # Every chosen probability (axis -2) against every one left out (axis -1).
    near = _within_rounding(p[..., :k, None], b[..., :k, None], p[..., None, k:], b[..., None, k:], u)
    # An array for one row too (numpy's any gives a scalar there), as the k >= n branch.
    return np.asarray(near.any(axis=(-2, -1)))


def near_tie_ranks(x: np.ndarray, k: int, u: float) -> np.ndarray:
    """Per row of x (last axis), whether the order of lax.top_k's k largest (the indices it
    returns) is within rounding of a tie: two neighbours in that order, the k-th and the
    next included, not equal and within one ulp of x's dtype each (2u times their
    magnitudes, the most one op's rounding moves a value, as the noise model's directed
    samples move a transcendental's). Rounded to one value they tie, and lax.top_k takes
    the lower index: an f16 exp of 0.001 and of the next f16 above it did so op by op
    where float64 ranks the second first."""
    x = np.asarray(x, np.float64)
    n = x.shape[-1]
    ranked = np.take_along_axis(x, _ranked(x), -1)[..., :min(k + 1, n)]
    a, b = ranked[..., :-1], ranked[..., 1:]
    with np.errstate(all="ignore"):
        near = (a > b) & (a - b <= 2.0 * u * (np.abs(a) + np.abs(b)))
    return np.asarray(near.any(axis=-1))


def _top_k_near_ties(attrs: Attrs, xs: list[np.ndarray], u: float, exact: bool) -> np.ndarray:
    """top_k's near-tie rows: of its indices output only, and only where its operand may
    move (an exact operand ranks alike in every configuration)."""
    if attrs["output"] != 1 or exact:
        return np.zeros(np.shape(xs[0])[:-1], bool)
    return near_tie_ranks(xs[0], attrs["k"], u)


def noisy_topk_routing(x: np.ndarray, k: int, u: float, sign: float,
                       rng: np.random.Generator | None) -> np.ndarray:
    """topk_routing as the noise model sees it: the choice of experts is inside the
    template, so perturbing the template's output (the gates) never flips it, where a
    rounding of the probabilities legally does (clean-run s31-i184, f16: two
    probabilities 1.6u apart rounded to one value, and lax.top_k took the lower index).

    `rng` set: a random sample, each probability moved by sign * u * U(-1, 1) times its
    `rank_bound` before the choice. `rng` None: a directed sample, which resolves every
    near-tie at the top-k boundary (the k-th and (k+1)-th probabilities within both
    their bounds) the other way: with `sign` > 0 where the element left out has the lower
    index (two values rounded equal go to it), with `sign` < 0 where it has the higher."""
    probs = np_softmax(x, -1)
    bound = rank_bound(x)
    if rng is not None:
        step = rng.uniform(-1.0, 1.0, size=probs.shape)
        with np.errstate(all="ignore"):
            moved = probs * (1.0 + sign * u * _shared_by_equals(probs, step) * bound)
        return _gates(moved, _ranked(moved)[..., :k])
    order = _ranked(probs)
    idx = order[..., :k].copy()
    if k >= probs.shape[-1]:
        return _gates(probs, idx)
    inside, outside = order[..., k - 1:k], order[..., k:k + 1]
    p_in, p_out = np.take_along_axis(probs, inside, -1), np.take_along_axis(probs, outside, -1)
    b_in, b_out = np.take_along_axis(bound, inside, -1), np.take_along_axis(bound, outside, -1)
    near = _within_rounding(p_in, b_in, p_out, b_out, u)
    lower = outside < inside
    swap = near & (lower if sign > 0 else ~lower)
    idx[..., k - 1:k] = np.where(swap, outside, inside)
    return _gates(probs, idx)


def _finite_abs(a: Any) -> np.ndarray:
    a = np.asarray(a, np.float64)
    return np.where(np.isfinite(a), np.abs(a), 0.0)


def _attention_terms(attrs: Attrs, q: Any, k: Any, v: Any, mask: Any) -> list[np.ndarray]:
    # The scores' dot, before its scaling: q . k adds products that may leave the range
    # although the scaled score, or the softmax after it, does not (s31-i125).
    return [_finite_abs(q) @ np.swapaxes(_finite_abs(k), -1, -2)]


def _layer_norm_terms(attrs: Attrs, x: Any, gamma: Any, beta: Any) -> list[np.ndarray]:
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        centred = x - np.sum(x, axis=-1, keepdims=True) / x.shape[-1]
        return [np.sum(_finite_abs(x), axis=-1), np.sum(_finite_abs(centred * centred), axis=-1)]


def _mlp_block_terms(attrs: Attrs, x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        h = _np_activation(attrs["act"], np.asarray(x, np.float64) @ np.asarray(w1, np.float64)
                           + np.asarray(b1, np.float64))
    return [_finite_abs(x) @ _finite_abs(w1) + _finite_abs(b1), _finite_abs(h) @ _finite_abs(w2) + _finite_abs(b2)]


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
        "low": float(float_info(NP_DTYPES[q.dtype]).min)}


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
          tags=COMPOSITE, family="templates",
          numpy=lambda a, x, w1, b1, w2, b2: np_mlp_block(x, w1, b1, w2, b2, a["act"])),
    # Discrete: top-k picks experts by comparing probabilities, which legal rounding can flip.
    OpDef(name="topk_routing", category="composite", dtypes=FLOATS, plan=needs_rank(1, _plan_topk_routing),
          discrete=True, tags=COMPOSITE, family="templates", numpy=lambda a, x: np_topk_routing(x, a["k"])),
]


# The sums inside a template, in float64 (finite terms' magnitudes, as for a plain dot):
# an overflow there is legal in one configuration and not in another, and the template's
# result, normalized by a softmax, need not show it (evaluate.overflow_prone).
INNER_TERMS: dict[str, Callable[..., list[np.ndarray]]] = {
    "attention": _attention_terms,
    "layer_norm": _layer_norm_terms,
    "mlp_block": _mlp_block_terms,
}

# Templates that make a discrete choice inside: the noise model evaluates them with the
# values they choose by perturbed (attrs, operands, u, sign, rng or None for directed).
NOISY_FORMS: dict[str, Callable[[dict[str, Any], list[np.ndarray], float, float, np.random.Generator | None],
                                np.ndarray]] = {
    "topk_routing": lambda attrs, xs, u, sign, rng: noisy_topk_routing(xs[0], attrs["k"], u, sign, rng),
}

# Ops that rank by lax.top_k's order, whose result has rows that legal rounding decides
# either way: (attrs, operands in float64, u of the operand's dtype, whether the operand is
# exact, ops/exact.py) -> per row (the result's leading axes), whether its float64 choice is
# within rounding of a tie. Such rows are left undetermined (judge/oracle.py
# `near_tie_undetermined`), as rows a NaN's open sign decides are, so that one legal flip
# does not lift the threshold of every other row of the output (topk_routing's gates,
# judged normwise), or excuse the whole output (top_k's indices, a float-dependent integer
# that passes whole where any sample or configuration differs). top_k is declared here beside
# the template that holds it: an exact operand moves in no configuration, and its values
# output moves by the rounding its threshold allows already.
NEAR_TIES: dict[str, Callable[[dict[str, Any], list[np.ndarray], float, bool], np.ndarray]] = {
    "topk_routing": lambda attrs, xs, u, exact: near_tie_rows(xs[0], attrs["k"], u),
    "top_k": _top_k_near_ties,
}

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
