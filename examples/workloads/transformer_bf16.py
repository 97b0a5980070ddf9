"""A bf16 transformer block: pre-layer-norm, multi-head causal attention, GELU MLP."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

D, HEADS, SEQ, BATCH = 64, 4, 16, 2


def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
    def w(*shape: int) -> np.ndarray:
        return (rng.normal(size=shape) / np.sqrt(shape[0])).astype(jnp.bfloat16)
    return {"qkv": w(D, 3 * D), "out": w(D, D), "up": w(D, 4 * D), "down": w(4 * D, D),
            "ln1": np.ones(D, jnp.bfloat16), "ln2": np.ones(D, jnp.bfloat16)}


def layer_norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    # Statistics in f32, as mixed-precision models do.
    x32 = x.astype(jnp.float32)
    mean = x32.mean(-1, keepdims=True)
    var = ((x32 - mean) ** 2).mean(-1, keepdims=True)
    return ((x32 - mean) * jax.lax.rsqrt(var + 1e-5)).astype(x.dtype) * scale


@jax.jit
def block(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    b, s, _ = x.shape
    q, k, v = jnp.split(layer_norm(x, p["ln1"]) @ p["qkv"], 3, axis=-1)
    heads = lambda t: t.reshape(b, s, HEADS, D // HEADS).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = heads(q), heads(k), heads(v)
    scores = (q @ k.transpose(0, 1, 3, 2)).astype(jnp.float32) / np.sqrt(D // HEADS)
    mask = jnp.tril(jnp.ones((s, s), bool))
    probs = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1).astype(x.dtype)
    att = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, D)
    x = x + att @ p["out"]
    return x + jax.nn.gelu(layer_norm(x, p["ln2"]) @ p["up"]) @ p["down"]


def main() -> np.ndarray:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(BATCH, SEQ, D)).astype(jnp.bfloat16)
    return np.asarray(block(init(rng), x))


if __name__ == "__main__":
    print(main().astype(np.float32).std())
