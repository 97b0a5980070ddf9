"""Workloads that hit real XLA:CPU bugs of jaxlib 0.10.2, written as a user writes a job:
a jitted step of its natural inputs, helpers behind nested jit (pjit: a `func.call`),
`jax.checkpoint` and `custom_jvp` as jax lowers them, some of them a few ops inside a
larger model step (a decoder block, an Adam update). Each is the reproducer in
bench/repros/ (or a known bug of runners/xla_sentinel/triage/known_bugs.yaml) where a
real program meets it.

`xla-sentinel record --with-values --out DIR -- python corpus_workloads.py NAME` records
one; tests/bisect/corpus.py records them all into tests/bisect/data/corpus/ and holds the
table of what each must bisect to. Run alone, a workload prints its step's outputs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

Step = tuple[Callable[..., Any], tuple[Any, ...]]


def _layer_norm(x: Any, scale: Any) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * scale


def window_slice() -> Step:
    """bench/repros/dynamic_slice_of_dynamic_slice.py: a window of 30 rows of a cache at
    `pos` (clamped to 4), taken by a jitted helper, and 4 rows of that window at `pos`:
    jit reads rows 32.. of the cache, not 20..; the inner clamp is lost."""

    @jax.jit
    def window(cache: Any, pos: Any) -> Any:
        return lax.dynamic_slice(cache, (pos, 0), (30, cache.shape[1]))

    def step(cache: Any, pos: Any) -> Any:
        w = window(cache, pos)
        return lax.dynamic_slice(w, (pos, 0), (4, cache.shape[1]))

    cache = np.arange(34 * 8, dtype=np.float32).reshape(34, 8)
    return step, (cache, np.int32(16))


def decoder_kv_window() -> Step:
    """The same two slices in a decoder step with a KV cache: embed the token, layer norm,
    q/k/v projections, the cache updated at `pos`, local attention over a 4-row window
    of a 30-row window of the cache (both slices at `pos`, the outer in a jitted helper
    under jax.checkpoint), an MLP with gelu, residuals. Hundreds of ops, two wrong."""
    d, heads, length = 16, 2, 34
    rng = np.random.default_rng(1)

    @jax.jit
    def window(cache: Any, pos: Any) -> Any:
        return lax.dynamic_slice(cache, (pos, 0), (30, d))

    @jax.checkpoint
    def local(cache: Any, pos: Any) -> Any:
        return lax.dynamic_slice(window(cache, pos), (pos, 0), (4, d))

    def step(params: dict[str, Any], token: Any, k_cache: Any, v_cache: Any, pos: Any) -> Any:
        x = params["embed"][token]
        h = _layer_norm(x, params["ln1"])
        q, k, v = h @ params["wq"], h @ params["wk"], h @ params["wv"]
        k_cache = lax.dynamic_update_slice(k_cache, k[None], (pos, 0))
        v_cache = lax.dynamic_update_slice(v_cache, v[None], (pos, 0))
        keys, values = local(k_cache, pos), local(v_cache, pos)
        qh, kh, vh = (a.reshape(-1, heads, d // heads) for a in (q[None], keys, values))
        scores = jnp.einsum("qhd,khd->hqk", qh, kh) / np.sqrt(d // heads)
        att = jax.nn.softmax(scores, axis=-1)
        o = jnp.einsum("hqk,khd->qhd", att, vh).reshape(d)
        x = x + o @ params["wo"]
        h = _layer_norm(x, params["ln2"])
        x = x + jax.nn.gelu(h @ params["w1"]) @ params["w2"]
        return x, k_cache, v_cache

    params = {"embed": rng.normal(size=(11, d)), "ln1": np.ones(d), "ln2": np.ones(d),
              **{w: rng.normal(size=(d, d)) / 4 for w in ("wq", "wk", "wv", "wo")},
              "w1": rng.normal(size=(d, 4 * d)) / 4, "w2": rng.normal(size=(4 * d, d)) / 8}
    params = {k: np.asarray(v, np.float32) for k, v in params.items()}
    k_cache, v_cache = (rng.normal(size=(length, d)).astype(np.float32) for _ in range(2))
    return step, (params, np.int32(3), k_cache, v_cache, np.int32(16))


def shift_history() -> Step:
    """bench/repros/shift_set_then_reshape.py: a history register shifted by one
    (`h.at[1:].set(h[:-1])`, a scatter) and handed on as a column: every row x[0]."""

    def step(history: Any, counts: Any) -> Any:
        shifted = history.at[1:].set(history[:-1])
        return shifted[:, None], (counts * 2).sum()

    return step, (np.array([12, -7, -3, -3, 12, 13, 0], np.int32), np.arange(3, dtype=np.int32))


def adam_clip_nan() -> Step:
    """bench/repros/reduce_max_drops_nan.py in an optimizer update: Adam with gradients
    clipped by their largest magnitude, over a 64x64 weight (4,096 elements) whose
    gradient holds one NaN; the max drops it (YNNPACK's reduction), so every other
    parameter moves as if the step were fine where numpy's update is NaN throughout."""

    def step(params: dict[str, Any], grads: dict[str, Any], m: dict[str, Any], v: dict[str, Any],
             count: Any) -> Any:
        leaves = jax.tree.leaves(grads)
        g_max = jnp.max(jnp.stack([jnp.max(jnp.abs(g)) for g in leaves]))
        scale = jnp.minimum(1.0, 1.0 / g_max)
        grads = jax.tree.map(lambda g: g * scale, grads)
        count = count + 1
        m = jax.tree.map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
        v = jax.tree.map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
        c1, c2 = 1 - 0.9 ** count, 1 - 0.999 ** count
        params = jax.tree.map(lambda p, a, b: p - 1e-3 * (a / c1) / (jnp.sqrt(b / c2) + 1e-8),
                              params, m, v)
        return params, m, v, count

    rng = np.random.default_rng(2)
    shapes = {"w1": (64, 64), "b1": (64,), "w2": (64, 8), "b2": (8,)}
    params = {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    grads = {k: (rng.normal(size=s) / 10).astype(np.float32) for k, s in shapes.items()}
    grads["w1"][17, 5] = np.nan
    zeros = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    return step, (params, grads, zeros, dict(zeros), np.float32(0))


def polar_features() -> Step:
    """bench/repros/atan2_subnormal_nan.py: polar features of 2-d points, the angle a
    custom_jvp helper; two subnormal coordinates give a NaN angle (numpy: pi/4)."""

    @jax.custom_jvp
    def angle(y: Any, x: Any) -> Any:
        return jnp.arctan2(y, x)

    @angle.defjvp
    def _angle_jvp(primals: Any, tangents: Any) -> Any:
        (y, x), (dy, dx) = primals, tangents
        r2 = x * x + y * y
        return angle(y, x), (x * dy - y * dx) / r2

    def step(points: Any, w: Any) -> Any:
        r = jnp.sqrt((points ** 2).sum(-1))
        theta = angle(points[:, 1], points[:, 0])
        features = jnp.stack([r, jnp.cos(theta), jnp.sin(theta), theta], -1)
        return jnp.tanh(features @ w)

    points = np.array([[1.0, 2.0], [-0.5, 0.25], [1e-40, 1e-40], [3.0, -1.0]], np.float32)
    w = np.random.default_rng(3).normal(size=(4, 6)).astype(np.float32)
    return step, (points, w)


def max_scaled_rows() -> Step:
    """bench/repros/divide_by_broadcast_reciprocal.py: rows scaled by their largest
    magnitude before a dense layer; the divisor is a broadcast, the division becomes a
    multiplication by its reciprocal, which is flushed to zero for rows near 1.7e38."""

    def step(x: Any, w: Any, b: Any) -> Any:
        scaled = x / jnp.max(jnp.abs(x), axis=-1, keepdims=True)
        return jax.nn.relu(scaled @ w + b), scaled

    x = np.array([[1.69e38, -1.69e38, 2.0, 1.0], [0.5, -2.0, 1.0, 4.0]], np.float32)
    rng = np.random.default_rng(4)
    return step, (x, rng.normal(size=(4, 3)).astype(np.float32), np.zeros(3, np.float32))


def scaled_rows_helper() -> Step:
    """The same scaling as max_scaled_rows in a jitted helper (a `func.call` that the
    suffix search stops at) beside a softmax and a dense layer: the divide is inside."""

    @jax.jit
    def scale_rows(x: Any) -> Any:
        return x / jnp.max(jnp.abs(x), axis=-1, keepdims=True)

    def step(x: Any, w: Any) -> Any:
        scaled = scale_rows(x)
        return jax.nn.softmax(scaled @ w, axis=-1), scaled.sum()

    x = np.array([[1.69e38, -1.69e38, 2.0, 1.0], [0.5, -2.0, 1.0, 4.0]], np.float32)
    return step, (x, np.random.default_rng(5).normal(size=(4, 3)).astype(np.float32))


def int8_mask() -> Step:
    """bench/repros/convert_s8_and_segfault.py: int32 quantization codes narrowed to int8
    and masked by a bit mask, `convert(s32 -> s8) & mask`, beside their energy; compiling
    it with the fusion emitters (default, O0) kills the process. The job runs with
    --xla_cpu_use_fusion_emitters=false (corpus.yaml records it so), where it compiles."""

    def step(codes: Any, mask: Any, scale: Any) -> Any:
        packed = lax.convert_element_type(codes, jnp.int8) & mask
        return packed, (codes * codes).sum() * scale

    codes = np.arange(-6, 6, dtype=np.int32) * 21
    return step, (codes, np.full(12, 0x5A, np.int8), np.float32(0.05))


def bool_mask_clamp() -> Step:
    """bench/repros/clamp_pred_no_fusion_emitters.py: a boolean mask clamped to
    [False, True] beside a masked mean; without fusion emitters the clamp of booleans
    does not compile."""

    def step(x: Any) -> Any:
        mask = lax.clamp(False, x > 0, True)
        return mask, jnp.where(mask, x, 0).sum() / jnp.maximum(mask.sum(), 1)

    return step, (np.array([0.5, -1.0, 2.0, -0.25, 3.0], np.float32),)


def attention_probs() -> Step:
    """Attention that returns its weights (to plot them, as users do): scores of queries
    against keys, scaled, the softmax in a jitted helper (a `func.call`), the weighted
    values. Sharp scores (logits up to about 100) are fine for a stable softmax; no real
    bug of jaxlib 0.10.2 breaks it, so the corpus replays this trace under the injected
    fault softmax_max_dropped (xla/faults/), which drops the max shift: exp overflows and
    rows of the weights are NaN, an `invariant_violated` finding (rows sum to one)."""
    rng = np.random.default_rng(4)

    @jax.jit
    def weights(scores: Any) -> Any:
        return jax.nn.softmax(scores, axis=-1)

    def step(q: Any, k: Any, v: Any) -> Any:
        probs = weights(q @ k.T * 8.0)
        return probs @ v, probs

    q = rng.normal(size=(6, 16)).astype(np.float32)
    k, v = (rng.normal(size=(12, 16)).astype(np.float32) for _ in range(2))
    return step, (q, k, v)


WORKLOADS: dict[str, Callable[[], Step]] = {f.__name__: f for f in (
    window_slice, decoder_kv_window, shift_history, adam_clip_nan, polar_features,
    max_scaled_rows, scaled_rows_helper, int8_mask, bool_mask_clamp, attention_probs)}


def main(name: str) -> None:
    step, args = WORKLOADS[name]()
    out = jax.jit(step)(*args)
    print(name, jax.tree.map(lambda a: np.asarray(a).ravel()[:8].tolist(), out))


if __name__ == "__main__":
    main(sys.argv[1])
