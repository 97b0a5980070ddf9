"""XLA (jaxlib 0.10.2): a one-element scatter into a replicated array that a sharding
constraint splits across devices overwrites the first element of every other shard.

x = [1, 2, 3, 4], replicated, constrained to be sharded over 2 devices, then
x.at[1].add(7): [1, 9, 3, 4]. The sharded jit gives [1, 9, 2, 4]: device 1's first
element (x[2]) becomes x[1], the old value at the scattered index. The partitioner makes
the scatter a per-device dynamic-update-slice at 1 - 2 * partition_id (out of range on
device 1: clamped to 0) of select(in range, old + 7, old), where `old` is one
dynamic-slice of the whole replicated x at (1 - 2 * partition_id) + clamp(2 * partition_id,
0, 3) = 1 on device 1; the device's own element would be at 2 * partition_id +
clamp(1 - 2 * partition_id, 0, 1) = 2. A slice of a slice merged with the wrong start
clamped: the same defect as spmd_scatter_after_shift.py (there the whole array is a
shifted copy, here the replicated input), and likewise cured by
--xla_disable_hlo_passes=algsimp. .at[i].set and .at[i].add alike, in a fori_loop or not;
an input that arrives sharded (no constraint) is right. Shardy (the default) and GSPMD
alike; default, O0 and no_fusion_emitters alike.

Found by issue 35's 1,000-program multi-host clean run (seed 35, 4 devices, every target
including hosts2x2): s35-i851, loop_scatter_add (fori, one trip, body neg on s32) of
s32[16,5], replicated and constrained to 4 shards along dimension 0, adding -x[0] at row
1: rows 4, 8 and 12 (each other shard's first) held row 1 of the input, 14 of 80
elements wrong against the op-by-op reference, right under
--xla_disable_hlo_passes=algsimp.

Exit 1 while the bug shows, 0 once fixed.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

PRESETS = {
    "default": {},
    "O0": {"xla_backend_optimization_level": 0},
    "no_fusion_emitters": {"xla_cpu_use_fusion_emitters": False},
}


def main() -> int:
    print(f"jax {jax.__version__}")
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    sharded, replicated = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())

    def f(x):
        return lax.with_sharding_constraint(x, sharded).at[1].add(7)

    x = np.array([1, 2, 3, 4], np.int32)
    want = np.array([1, 9, 3, 4], np.int32)
    bad = 0
    for shardy in (True, False):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        for preset, options in PRESETS.items():
            compiled = (
                jax.jit(f, in_shardings=replicated, out_shardings=sharded).lower(x).compile(options)
            )
            got = np.asarray(compiled(jax.device_put(x, replicated)))
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
