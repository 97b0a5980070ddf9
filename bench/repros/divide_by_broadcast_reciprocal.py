"""XLA:CPU (jaxlib 0.10.2): a division whose operands are broadcasts is rewritten into a
multiplication by the reciprocal, x * (1 / y), in every configuration (default, O0, no
fusion emitters). For |y| beyond about 8.5e37 the reciprocal is subnormal in f32 and is
flushed to zero, so x / y gives 0 where it is about 1; below that it is an ulp off
(f16 1.0009765625 for 60000 / 60000.5, f32 0.99999994 for 4.2e37 / 4.2e37).

    b = broadcast_in_dim(x, (n, 7), (0,));  b / (|b| + 0.5)

is 1.0 for x = 1.69e38 op by op, and 0.0 compiled. The same arithmetic without the
broadcast, compiled, is 1.0. Found by the clean run of seed 7 (program s7-i9253): every
target gave 0 in 1,176 of 1,792 elements of one output. The divisor of a softmax or a
normalization is such a broadcast.

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def with_broadcast(v):
    b = lax.broadcast_in_dim(v, (v.shape[0], 7), (0,))
    return b / (lax.abs(b) + jnp.asarray(0.5, v.dtype))


def plain(v):
    return v / (lax.abs(v) + jnp.asarray(0.5, v.dtype))


def main() -> int:
    print(f"jax {jax.__version__}")
    wrong = 0
    for dtype in (jnp.bfloat16, np.float32):
        x = np.array([1.69e38, -1.69e38, 2.0], np.float32).astype(dtype)
        compiled = np.asarray(jax.jit(with_broadcast)(x), np.float32)[:, 0]
        expected = np.asarray(plain(x), np.float32)  # op by op
        print(f"{np.dtype(dtype).name}: x / (|x| + 0.5) for x = {x.astype(np.float32).tolist()}: "
              f"compiled {compiled.tolist()}, op by op {expected.tolist()}")
        wrong += int(np.sum(np.abs(compiled - expected) > 0.01))
    hlo = jax.jit(with_broadcast).lower(np.ones(4, np.float32)).compile().as_text()
    print("optimized HLO divides then multiplies:", "divide" in hlo and "multiply" in hlo)
    if wrong:
        print(f"BUG: {wrong} elements of x / (|x| + 0.5) are not about 1")
        return 1
    print("OK: the division is exact enough")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
