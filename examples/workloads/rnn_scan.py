"""A GRU over a sequence with `lax.scan`: loss and gradient of a sequence regression."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

IN, HID, SEQ, BATCH = 8, 32, 12, 4


def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
    w = lambda *s: (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32)  # noqa: E731
    return {"wx": w(IN, 3 * HID), "wh": w(HID, 3 * HID), "b": np.zeros(3 * HID, np.float32), "out": w(HID, 1)}


def loss_fn(p: dict[str, jax.Array], xs: jax.Array, ys: jax.Array) -> jax.Array:
    def cell(h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        zx, rx, nx = jnp.split(x @ p["wx"] + p["b"], 3, axis=-1)
        zh, rh, nh = jnp.split(h @ p["wh"], 3, axis=-1)
        z, r = jax.nn.sigmoid(zx + zh), jax.nn.sigmoid(rx + rh)
        h = (1 - z) * jnp.tanh(nx + r * nh) + z * h
        return h, (h @ p["out"])[:, 0]

    _, preds = jax.lax.scan(cell, jnp.zeros((xs.shape[1], HID), xs.dtype), xs)
    return jnp.mean((preds - ys) ** 2)


@jax.jit
def step(p, xs, ys):  # noqa: ANN001, ANN201 (pytrees)
    loss, grads = jax.value_and_grad(loss_fn)(p, xs, ys)
    return jax.tree.map(lambda a, g: a - 0.1 * g, p, grads), loss


def main(steps: int = 2) -> float:
    rng = np.random.default_rng(3)
    p = init(rng)
    xs = rng.normal(size=(SEQ, BATCH, IN)).astype(np.float32)
    ys = np.sin(xs.sum(-1)).astype(np.float32)
    for _ in range(steps):
        p, loss = step(p, xs, ys)
    return float(loss)


if __name__ == "__main__":
    print(main())
