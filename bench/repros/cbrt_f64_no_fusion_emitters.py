"""XLA:CPU (jaxlib 0.10.2) with xla_cpu_use_fusion_emitters=False: f64 cbrt is up to
about 60 ulps off for large and small magnitudes, and not near zero for subnormals.

The default configuration is within an ulp (cbrt(8.99e307) = 4.4794894843556084e102,
exact to the last digit); without fusion emitters the same module gives
4.4794894843555497e102, a relative error of 1.3e-14 that grows with |log x|, as a
cbrt computed through exp(log(x) / 3) would. cbrt(1e-310) gives 1.35e-108 there
(4.64e-104 exactly; 0 in the default configuration, which flushes the subnormal).
Found by the clean run of seed 7 (program s7-i6097).

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import numpy as np
from jax._src import compiler, xla_bridge
from jax._src.lib import xla_client

jax.config.update("jax_enable_x64", True)


def run(x: np.ndarray, options: dict) -> np.ndarray:
    backend = xla_bridge.get_backend("cpu")
    device = backend.local_devices()[0]
    module = jax.jit(jax.lax.cbrt).lower(x).as_text()
    exe = backend.compile_and_load(module, xla_client.DeviceList((device,)),
                                   compiler.get_compile_options(1, 1, env_options_overrides=options))
    return np.asarray(exe.execute_sharded([jax.device_put(x, device)])
                      .disassemble_into_single_device_arrays()[0][0])


def main() -> int:
    x = np.array([8.98846567431158e307, 1e100, 1e-300, 27.0, 2.0])
    exact = np.cbrt(x)
    ulp = np.spacing(exact)
    print(f"jax {jax.__version__}")
    worst = 0.0
    for name, options in (("default", {}), ("no_fusion_emitters", {"xla_cpu_use_fusion_emitters": False})):
        err = np.abs(run(x, options) - exact) / ulp
        worst = max(worst, float(err.max())) if name != "default" else worst
        print(f"{name}: error in ulps {np.round(err, 1).tolist()}")
    if worst > 4:
        print(f"BUG: f64 cbrt without fusion emitters is {worst:.0f} ulps off")
        return 1
    print("OK: f64 cbrt within 4 ulps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
