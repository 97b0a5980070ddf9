"""MLP classifier training step with a hand-written Adam optimizer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def init(rng: np.random.Generator, sizes: tuple[int, ...] = (32, 64, 64, 10)) -> list[dict[str, np.ndarray]]:
    return [{"w": (rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32), "b": np.zeros(b, np.float32)}
            for a, b in zip(sizes[:-1], sizes[1:], strict=True)]


def loss_fn(params: list[dict[str, jax.Array]], x: jax.Array, labels: jax.Array) -> jax.Array:
    h = x
    for layer in params[:-1]:
        h = jax.nn.gelu(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


@jax.jit
def train_step(params, m, v, step, x, labels):  # noqa: ANN001, ANN201 (pytrees)
    b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
    loss, grads = jax.value_and_grad(loss_fn)(params, x, labels)
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    t = step + 1
    mhat = jax.tree.map(lambda m: m / (1 - b1 ** t), m)
    vhat = jax.tree.map(lambda v: v / (1 - b2 ** t), v)
    params = jax.tree.map(lambda p, a, b: p - lr * a / (jnp.sqrt(b) + eps), params, mhat, vhat)
    return params, m, v, t, loss


def main(steps: int = 3) -> float:
    rng = np.random.default_rng(0)
    params = init(rng)
    m = jax.tree.map(np.zeros_like, params)
    v = jax.tree.map(np.zeros_like, params)
    step = np.float32(0)
    x = rng.normal(size=(16, 32)).astype(np.float32)
    labels = rng.integers(0, 10, size=16).astype(np.int32)
    for _ in range(steps):
        params, m, v, step, loss = train_step(params, m, v, step, x, labels)
    return float(loss)


if __name__ == "__main__":
    print(main())
