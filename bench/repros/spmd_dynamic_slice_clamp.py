"""XLA SPMD partitioner (jaxlib 0.10.2): a dynamic_slice whose result is sharded along a
dimension where the start index must be clamped gives wrong values.

lax.dynamic_slice clamps each start to [0, operand_dim - size]: a 2-slice of x[4] at 3
starts at 2 and is [x2, x3]. With the result sharded over 2 devices (operand replicated)
both devices get x3: [x3, x3], as if each clamped the start plus its own offset instead of
adding its offset to the clamped start. In-range starts are right, and so is the same jit
without an output sharding. Shardy (the default) and GSPMD alike; right under
XLA_FLAGS=--xla_disable_hlo_passes=algsimp.
Found by xla-sentinel's SPMD campaign (seed 13, 4 devices, program s13-i14: a bool
[2,1,5] dynamic_slice of a [3,1,8] value at start (-1, -1, 7), its result sharded along
dimension 0; a bitwise mismatch on default, O0 and no_fusion_emitters alike, the
unsharded and op-by-op results right).

Exit 1 while the bug shows, 0 once fixed.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402


def f(x, i):
    return lax.dynamic_slice(x, (i,), (2,))


def main() -> int:
    print(f"jax {jax.__version__}")
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    x = np.arange(4, dtype=np.float32)
    i = np.int32(3)
    want = x[2:4]  # the start clamped to 4 - 2
    bad = 0
    for shardy in (True, False):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        got = np.asarray(jax.jit(f, out_shardings=NamedSharding(mesh, P("x")))(x, i))
        name = "Shardy" if shardy else "GSPMD"
        print(f"{name}: expected {want}, sharded jit gives {got}")
        bad += not np.array_equal(got, want)
    if bad:
        print("BUG: the sharded dynamic_slice does not clamp its start as one slice")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
