"""XLA:CPU (jaxlib 0.10.2): a ReLU (max(x, 0)) feeding a sum in one YNNPACK fusion drops NaN.

lax.max propagates NaN, so sum(relu(x)) over a row holding a NaN is NaN. XLA:CPU fuses the
maximum and the reduce into a `__ynn_fusion`, and YNNPACK's max returns 0 for a NaN operand:
the sum comes out finite. Every compiled configuration of the campaign (default, O0,
no_fusion_emitters, the float64 program compiled whole) shares it; op by op and numpy keep
the NaN; `--xla_cpu_experimental_ynn_fusion_type=` (no YNN fusions) cures it. Found on a
special-values mutant of the shipped CNN training-step trace (examples/workloads/cnn_batchnorm.py,
a conv -> relu -> pooling sum), issue 14; the max reduction of bench/repros/reduce_max_drops_nan.py
is the same library's NaN rule.

Exit 1 while the bug shows, 0 once fixed.
"""

import jax
import jax.numpy as jnp
import numpy as np


def f(x):
    return jnp.sum(jnp.maximum(x, 0.0), axis=(1, 2))


def main() -> int:
    print(f"jax {jax.__version__}")
    x = np.linspace(-1, 1, 8 * 6 * 6 * 16, dtype=np.float32).reshape(8, 6, 6, 16)
    x[0, 2, 3, 1] = np.nan
    got = np.asarray(jax.jit(f)(x))
    want = np.asarray(f(x))  # op by op: each op compiled alone
    print(f"row 0, channel 1: jit gives {got[0, 1]}, op by op {want[0, 1]}")
    if not np.isnan(got[0, 1]):
        print("BUG: the NaN is dropped by the fused max + reduce")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
