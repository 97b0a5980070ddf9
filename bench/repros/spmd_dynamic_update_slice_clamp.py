"""XLA SPMD partitioner (jaxlib 0.10.2): a one-element dynamic_update_slice into an array
sharded along that dimension is dropped when its start must be clamped.

lax.dynamic_update_slice clamps each start index to [0, operand_dim - update_dim]: writing
u = [100] into x = [0, 1, 2, 3] at 4 writes it at 3, giving [0, 1, 2, 100]. With x sharded
over 2 devices, jit gives [0, 1, 2, 3]: the update is lost. An in-range start,
a two-element update, or the same jit without shardings is right. Shardy (the default) and
GSPMD alike, default, O0 and no_fusion_emitters alike, whether the result is sharded or
replicated; not cured by --xla_disable_hlo_passes=algsimp. Found by xla-sentinel's SPMD
campaign (seed 31, 4 devices, program s31-i641: an f32[2,1,1,4] update of f32[6,7,8,8]
sharded in 2 along dimension 2, at starts given as u32 (-1, -4, 9, -4), so 9 clamped to 7
there; all 8 updated elements wrong in every target).

Exit 1 while the bug shows, 0 once fixed.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

PRESETS = {"default": {}, "O0": {"xla_backend_optimization_level": 0},
           "no_fusion_emitters": {"xla_cpu_use_fusion_emitters": False}}


def f(x, u, i):
    return lax.dynamic_update_slice(x, u, (i,))


def main() -> int:
    print(f"jax {jax.__version__}")
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    sharded, replicated = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())
    x = np.array([0.0, 1.0, 2.0, 3.0], np.float32)
    u = np.array([100.0], np.float32)
    i = np.int32(4)
    want = np.array([0.0, 1.0, 2.0, 100.0], np.float32)  # the start clamped to 4 - 1
    bad = 0
    for shardy in (True, False):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        name = "Shardy" if shardy else "GSPMD"
        for preset, options in PRESETS.items():
            compiled = jax.jit(f, in_shardings=(sharded, replicated, replicated),
                               out_shardings=sharded).lower(x, u, i).compile(options)
            got = np.asarray(compiled(jax.device_put(x, sharded), u, i))
            print(f"{name} {preset}: expected {want}, sharded jit gives {got}")
            bad += not np.array_equal(got, want)
    if bad:
        print(f"BUG: {bad} of 6 configurations drop the clamped update")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
