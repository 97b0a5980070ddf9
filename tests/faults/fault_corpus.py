"""Small, varied jax programs that the fault-suite tests compile: each fault must leave
the ones outside its pattern untouched."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

_rng = np.random.default_rng(7)


def _f32(*shape: int) -> np.ndarray:
    return _rng.uniform(-2, 2, shape).astype(np.float32)


def _s32(*shape: int) -> np.ndarray:
    return _rng.integers(-50, 50, shape).astype(np.int32)


def _while_double(x: jax.Array) -> jax.Array:
    def body(state: tuple) -> tuple:
        i, v = state
        return i + 1, v * 2.0

    return lax.while_loop(lambda s: s[0] < 3, body, (0, x))[1]


def _scan_rows(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return lax.scan(lambda carry, row: (carry + row, carry * row), jnp.zeros(x.shape[1]), x)


def _max_pool(x: jax.Array) -> jax.Array:
    return lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 1), "VALID")


def _scatter_constant_rows(x: jax.Array, u: jax.Array) -> jax.Array:
    # Eleven row indices as one s32[11,1] constant: the default HLO printer shortens it
    # to `{...}`, which once made the text round trip read garbage indices.
    rows = jnp.asarray(np.array([6, 9, 2, 10, 3, 5, 7, 11, 8, 1, 0], np.int32)[:, None])
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    return lax.scatter(x, rows, u, dn, unique_indices=True)


CORPUS: dict[str, tuple[Callable, tuple[np.ndarray, ...]]] = {
    "elementwise_arith": (lambda x, y: x * y + 1 - x / (y * y + 1), (_f32(8, 8), _f32(8, 8))),
    "sin_cos": (lambda x, y: jnp.sin(x) + jnp.cos(y), (_f32(6, 6), _f32(6, 6))),
    "sum_of_squares": (lambda x: jnp.sum(x * x, axis=1), (_f32(16, 8),)),
    "matmul": (lambda x, y: x @ y, (_f32(32, 32), _f32(32, 32))),
    "matmul_tanh_sum": (lambda x, y: jnp.tanh(x @ y).sum(axis=0), (_f32(64, 64), _f32(64, 64))),
    "int_arith": (lambda k: k * 3 + k // 2, (_s32(10),)),
    "int_bitwise": (lambda k: (k & 5) ^ (k << 1), (_s32(10),)),
    "unsigned_shift": (lambda k: lax.shift_right_logical(k, np.uint32(2)),
                       (_rng.integers(0, 1000, 9).astype(np.uint32),)),
    "fori_affine": (lambda x: lax.fori_loop(0, 4, lambda i, c: c * 2.0 + 1.0, x),
                             (_f32(4, 6),)),
    "cond_scale": (lambda p, x: lax.cond(p > 0, lambda v: v * 0.5, lambda v: v + 2.0, x),
                             (np.int32(1), _f32(5, 4))),
    "while_double": (_while_double, (_f32(3, 3),)),
    "fori_int": (lambda k: lax.fori_loop(0, 3, lambda i, c: c * 3 + i, k), (_s32(6),)),
    "transpose_non_square": (lambda x: x.reshape(4, 6).T + 1.0, (_f32(24),)),
    "reduce_min": (lambda x: jnp.min(x, axis=0), (_f32(6, 5),)),
    "argmax": (lambda x: jnp.argmax(x, axis=1), (_f32(6, 5),)),
    "sort": (jnp.sort, (_f32(12),)),
    "cumsum": (lambda x: jnp.cumsum(x, axis=0), (_f32(7, 3),)),
    "gather": (lambda x, i: x[i], (_f32(10, 3), np.array([0, 3, 9], np.int32))),
    "concat_single_row": (lambda x, y: jnp.concatenate([x, y[:1]]), (_f32(3, 4), _f32(3, 4))),
    "pad": (lambda x: jnp.pad(x, 1) * 2.0, (_f32(3, 4),)),
    "where_gt": (lambda x, y: jnp.where(x > y, x, y), (_f32(4, 4), _f32(4, 4))),
    "converts": (lambda x, k: (x.astype(jnp.float16), k.astype(jnp.float32) * 0.5),
                 (_f32(5), _s32(5))),
    "dus_intermediate": (lambda x, y, i: lax.dynamic_update_slice(x * 2.0, y[:2], (i, 0)),
                         (_f32(4, 4), _f32(4, 4), np.int32(1))),
    "even_minor_multiply": (lambda x, y: x * y - 1.0, (_f32(5, 8), _f32(5, 8))),
    "scan_rows": (_scan_rows, (_f32(5, 4),)),
    "sigmoid": (jax.nn.sigmoid, (_f32(4, 4),)),
    "bf16_arith": (lambda x: x.astype(jnp.bfloat16) * 3 + 1, (_f32(4, 4),)),
    "max_pool": (_max_pool, (_f32(6, 6),)),
    "top_k": (lambda x: lax.top_k(x, 3), (_f32(4, 8),)),
    "sqrt_rsqrt": (lambda x: jnp.sqrt(jnp.abs(x)) + lax.rsqrt(jnp.abs(x) + 1.0), (_f32(6, 4),)),
    "scatter_constant_rows": (_scatter_constant_rows, (_f32(12, 5), _f32(11, 5))),
}
