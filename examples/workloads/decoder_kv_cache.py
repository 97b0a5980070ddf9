"""One autoregressive decoder step: project the new token, write its key and value into the
KV cache at the current position (dynamic_update_slice), attend over the filled prefix."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

D, HEADS, MAX_LEN, BATCH, VOCAB = 32, 4, 24, 2, 50


def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
    w = lambda *s: (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32)  # noqa: E731
    return {"emb": w(VOCAB, D), "qkv": w(D, 3 * D), "out": w(D, D), "head": w(D, VOCAB)}


@jax.jit
def decode_step(p, cache_k, cache_v, tokens, pos):  # noqa: ANN001, ANN201 (pytrees)
    x = p["emb"][tokens]  # [B, D]
    q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
    split = lambda t: t.reshape(BATCH, HEADS, 1, D // HEADS)  # noqa: E731
    cache_k = jax.lax.dynamic_update_slice(cache_k, split(k), (0, 0, pos, 0))
    cache_v = jax.lax.dynamic_update_slice(cache_v, split(v), (0, 0, pos, 0))
    scores = (split(q) @ cache_k.transpose(0, 1, 3, 2))[:, :, 0] / np.sqrt(D // HEADS)  # [B, H, L]
    scores = jnp.where(jnp.arange(MAX_LEN) <= pos, scores, -jnp.inf)
    att = (jax.nn.softmax(scores, axis=-1)[:, :, None] @ cache_v)[:, :, 0].reshape(BATCH, D)
    logits = (x + att @ p["out"]) @ p["head"]
    return cache_k, cache_v, jnp.argmax(logits, axis=-1).astype(jnp.int32), logits


def main(steps: int = 4) -> np.ndarray:
    rng = np.random.default_rng(4)
    p = init(rng)
    cache_k = np.zeros((BATCH, HEADS, MAX_LEN, D // HEADS), np.float32)
    cache_v = np.zeros_like(cache_k)
    tokens = rng.integers(0, VOCAB, size=BATCH).astype(np.int32)
    for pos in range(steps):
        cache_k, cache_v, tokens, logits = decode_step(p, cache_k, cache_v, tokens, np.int32(pos))
    return np.asarray(tokens)


if __name__ == "__main__":
    print(main())
