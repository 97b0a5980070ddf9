"""XLA:CPU (jaxlib 0.10.2): a max or min reduction over 4096 or more f32/f64 elements
drops NaN, in every configuration (default, O0, no fusion emitters).

jax.lax.reduce_max propagates NaN (as jax.lax.max does); XLA:CPU does for up to 2048
elements, and from 4096 on returns the maximum of the other elements (f32 and f64 with
one NaN, as below; bf16 too in the program that found it, depending on where NaN and inf
sit).
Where the reduction is fused with an elementwise producer (log1p(|x|) feeding it) it
propagates NaN again. Found by the clean run of seed 7 (program s7-i7035): the op-by-op
references took the dropping path, the compiled targets the propagating one.

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


def nan_kept(n: int, dtype: type, reduce=lax.reduce_max) -> bool:
    x = np.ones(n, dtype)
    x[n // 2] = np.nan
    return bool(np.isnan(jax.jit(lambda v: reduce(v, (0,)))(x)))


def main() -> int:
    print(f"jax {jax.__version__}")
    dropped = []
    for dtype in (np.float32, np.float64):
        for reduce in (lax.reduce_max, lax.reduce_min):
            for n in (2048, 4096, 12544):
                kept = nan_kept(n, dtype, reduce)
                print(f"{reduce.__name__}({np.dtype(dtype).name}[{n}] with one NaN) = "
                      f"{'NaN' if kept else 'finite (NaN dropped)'}")
                if not kept:
                    dropped.append((reduce.__name__, np.dtype(dtype).name, n))
    if dropped:
        print(f"BUG: NaN dropped in {len(dropped)} cases")
        return 1
    print("OK: every reduction propagates NaN")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
