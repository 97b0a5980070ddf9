"""XLA:CPU (jaxlib 0.10.2) converts f64 and s32 to bf16 and f16 through f32, rounding
twice: a value just above a halfway point of the narrow type first rounds to that
halfway point in f32, then ties to even, away from the correctly rounded result.

StableHLO's convert rounds once (roundTiesToEven from the source value). Cases:
- f64 1 + 2^-8 + 2^-30 to bf16: correctly 1.0078125 (above the halfway point 1 + 2^-8),
  XLA 1.0;
- f64 1 + 2^-11 + 2^-40 to f16: correctly 1.0009765625, XLA 1.0;
- s32 2^24 + 2^16 + 1 to bf16: correctly 2^24 + 2^17, XLA 2^24.
numpy (f16) and ml_dtypes (bf16) round once; so does the exact rounding below, done on
rationals. The numpy float64 reference of this project models XLA's two roundings for
its own-precision column (docs/detection.md), so a program is not flagged for it.

Exit 1 while the bug shows, 0 once fixed.
"""

from fractions import Fraction

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

jax.config.update("jax_enable_x64", True)

CASES = (
    (np.float64(1 + 2**-8 + 2**-30), ml_dtypes.bfloat16),
    (np.float64(1 + 2**-11 + 2**-40), np.float16),
    (np.int32(2**24 + 2**16 + 1), ml_dtypes.bfloat16),
)


def rounded_once(value: Fraction, dtype: type) -> float:
    """The value of `dtype` nearest to `value`, ties to even: of the two neighbours that
    bracket it (found by stepping the narrow type's bits), the nearer one."""
    below = np.array(float(value), np.float64).astype(dtype)  # one of the two neighbours
    step = 1 if Fraction(float(below)) < value else -1  # positive values: bits grow with them
    other = np.array(int(below.view(np.uint16)) + step, np.uint16).view(dtype)
    a, b = sorted((below, other), key=float)
    da, db = value - Fraction(float(a)), Fraction(float(b)) - value
    if da != db:
        return float(a if da < db else b)
    return float(a if int(a.view(np.uint16)) % 2 == 0 else b)


def main() -> int:
    print(f"jax {jax.__version__}")
    wrong = 0
    for x, dtype in CASES:
        exact = rounded_once(Fraction(int(x)) if x.dtype.kind == "i" else Fraction(float(x)), dtype)
        xla = float(jax.jit(lambda v, d=dtype: v.astype(d))(jnp.asarray(x)))
        library = float(np.asarray(x).astype(dtype))
        status = "ok" if xla == exact else "WRONG"
        wrong += xla != exact
        print(f"{x.dtype}({x!r}) -> {np.dtype(dtype).name}: XLA {xla!r}, rounded once {exact!r} "
              f"(numpy/ml_dtypes {library!r}) {status}")
    if wrong:
        print(f"BUG: {wrong} of {len(CASES)} conversions rounded twice")
        return 1
    print("OK: every conversion rounded once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
