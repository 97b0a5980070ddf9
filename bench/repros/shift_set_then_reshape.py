"""XLA:CPU (jaxlib 0.10.2), one device: `x.at[1:].set(x[:-1])` (a shift register step)
whose result is reshaped comes out as x[0] everywhere, as if the copy ran forward in place
over its own source.

x = s32[12, -7, -3, -3, 12, 13, 0]: the shift gives [12, 12, -7, -3, -3, 12, 13]; the same
shift followed by `[:, None]` or `.reshape(1, 7)` gives [12] * 7 (a shift by 2 repeats
[12, -7]). The shift alone, or followed by an add, is right; so is every case under
--xla_disable_hlo_passes=algsimp; f32 is wrong alike. Every configuration shares it (the
float64 jit reference too). Found by the devices-4 clean run in an unsharded program
(s31-i2080: expand_dims(loop_shift(while_loop(x >> y))), 4 of 7 elements 0 for [-1, -1,
-1, 9]).

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import compiler, xla_bridge
from jax._src.lib import xla_client

CASES = {  # the last two are right
    "shift, [:, None]": lambda v: v.at[1:].set(v[:-1])[:, None],
    "shift, reshape(1, 7)": lambda v: v.at[1:].set(v[:-1]).reshape(1, 7),
    "shift by 2, [:, None]": lambda v: v.at[2:].set(v[:-2])[:, None],
    "f32 shift, [:, None]": lambda v: (lambda f: f.at[1:].set(f[:-1]))(v.astype(jnp.float32))[:, None],
    "shift alone": lambda v: v.at[1:].set(v[:-1]),
    "shift, + 0": lambda v: v.at[1:].set(v[:-1]) + 0,
}


def run(f, x: np.ndarray, options: dict) -> np.ndarray:
    backend = xla_bridge.get_backend("cpu")
    device = backend.local_devices()[0]
    exe = backend.compile_and_load(jax.jit(f).lower(x).as_text(), xla_client.DeviceList((device,)),
                                   compiler.get_compile_options(1, 1, env_options_overrides=options))
    return np.asarray(exe.execute_sharded([jax.device_put(x, device)])
                      .disassemble_into_single_device_arrays()[0][0])


def main() -> int:
    print(f"jax {jax.__version__}")
    x = np.array([12, -7, -3, -3, 12, 13, 0], np.int32)
    wrong = 0
    for name, f in CASES.items():
        want = np.asarray(f(jnp.asarray(x))).ravel().tolist()
        got = run(f, x, {}).ravel().tolist()
        cured = run(f, x, {"xla_disable_hlo_passes": "algsimp"}).ravel().tolist()
        wrong += got != want
        print(f"{name}: {got} (want {want}){'  WRONG' if got != want else ''}; "
              f"algsimp disabled: {'right' if cured == want else 'WRONG'}")
    if wrong:
        print(f"BUG: {wrong} shifts are wrong")
        return 1
    print("OK: every shift is right")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
