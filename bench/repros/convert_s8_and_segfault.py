"""XLA:CPU (jaxlib 0.10.2): compiling `convert(x: s32 -> s8) & y` (or `|`, or at s16)
kills the process with SIGSEGV, in the default configuration and at O0; with
xla_cpu_use_fusion_emitters=False it compiles and runs. Any shape (s32[3] to s32[17, 13]).

s8 & s8 without the convert, the convert alone, a convert to u8 then &, xor and not after
the convert all compile. Found by the seed-26 clean run (s26-i2316: `and(convert(s32[17,13]
-> s8), s8[17,13])` beside two other outputs; `crash` on default and O0, pass on
no_fusion_emitters).

Each case compiles in a child process, so a crash is reported, not suffered.
Exit 1 while the bug shows, 0 once fixed.
"""

import subprocess
import sys

CHILD = r"""
import sys
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax._src import compiler, xla_bridge
from jax._src.lib import xla_client
case, fusion_emitters = sys.argv[1], sys.argv[2] == "1"
f = {
    "convert s32->s8, and": lambda a, c: lax.convert_element_type(a, jnp.int8) & c,
    "convert s32->s8, or": lambda a, c: lax.convert_element_type(a, jnp.int8) | c,
    "convert s32->s16, and": lambda a, c: lax.convert_element_type(a, jnp.int16) & c.astype(jnp.int16),
    "s8 and s8": lambda a, c: c & c[::-1],
    "convert s32->s8, xor": lambda a, c: lax.convert_element_type(a, jnp.int8) ^ c,
    "convert s32->u8, and": lambda a, c: lax.convert_element_type(a, jnp.uint8) & c.astype(jnp.uint8),
}[case]
a, c = np.array([-2, -1, 0, 1], np.int32), np.full(4, 0x5A, np.int8)
backend = xla_bridge.get_backend("cpu")
options = {} if fusion_emitters else {"xla_cpu_use_fusion_emitters": False}
backend.compile_and_load(jax.jit(f).lower(a, c).as_text(), xla_client.DeviceList(tuple(backend.local_devices()[:1])),
                         compiler.get_compile_options(1, 1, env_options_overrides=options))
"""

CASES = ("convert s32->s8, and", "convert s32->s8, or", "convert s32->s16, and",
         "s8 and s8", "convert s32->s8, xor", "convert s32->u8, and")  # the last three compile


def compiles(case: str, fusion_emitters: bool) -> int:
    return subprocess.run([sys.executable, "-c", CHILD, case, "1" if fusion_emitters else "0"],
                          capture_output=True).returncode


def main() -> int:
    import jax

    print(f"jax {jax.__version__}")
    crashed = 0
    for case in CASES:
        rc, rc_off = compiles(case, True), compiles(case, False)
        crashed += rc != 0
        say = lambda r: "compiles" if r == 0 else f"exit {r}" + (" (SIGSEGV)" if r == -11 else "")  # noqa: E731
        print(f"{case}: {say(rc)}; fusion emitters off: {say(rc_off)}")
    if crashed:
        print(f"BUG: {crashed} of {len(CASES)} modules crash the compiler")
        return 1
    print("OK: every module compiles")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
