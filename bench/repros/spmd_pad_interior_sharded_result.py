"""XLA SPMD partitioner (jaxlib 0.10.2): a pad with interior padding whose result is
sharded along the padded dimension gives wrong values, and with negative high padding
also per-device results of the wrong size.

lax.pad(x, 0, [(0, 1, 1)]) of x = [1, 2, 3] is [1, 0, 2, 0, 3, 0]. With x replicated and
the result sharded over 2 devices, jit gives [1, 0, 2, 2, 0, 3]: device 1's half starts
one element early. lax.pad(x, 0, [(0, -1, 1)]) is [1, 0, 2, 0] (the last zero dropped);
sharded, each device's result buffer holds 1 element where the sharding needs 2 (the
compiled module's result is f32[1] per device: the buffers hold [1] and [2]), and the
array jit returns from them is [1, 1, 2, 2]. A slice of such a pad along another dimension
(lax.pad(x, 0, [(0, 0, 0), (0, -1, 1)])[0:1] of f32[2, 3], sharded along dimension 1) does
not compile: `INTERNAL: during context [hlo verifier]: Expected instruction to have shape
equal to f32[1,1], actual shape is f32[1,2]` (failed after spmd-partitioning; s31-i624,
the same on f16[1,3,5]); compared with an input sharded along the padded dimension, the
verifier refuses the compare instead: `Binary op with incompatible shapes: u8[3,13] and
u8[4,13]` (s39-i186, u8[5,5] padded 0/-1/1 on dimension 0). Without interior padding, or without the output sharding, it is
right. Shardy (the default) and GSPMD alike, default, O0 and no_fusion_emitters alike;
not cured by --xla_disable_hlo_passes=algsimp. A different failure of the same op from
spmd_pad_negative_low_interior.py (negative low padding, operand sharded: an abort).
Found by xla-sentinel's SPMD campaign (seed 31, 4 devices, program s31-i61: an s32
[15,16,16] value padded with low 0, high -1, interior 1 on dimension 0 to [28,17,32],
the result sharded in 2 along dimension 0; each device returned [13,17,32] for a
[14,17,32] shard, which our harness could not place).

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
CASES = {(0, 1, 1): [1, 0, 2, 0, 3, 0], (0, -1, 1): [1, 0, 2, 0]}


def main() -> int:
    print(f"jax {jax.__version__}")
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    sharded = NamedSharding(mesh, P("x"))
    x = np.array([1.0, 2.0, 3.0], np.float32)
    bad = 0
    for shardy in (True, False):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        name = "Shardy" if shardy else "GSPMD"
        for config, want in CASES.items():
            def f(x, config=config):
                return lax.pad(x, np.float32(0), [config])

            want = np.array(want, np.float32)
            for preset, options in PRESETS.items():
                compiled = jax.jit(f, out_shardings=sharded).lower(x).compile(options)
                # What each device's buffer really holds (the executable's own result),
                # not the shape the output sharding promises.
                shards = compiled.runtime_executable().execute_sharded(
                    [jax.device_put(x, NamedSharding(mesh, P()))]).disassemble_into_single_device_arrays()[0]
                sizes = [np.asarray(s).shape[0] for s in shards]
                got = np.concatenate([np.asarray(s) for s in shards])
                ok = sizes == [len(want) // 2] * 2 and np.array_equal(got, want)
                print(f"{name} {preset} pad {config}: expected {want}, per-device sizes "
                      f"{sizes} (want {len(want) // 2} each), sharded jit gives {got}")
                bad += not ok
        for preset, options in PRESETS.items():
            y = np.arange(6, dtype=np.float32).reshape(2, 3)
            try:
                jax.jit(lambda y: lax.pad(y, np.float32(0), [(0, 0, 0), (0, -1, 1)])[0:1],
                        out_shardings=NamedSharding(mesh, P(None, "x"))).lower(y).compile(options)
                print(f"{name} {preset} slice of the pad: compiles")
            except Exception as e:  # XLA's compile error
                print(f"{name} {preset} slice of the pad: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                bad += 1
            # The pad compared with an input sharded along the padded dimension (s39-i186):
            # the verifier refuses the compare of a tile a row short.
            z = np.arange(15, dtype=np.uint8).reshape(5, 3)
            w = jax.device_put(np.ones((8, 3), np.uint8), NamedSharding(mesh, P("x")))
            try:
                jax.jit(lambda z, w: lax.pad(z, np.uint8(1), [(0, -1, 1), (0, 0, 0)]) == w).lower(z, w).compile(options)
                print(f"{name} {preset} pad compared with a sharded input: compiles")
            except Exception as e:  # XLA's compile error
                print(f"{name} {preset} pad compared with a sharded input: {type(e).__name__}: "
                      f"{str(e).splitlines()[0][:160]}")
                bad += 1
    if bad:
        print(f"BUG: {bad} of 24 configurations pad a sharded result wrong")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
