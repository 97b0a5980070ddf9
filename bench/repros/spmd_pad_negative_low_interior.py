"""XLA SPMD partitioner (jaxlib 0.10.2): a pad with negative low padding and interior
padding on a sharded dimension aborts the compiler.

lax.pad(x, 0, [(-1, 0, 1)]) of f32[2] is [0, x[1]]: interior padding puts a zero between
the two elements, then low = -1 drops the first element. Sharded over 2 devices,
SpmdPartitioner's HandlePad -> ReshardDataForPad -> PartitionedHlo::ReshardAsWindowedInput
fails `Check failed: get_first_valid_element_offset_on_dilated_shard(0) ==
swd->padding_low() (1 vs. -1)` (spmd_partitioner.cc:1115) and the process aborts (SIGABRT),
under Shardy (the default) and GSPMD alike, in every XLA:CPU option preset. Unsharded it
compiles and is right. low = -2 (which drops the interior zero too) or no interior padding
compiles. Found by xla-sentinel's SPMD campaign (seed 13, 4 devices, program s13-i36: a
bool 48x3x8 value resharded along its last dimension, padded with low = high = -1 and
interior 1 there).

The compile runs in a child process (the abort cannot be caught). Exit 1 while the bug
shows, 0 once fixed.
"""

import os
import subprocess
import sys

CHILD = "--child"


def child(shardy: bool) -> int:
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    import jax
    import numpy as np
    from jax import lax
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.config.update("jax_use_shardy_partitioner", shardy)
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    sharded = NamedSharding(mesh, P("x"))

    def f(x):
        return lax.pad(x, np.float32(0), [(-1, 0, 1)])

    x = np.array([1.0, 2.0], np.float32)
    got = np.asarray(jax.jit(f, in_shardings=sharded, out_shardings=NamedSharding(mesh, P()))(
        jax.device_put(x, sharded)))
    want = np.array([0.0, 2.0], np.float32)
    print(f"got {got}, expected {want}")
    return 0 if np.array_equal(got, want) else 1


def main() -> int:
    import jax

    print(f"jax {jax.__version__}")
    bad = 0
    for shardy in (True, False):
        name = "Shardy" if shardy else "GSPMD"
        proc = subprocess.run([sys.executable, __file__, CHILD, str(int(shardy))],
                              capture_output=True, text=True, timeout=300)
        check = [line for line in proc.stderr.splitlines() if "Check failed" in line]
        if proc.returncode < 0:
            print(f"BUG ({name}): the compile aborted (signal {-proc.returncode}): "
                  f"{check[0] if check else proc.stderr.strip()[-300:]}")
            bad += 1
        elif proc.returncode:
            print(f"BUG ({name}): wrong result or error\n{proc.stdout}{proc.stderr[-500:]}")
            bad += 1
        else:
            print(f"OK ({name}): {proc.stdout.strip()}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD:
        raise SystemExit(child(sys.argv[2] == "1"))
    raise SystemExit(main())
