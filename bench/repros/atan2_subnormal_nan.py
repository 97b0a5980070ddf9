"""XLA:CPU (jaxlib 0.10.2): f32 and bf16 atan2(y, x) with both operands subnormal (and
nonzero) is NaN, in every configuration (default, O0, no fusion emitters) and op by op.

atan2 of two non-NaN numbers is never NaN. IEEE 754 gives atan2(1e-40, 1e-40) = pi/4;
reading both subnormals as zero, as XLA:CPU's denormal flushing (DAZ) does elsewhere,
gives atan2(0, 0) = 0. XLA:CPU gives NaN, for either sign of y or x (atan2(2e-40, 1e-40),
atan2(1e-40, -1e-40) too). With one operand subnormal and the other zero or normal the
result is right (atan2(1e-40, 0) = pi/2, atan2(1e-40, 1) = 1e-40); f64 subnormals give
+-pi/2 (x read as zero, y not), wrong under IEEE but not NaN, so not what this checks.
Found by the devices-4 clean run of seed 31 (program s31-i1223, unsharded): a
bitcast_convert of small s32 values makes f32 subnormals s, and atan2(max(s, s),
max(s, s)) is NaN on all three targets; the program went undecided
(references_disagree), its float64 references reading the subnormals as zero.

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax._src import compiler, xla_bridge
from jax._src.lib import xla_client

CONFIGS = (("default", {}), ("O0", {"xla_backend_optimization_level": 0}),
           ("no_fusion_emitters", {"xla_cpu_use_fusion_emitters": False}))


def run(y: np.ndarray, x: np.ndarray, options: dict) -> np.ndarray:
    backend = xla_bridge.get_backend("cpu")
    device = backend.local_devices()[0]
    module = jax.jit(jnp.arctan2).lower(y, x).as_text()
    exe = backend.compile_and_load(module, xla_client.DeviceList((device,)),
                                   compiler.get_compile_options(1, 1, env_options_overrides=options))
    out = exe.execute_sharded([jax.device_put(y, device), jax.device_put(x, device)])
    return np.asarray(out.disassemble_into_single_device_arrays()[0][0])


def main() -> int:
    print(f"jax {jax.__version__}")
    s = 1e-40  # an f32 (and bf16) subnormal; f32's smallest normal number is 1.18e-38
    y = np.array([s, s, -s, 2 * s, s, 1.0, 1.0], np.float32)
    x = np.array([s, -s, s, s, 1.0, s, 1.0], np.float32)
    print("y =", y.tolist())
    print("x =", x.tolist())
    print("numpy      ", np.arctan2(y, x).tolist())
    nan = 0
    for dtype in (np.float32, ml_dtypes.bfloat16):
        yd, xd = y.astype(dtype), x.astype(dtype)
        results = [(name, run(yd, xd, options)) for name, options in CONFIGS]
        results.append(("op by op", np.asarray(jnp.arctan2(jnp.asarray(yd), jnp.asarray(xd)))))
        for name, r in results:
            r = r.astype(np.float32)
            print(f"{np.dtype(dtype).name} {name:18} {r.tolist()}")
            nan += int(np.isnan(r).sum())
    if nan:
        print(f"BUG: atan2 of non-NaN operands is NaN in {nan} results")
        return 1
    print("OK: atan2 of non-NaN operands is never NaN")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
