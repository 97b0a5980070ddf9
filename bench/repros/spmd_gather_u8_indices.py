"""XLA SPMD partitioner (jaxlib 0.10.2): a gather from an operand sharded along the
gathered dimension, with u8 indices, aborts the compiler.

lax.gather of x = [0, 1, 2, 3] at u8 indices [[1], [3]] is [1, 3]. With x sharded over 2
devices along that dimension, the SPMD partitioner's HandleGather fails
`gather_scatter_handler.cc:240] Unsupported indices type: U8` and the process aborts
(SIGABRT), under Shardy (the default) and GSPMD alike. s32 indices, or the same jit
without shardings, compile and are right. Found by xla-sentinel's SPMD campaign (seed 31,
4 devices, program s31-i1044: a gather of an s32[4,1] sharded along dimension 0 at
u8[2,1] indices; a crash of every target).

The compile runs in a child process (the abort cannot be caught). Exit 1 while the bug
shows, 0 once fixed.
"""

import os
import subprocess
import sys

CHILD = "--child"


def child(shardy: bool, index_dtype: str) -> int:
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    import jax
    import numpy as np
    from jax import lax
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.config.update("jax_use_shardy_partitioner", shardy)
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    sharded = NamedSharding(mesh, P("x"))
    dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))

    def f(x, i):
        return lax.gather(x, i, dnums, slice_sizes=(1,))

    x = np.arange(4, dtype=np.float32)
    i = np.array([[1], [3]], np.dtype(index_dtype))
    got = np.asarray(jax.jit(f, in_shardings=(sharded, NamedSharding(mesh, P())))(
        jax.device_put(x, sharded), i))
    print(f"got {got}, expected [1. 3.]")
    return 0 if np.array_equal(got, [1.0, 3.0]) else 1


def main() -> int:
    import jax

    print(f"jax {jax.__version__}")
    bad = 0
    for shardy in (True, False):
        for index_dtype in ("int32", "uint8"):
            name = f"{'Shardy' if shardy else 'GSPMD'}, {index_dtype} indices"
            proc = subprocess.run([sys.executable, __file__, CHILD, str(int(shardy)), index_dtype],
                                  capture_output=True, text=True, timeout=300)
            check = [line for line in proc.stderr.splitlines() if "gather_scatter_handler" in line]
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
    if len(sys.argv) == 4 and sys.argv[1] == CHILD:
        raise SystemExit(child(sys.argv[2] == "1", sys.argv[3]))
    raise SystemExit(main())
