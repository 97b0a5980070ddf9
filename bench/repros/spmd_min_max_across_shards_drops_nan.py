"""XLA:CPU SPMD (jaxlib 0.10.2): a max or min reduction over a sharded dimension drops NaN
when combining the devices' partial results.

jax.lax.reduce_max / reduce_min propagate NaN, and so does the same jit on one device.
Sharded over 2 devices along the reduced dimension, each device reduces its half (a NaN
half gives NaN) and the partial results are combined across devices: that step returns
the other device's value, so [NaN, 2, ..., 8] gives max 8 and min 5, for f32 and bf16,
wherever the NaN sits. Found by issue 13's devices-4 clean run (seed 31, program
s31-i1502: a clamp, a min reduction along a dimension sharded on mesh axis y, and a select
on `x <= min`, under Shardy; the NaN rows selected the wrong operand).

Exit 1 while the bug shows, 0 once fixed.
"""

import os

# Virtual CPU devices: read when jax initializes, so before the import.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=2").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402


def main() -> int:
    print(f"jax {jax.__version__}")
    mesh = Mesh(np.array(jax.devices()[:2]), ("y",))
    reduce = jax.jit(lambda v: (jnp.max(v, axis=1), jnp.min(v, axis=1)),
                     out_shardings=NamedSharding(mesh, P()))
    wrong = []
    for dtype in (jnp.float32, jnp.bfloat16):
        for at in (0, 5):  # the NaN on the first device's half, then on the second's
            x = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
            x[0, at] = np.nan
            sharded = jax.device_put(jnp.asarray(x, dtype), NamedSharding(mesh, P(None, "y")))
            got = [float(np.asarray(r)[0]) for r in reduce(sharded)]
            one_device = [float(np.asarray(r)[0]) for r in jax.jit(
                lambda v: (jnp.max(v, axis=1), jnp.min(v, axis=1)))(jnp.asarray(x, dtype))]
            print(f"{jnp.dtype(dtype).name} NaN at {at}: sharded max, min = {got}; "
                  f"one device {one_device}")
            if not all(np.isnan(got)):
                wrong.append((jnp.dtype(dtype).name, at))
    if wrong:
        print(f"BUG: a max/min across shards drops NaN in {wrong}")
        return 1
    print("OK: NaN propagates across shards")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
