"""XLA (jaxlib 0.10.2): on a sharded array, an in-place shift followed by a one-element
set writes a wrong value at the first element of every other shard.

x.at[1:].set(x[:-1]).at[0].set(9) of x = [1, 2, 3, 4] is [9, 1, 2, 3]. With x and the
result sharded over 2 devices it is [9, 1, 1, 3]: device 1 should leave its shard
[2, 3] alone (index 0 is not its own), but it overwrites its first element with the
shifted array's element 0. The SPMD partitioner makes the second scatter a per-device one
at index 0 - 2 * partition_id (out of range on device 1: a no-op). In the optimized HLO
it is a dynamic-update-slice at that index (clamped to 0) of select(in range, 9, old),
where `old` is one dynamic-slice of the whole shifted array at
(0 - 2 * partition_id) + clamp(2 * partition_id, 0, 3) = 0 on device 1: the device's
own element 2 would be 2 * partition_id + clamp(0 - 2 * partition_id, 0, 1). That is a
slice of a slice merged with the wrong start clamped, as in
dynamic_slice_of_dynamic_slice.py, and like that bug it is cured by
--xla_disable_hlo_passes=algsimp.
Shardy (the default) and GSPMD alike; default, O0 and no_fusion_emitters alike. Either scatter alone, or the same jit without
shardings, is right. Found by xla-sentinel's SPMD campaign (seed 31, 4 devices):
s31-i60 (u8[48,7,3] sharded on dimension 0, a fori_loop doing x.at[1:].set(x[:-1])
then x.at[0].set(x[0] * x[0])) and s31-i124 (f64[2,48,1,1] sharded 4 ways on dimension
1, the same loop with sigmoid, 3 iterations): each shard boundary's element wrong.

Exit 1 while the bug shows, 0 once fixed.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

PRESETS = {"default": {}, "O0": {"xla_backend_optimization_level": 0},
           "no_fusion_emitters": {"xla_cpu_use_fusion_emitters": False}}


def f(x):
    return x.at[1:].set(x[:-1]).at[0].set(9.0)


def main() -> int:
    print(f"jax {jax.__version__}")
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    sharded = NamedSharding(mesh, P("x"))
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    want = np.array([9.0, 1.0, 2.0, 3.0], np.float32)
    bad = 0
    for shardy in (True, False):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        for preset, options in PRESETS.items():
            compiled = jax.jit(f, in_shardings=sharded, out_shardings=sharded).lower(x).compile(options)
            got = np.asarray(compiled(jax.device_put(x, sharded)))
            name = "Shardy" if shardy else "GSPMD"
            print(f"{name} {preset}: expected {want}, sharded jit gives {got}")
            bad += not np.array_equal(got, want)
    if bad:
        print(f"BUG: {bad} of 6 configurations overwrite another shard's first element")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
