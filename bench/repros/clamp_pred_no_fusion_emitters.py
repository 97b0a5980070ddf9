"""XLA:CPU (jaxlib 0.10.2): with fusion emitters off, a clamp of booleans does not compile.

lax.clamp(False, x, True) of a bool array is x. jit compiles and runs it under default
options and at O0, but with --xla_cpu_use_fusion_emitters=false (the elemental IR emitter)
the compile fails: `UNIMPLEMENTED: Clamp unimplemented for PRED`. The same with a variable
lower bound. No sharding is involved. Found by xla-sentinel's SPMD campaign (seed 31,
4 devices, program s31-i385: a bool[5,3] from an unsigned compare, clamped to
[False, True]; a compile_error of target no_fusion_emitters only).

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import numpy as np
from jax import lax


def f(x):
    return lax.clamp(False, x, True)


def main() -> int:
    print(f"jax {jax.__version__}")
    x = np.array([True, False, True])
    bad = 0
    for name, options in [("default", {}), ("no_fusion_emitters", {"xla_cpu_use_fusion_emitters": False})]:
        try:
            got = np.asarray(jax.jit(f).lower(x).compile(options)(x))
        except Exception as e:  # XLA's compile error
            print(f"BUG ({name}): {type(e).__name__}: {str(e).splitlines()[0]}")
            bad += 1
            continue
        print(f"{name}: {got}")
        bad += not np.array_equal(got, x)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
