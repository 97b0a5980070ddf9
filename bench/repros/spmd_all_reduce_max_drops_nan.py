"""XLA:CPU (jaxlib 0.10.2): a max or min all-reduce across devices drops NaN.

lax.pmax / lax.pmin inside shard_map over 2 or 4 virtual CPU devices: where one device
holds NaN and the others a number, the result is the others' max or min (pmax of
[NaN, 1] is 1, of [NaN, -inf] is -inf), not NaN as lax.max / lax.min give for the same
values on one device. psum of the same values is NaN, as it must be. This is the
collective itself, so it is also the step that combines the devices' partial results of
a max/min reduction over a sharded dimension (bench/repros/spmd_min_max_across_shards_drops_nan.py).

Found by issue 13's devices-4 clean run (seed 31): its programs wrap values in a
"pmax broadcast" region, pmax(where(axis_index == source, x, -inf)), which is x itself
unless x holds NaN; there it becomes -inf, and what follows turns -inf into finite
values where float64 and the unsharded program give NaN (s31-i1152: 1.2 for NaN after
sqrt and cumprod; s31-i1208: a min of the result; s31-i1441: layer norm, lgamma and a
product, 1.2**224 = 5.45e17; s31-i1168: log then cos). Removing the pmax region from
each program's graph makes the sharded result match the unsharded one.

Exit 1 while the bug shows, 0 once fixed.
"""

import os

# Virtual CPU devices: read when jax initializes, so before the import.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402


def main() -> int:
    print(f"jax {jax.__version__}")
    wrong = []
    for n in (2, 4):
        mesh = Mesh(np.array(jax.devices()[:n]), ("x",))
        for name, collective, local in (("pmax", lax.pmax, jnp.max), ("pmin", lax.pmin, jnp.min)):
            f = jax.jit(jax.shard_map(lambda v, c=collective: c(v, "x"), mesh=mesh,
                                      in_specs=P("x"), out_specs=P(), check_vma=False))
            for dtype in (jnp.float32, jnp.bfloat16):
                for at in range(n):  # NaN on each device in turn; device d holds x[d]
                    x = np.arange(1, n + 1, dtype=np.float32)
                    x[at] = np.nan
                    got = float(np.asarray(f(jnp.asarray(x, dtype)))[0])
                    one_device = float(jax.jit(local)(jnp.asarray(x, dtype)))
                    print(f"{n} devices {name} {jnp.dtype(dtype).name} of {x}: {got} "
                          f"(one device: {one_device})")
                    if not np.isnan(got):
                        wrong.append((n, name, jnp.dtype(dtype).name, at))
    if wrong:
        print(f"BUG: {len(wrong)} max/min all-reduces drop NaN: {wrong}")
        return 1
    print("OK: NaN propagates through pmax and pmin")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
