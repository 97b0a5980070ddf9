"""XLA:CPU (jaxlib 0.10.2): f32 exp, log and erf give other bits for the same input
value depending on the array's shape.

- exp and log: an array of length 3, 5, 6 or 7 (or a tail of that length past a multiple
  of 8) takes another code path than a length-8 array; the same element differs by an
  ulp (exp(-4.6042657) below; 9% of 4,096 uniform inputs in [-10, 10]).
- erf: an array whose minor dimension is 1 gives 1.0 from |x| ~ 3.75 on, where a flat
  array gives 0.9999999 (25 of those 4,096 inputs).
Each result is within an ulp or two of exact, so none is wrong by itself; but an
elementwise op whose result depends on the batch size breaks what users rely on (a
model evaluated one example at a time and batched gives other bits) and what this
project's numpy reference assumes when it evaluates arrays in padded buckets: these
three ops stay on their real shape there (`evaluate.SHAPE_DEPENDENT`).

Exit 1 while the results depend on the shape, 0 once they do not.
"""

import jax
import numpy as np
from jax import lax

CASES = (  # op, input value, the two shapes it is evaluated in
    ("exp", lax.exp, np.float32(-4.6042657), (8,), (3,)),
    ("log", lax.log, np.float32(4.6042657), (8,), (3,)),
    ("erf", lax.erf, np.float32(3.7689347), (8,), (8, 1)),
)


def ulps(value: np.float32, exact: float) -> float:
    return abs(float(value) - exact) / float(np.spacing(np.float32(abs(exact))))


def main() -> int:
    jax.config.update("jax_enable_x64", True)  # only for the float64 value to measure against
    print(f"jax {jax.__version__}")
    dependent = 0
    for name, op, x, shape_a, shape_b in CASES:
        a = np.asarray(jax.jit(op)(np.full(shape_a, x))).ravel()[0]
        b = np.asarray(jax.jit(op)(np.full(shape_b, x))).ravel()[0]
        exact = float(op(np.float64(x)))
        dependent += a != b
        print(f"{name}({x!r}): shape {shape_a} {a!r} ({ulps(a, exact):.2f} ulp), shape {shape_b} "
              f"{b!r} ({ulps(b, exact):.2f} ulp){'' if a == b else '  DIFFER'}")
    if dependent:
        print(f"BUG: {dependent} of {len(CASES)} ops give other bits on another shape")
        return 1
    print("OK: every op gives the same bits on both shapes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
