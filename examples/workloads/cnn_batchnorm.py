"""CNN training step with batch norm in training mode (batch statistics, running averages)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"c1": (rng.normal(size=(3, 3, 3, 8)) * 0.2).astype(np.float32),
            "c2": (rng.normal(size=(3, 3, 8, 16)) * 0.1).astype(np.float32),
            "g1": np.ones(8, np.float32), "b1": np.zeros(8, np.float32),
            "g2": np.ones(16, np.float32), "b2": np.zeros(16, np.float32),
            "head": (rng.normal(size=(16, 5)) * 0.2).astype(np.float32)}


def batch_norm(x: jax.Array, gamma: jax.Array, beta: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    mean = x.mean(axis=(0, 1, 2))
    var = x.var(axis=(0, 1, 2))
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gamma + beta, mean, var


def loss_fn(p: dict[str, jax.Array], x: jax.Array, labels: jax.Array):  # noqa: ANN201
    conv = lambda h, w: jax.lax.conv_general_dilated(  # noqa: E731
        h, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h, m1, v1 = batch_norm(conv(x, p["c1"]), p["g1"], p["b1"])
    h = jax.lax.reduce_window(jax.nn.relu(h), -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h, m2, v2 = batch_norm(conv(h, p["c2"]), p["g2"], p["b2"])
    logits = jax.nn.relu(h).mean(axis=(1, 2)) @ p["head"]
    loss = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))
    return loss, (m1, v1, m2, v2)


@jax.jit
def train_step(p, running, x, labels):  # noqa: ANN001, ANN201 (pytrees)
    (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, x, labels)
    p = jax.tree.map(lambda a, g: a - 0.05 * g, p, grads)
    running = jax.tree.map(lambda r, s: 0.9 * r + 0.1 * s, running, stats)
    return p, running, loss


def main(steps: int = 2) -> float:
    rng = np.random.default_rng(2)
    p = init(rng)
    running = (np.zeros(8, np.float32), np.ones(8, np.float32), np.zeros(16, np.float32), np.ones(16, np.float32))
    x = rng.normal(size=(8, 12, 12, 3)).astype(np.float32)
    labels = rng.integers(0, 5, size=8).astype(np.int32)
    for _ in range(steps):
        p, running, loss = train_step(p, running, x, labels)
    return float(loss)


if __name__ == "__main__":
    print(main())
