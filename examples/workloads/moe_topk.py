"""Mixture-of-experts layer: top_k gating, tokens gathered per expert up to a capacity,
expert MLPs, results scatter-added back weighted by their gates."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

D, EXPERTS, TOP_K, TOKENS, CAPACITY = 32, 4, 2, 32, 16


def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
    w = lambda *s: (rng.normal(size=s) / np.sqrt(s[-2])).astype(np.float32)  # noqa: E731
    return {"router": w(D, EXPERTS), "up": w(EXPERTS, D, 2 * D), "down": w(EXPERTS, 2 * D, D)}


@jax.jit
def moe(p: dict[str, jax.Array], x: jax.Array) -> tuple[jax.Array, jax.Array]:
    gates, experts = jax.lax.top_k(jax.nn.softmax(x @ p["router"]), TOP_K)  # [T, K]
    gates = gates / gates.sum(-1, keepdims=True)
    flat_expert = experts.reshape(-1)  # token t's k-th choice at t*K+k
    onehot = jax.nn.one_hot(flat_expert, EXPERTS, dtype=jnp.int32)
    slot = (jnp.cumsum(onehot, axis=0) - 1)[jnp.arange(flat_expert.size), flat_expert]
    keep = slot < CAPACITY
    token = jnp.arange(flat_expert.size) // TOP_K
    # Dispatch: the token index of each (expert, slot), TOKENS (out of range) where empty.
    table = jnp.full((EXPERTS, CAPACITY), TOKENS, jnp.int32)
    table = table.at[flat_expert, jnp.where(keep, slot, CAPACITY)].set(token, mode="drop")
    xe = jnp.take(x, table, axis=0, mode="fill", fill_value=0)  # [E, C, D]
    ye = jnp.einsum("ecf,efd->ecd", jax.nn.gelu(jnp.einsum("ecd,edf->ecf", xe, p["up"])), p["down"])
    weight = jnp.zeros((EXPERTS, CAPACITY), x.dtype).at[flat_expert, jnp.where(keep, slot, CAPACITY)].set(
        gates.reshape(-1), mode="drop")
    out = jnp.zeros_like(x).at[table.reshape(-1)].add((ye * weight[..., None]).reshape(-1, D), mode="drop")
    return out, experts


def main() -> np.ndarray:
    rng = np.random.default_rng(5)
    out, _ = moe(init(rng), rng.normal(size=(TOKENS, D)).astype(np.float32))
    return np.asarray(out)


if __name__ == "__main__":
    print(np.abs(main()).sum())
