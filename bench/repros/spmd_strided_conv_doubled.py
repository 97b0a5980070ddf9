"""XLA SPMD partitioner (jaxlib 0.10.2, GSPMD and Shardy alike): a strided convolution
whose input is sharded along its spatial dimension, with a sharded kernel, returns twice
the right result on 4 CPU devices.

conv_general_dilated of x f32[2, 4, 4] (batch, features, width) with a kernel of ones
f32[2, 4, 1], stride 2, SAME padding, x sharded along the width on one mesh axis and the
kernel along another (or along its input features): every element is doubled. With
stride 1, or with the kernel replicated, the result is right. Found by the devices-4
clean run (s31-i2432: f16 conv of cummin(layer_norm(x)) after an all_to_all region that
shards the width; error 1.0 on default, O0 and no_fusion_emitters, 0.00045 op by op and
unsharded).

Exit 1 while the bug shows, 0 once fixed.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax._src import config  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

CASES = (  # x's sharding, the kernel's, stride: the last two are right
    (P(None, None, "x"), P("y"), 2),
    (P(None, None, "x"), P(None, "x"), 2),
    (P(None, None, "y"), P("x"), 2),
    (P(None, None, "x"), P("y"), 1),
    (P(None, None, "x"), P(), 2),
)


def main() -> int:
    print(f"jax {jax.__version__}")
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    x = np.arange(1, 33, dtype=np.float32).reshape(2, 4, 4)
    w = np.ones((2, 4, 1), np.float32)
    wrong = 0
    for partitioner in ("gspmd", "shardy"):
        for xs, ws, stride in CASES:
            def conv(a, b, stride=stride):
                return lax.conv_general_dilated(a, b, (stride,), "SAME")
            want = np.asarray(jax.jit(conv)(x, w))
            with config.use_shardy_partitioner(partitioner == "shardy"):
                got = np.asarray(jax.jit(conv, in_shardings=(NamedSharding(mesh, xs), NamedSharding(mesh, ws)))(x, w))
            ratio = np.unique(np.round(got / want, 3)).tolist()
            bad = not np.allclose(got, want)
            wrong += bad
            print(f"{partitioner}: x {xs}, kernel {ws}, stride {stride}: sharded / unsharded = {ratio}"
                  f"{'  WRONG' if bad else ''}")
    if wrong:
        print(f"BUG: {wrong} sharded strided convolutions are wrong")
        return 1
    print("OK: every sharded convolution matches the unsharded one")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
