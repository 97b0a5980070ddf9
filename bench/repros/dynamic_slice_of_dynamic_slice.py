"""XLA:CPU (jaxlib 0.10.2): a dynamic_slice of a dynamic_slice is merged into one slice
whose start is the sum of both starts, clamped once; the inner slice's own clamp is lost.

lax.dynamic_slice clamps each start index to [0, operand_dim - size]. x[34], then a
30-slice at 16 (clamped to 4: x[4:34]), then a 4-slice of that at 16 (x[20:24]). jit
gives x[30:34]: clamp(16 + 16, 0, 30). Any compiled configuration (the float64 jit
reference too, so that reference hid it); op by op and numpy are right. Found by the
numpy float64 reference (issue 16), program s5-i4 of a 40-program campaign. A broadcast
between the two slices does not stop it (s39-i717 of a 3,000-program clean run).

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import numpy as np
from jax import lax


def f(x, i):
    inner = lax.dynamic_slice(x, (i,), (30,))
    return lax.dynamic_slice(inner, (i,), (4,))


def through_broadcast(x, i):
    """The same with a broadcast between the slices (s39-i717): XLA moves the outer slice
    through the broadcast, then merges the two."""
    inner = lax.broadcast_in_dim(lax.dynamic_slice(x, (i,), (30,)), (30, 5), (0,))
    return lax.dynamic_slice(inner, (i, np.int32(0)), (4, 5))[:, 0]


def main() -> int:
    print(f"jax {jax.__version__}")
    x = np.arange(34, dtype=np.float32)
    i = np.int32(16)
    want = x[4:34][16:20]
    bad = 0
    for name, fn in (("slice of a slice", f), ("slice of a broadcast of a slice", through_broadcast)):
        got = np.asarray(jax.jit(fn)(x, i))
        print(f"{name}: expected {want}, jit gives {got}")
        bad += not np.array_equal(got, want)
    if bad:
        print("BUG: the inner dynamic_slice's clamp is lost")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
