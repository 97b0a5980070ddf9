"""XLA:CPU (jaxlib 0.10.2): a dynamic_slice of a dynamic_slice is merged into one slice
whose start is the sum of both starts, clamped once; the inner slice's own clamp is lost.

lax.dynamic_slice clamps each start index to [0, operand_dim - size]. x[34], then a
30-slice at 16 (clamped to 4: x[4:34]), then a 4-slice of that at 16 (x[20:24]). jit
gives x[30:34]: clamp(16 + 16, 0, 30). Any compiled configuration (the float64 jit
reference too, so that reference hid it); op by op and numpy are right. Found by the
numpy float64 reference (issue 16), program s5-i4 of a 40-program campaign.

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import numpy as np
from jax import lax


def f(x, i):
    inner = lax.dynamic_slice(x, (i,), (30,))
    return lax.dynamic_slice(inner, (i,), (4,))


def main() -> int:
    print(f"jax {jax.__version__}")
    x = np.arange(34, dtype=np.float32)
    i = np.int32(16)
    want = x[4:34][16:20]
    got = np.asarray(jax.jit(f)(x, i))
    print(f"expected {want}, jit gives {got}")
    if not np.array_equal(got, want):
        print("BUG: the inner dynamic_slice's clamp is lost")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
