"""XLA SPMD partitioner (jaxlib 0.10.2, GSPMD and Shardy alike): two cumulative
reductions (cummin and cummax, or cummin and cumsum) of the same integer operand,
sharded along the scanned dimension, on 4 CPU devices: the second one's elements
past the first shard are garbage, as if it took the first one's init value.

z = s32[12, 63, -6, 42] sharded in 2: cummin(z, reverse) is right, [-6, -6, -6, 42];
cummax(z, reverse) gives [63, 2147483647, 2147483647, 2147483647] for [63, 63, 42, 42]
(INT32_MAX: cummin's identity); cumsum gives [111, -2147483550, 34, -2147483609] for
[111, 99, 36, 42]: INT32_MAX too much. Each alone is right, so is f32, so is the program unsharded. Found by
the devices-4 clean run (s31-i2531: div(cummax(x * y), nonzero(x * y)) beside
cummin(x * y), the product sharded by its second factor; INT32_MAX for 42 on every target).

Exit 1 while the bug shows, 0 once fixed.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax._src import config  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

CASES = {  # the last two are right
    "cummin and cummax": lambda v: (lax.cummin(v, reverse=True), lax.cummax(v, reverse=True)),
    "cummin and cumsum": lambda v: (lax.cummin(v, reverse=True), lax.cumsum(v, reverse=True)),
    "cummax alone": lambda v: (lax.cummax(v, reverse=True),),
    "f32 cummin and cummax": lambda v: (lax.cummin(v.astype(jnp.float32), reverse=True),
                                        lax.cummax(v.astype(jnp.float32), reverse=True)),
}


def main() -> int:
    print(f"jax {jax.__version__}")
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    z = np.array([12, 63, -6, 42], np.int32)
    wrong = 0
    for partitioner in ("gspmd", "shardy"):
        for name, f in CASES.items():
            want = [np.asarray(o).tolist() for o in jax.jit(f)(z)]
            with config.use_shardy_partitioner(partitioner == "shardy"):
                got = [np.asarray(o).tolist() for o in jax.jit(f, in_shardings=NamedSharding(mesh, P("x")))(z)]
            wrong += got != want
            print(f"{partitioner}: {name}: sharded {got}, unsharded {want}{'  WRONG' if got != want else ''}")
    if wrong:
        print(f"BUG: {wrong} sharded cumulative reductions are wrong")
        return 1
    print("OK: every sharded cumulative reduction matches the unsharded one")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
