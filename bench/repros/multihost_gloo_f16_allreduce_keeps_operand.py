"""XLA:CPU (jaxlib 0.10.2) across processes: an f16 all-reduce keeps the old value where
the new one equals the old value's bits read as an integer.

Two processes joined by jax.distributed, the CPU's cross-process collectives over gloo
(jax_cpu_collectives_implementation="gloo"), one device each. lax.psum of f16 where
process 0 holds 2**-24 (bits 0x0001) and process 1 holds 1.0 gives 2**-24, not 1.0;
psum of [16.0, 19440.0] gives 16.0 (bits 0x4C00 = 19456, the sum), not 19456.0; pmax of
[2**-24, 1.0] gives 2**-24; pmin of [65504.0, 31744.0] gives 65504.0 (bits 0x7BFF =
31743, which rounds to 31744 in f16). The same in f32 and bf16, the same f16 values in
the other order, and the same programs on one process with 2 devices are right.

The cause is in gloo's float16 (gloo/types.h), whose reductions XLA's gloo collectives
use: `operator=` assigns only `if (rhs != *this)`, and `operator!=` is
`!(*this == rhs.x)`, which compares with the float16 *conversion of the integer* rhs.x
(operator==(const int&)), not with rhs's bits. So `acc = acc + b` is dropped whenever
the new value's bits equal float16(int(acc's bits)): 2**-24 has bits 1, float16(1) is
1.0, so 2**-24 + 1.0 stays 2**-24.

Found by issue 35's 1,000-program multi-host clean run (seed 35, hosts2x2 = 2 processes
x 2 devices): the softmax of a sharded dimension sums the exponentials across devices
with an f16 all-reduce; on rows where device 0's partial sum is 2**-24 and the total is
1.0, the sum came back 2**-24, its reciprocal inf, and inf * 0 NaN (s35-i454:
topk_routing, 20 NaN in the routing weights; s35-i957: attention, 992 NaN after the
following dot). One process with 4 devices is finite on both.

Exit 1 while the bug shows, 0 once fixed.
"""

import os
import socket
import subprocess
import sys
import tempfile

import numpy as np

TINY = 2.0**-24  # the smallest f16 subnormal: bits 0x0001

# (collective, dtype, value on process 0, value on process 1, the right answer)
CASES = [
    ("psum", "f16", TINY, 1.0, 1.0),
    ("psum", "f16", 16.0, 19440.0, 19456.0),
    ("pmax", "f16", TINY, 1.0, 1.0),
    ("pmin", "f16", 65504.0, 31744.0, 31744.0),
    # Controls: the other order, f32 and bf16 (bits 1 is 2**-133 there) are right.
    ("psum", "f16", 1.0, TINY, 1.0),
    ("psum", "f32", TINY, 1.0, np.float32(1.0) + np.float32(TINY)),
    ("psum", "bf16", 2.0**-133, 1.0, 1.0),
]


def host(rank: int, processes: int, port: int, out: str) -> None:
    """One process of the group: its device holds its value of each case."""
    os.environ["JAX_PLATFORMS"] = "cpu"
    # Appended: a cure under test (the agents' gate) comes in XLA_FLAGS.
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count={2 // processes}"
    ).strip()
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if processes > 1:
        jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=processes, process_id=rank)
    mesh = Mesh(np.array(jax.devices()), ("x",))
    got = []
    for name, dtype, first, second, _ in CASES:
        collective = {"psum": lax.psum, "pmax": lax.pmax, "pmin": lax.pmin}[name]
        whole = np.array(
            [first, second],
            dtype=jnp.dtype({"f16": jnp.float16, "f32": jnp.float32, "bf16": jnp.bfloat16}[dtype]),
        )
        x = jax.make_array_from_callback(
            whole.shape, NamedSharding(mesh, P("x")), lambda i, w=whole: w[i]
        )
        f = jax.jit(
            jax.shard_map(
                lambda v, c=collective: c(v, "x"),
                mesh=mesh,
                in_specs=P("x"),
                out_specs=P("x"),
                check_vma=False,
            )
        )
        got.append(float(np.asarray(f(x).addressable_shards[0].data)[0]))
    np.save(os.path.join(out, f"{processes}-{rank}.npy"), np.array(got))
    os._exit(0)  # jax.distributed's shutdown waits for the peer: not needed here


def run_group(processes: int, out: str) -> list[np.ndarray]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--host", str(r), str(processes), str(port), out],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in range(processes)
    ]
    try:
        for p in procs:
            if p.wait(timeout=300) != 0:
                raise RuntimeError(f"host process exited {p.returncode}")
    finally:
        for p in procs:  # a peer left waiting in a collective when the other failed
            if p.poll() is None:
                p.kill()
    return [np.load(os.path.join(out, f"{processes}-{r}.npy")) for r in range(processes)]


def main() -> int:
    import jax

    print(f"jax {jax.__version__}")
    with tempfile.TemporaryDirectory() as out:
        two = run_group(2, out)
        one = run_group(1, out)[0]
    wrong = []
    for k, (name, dtype, first, second, want) in enumerate(CASES):
        got = [float(g[k]) for g in two]
        print(
            f"{name} {dtype} of [{first!r}, {second!r}]: 2 processes {got}, 1 process {float(one[k])!r}, "
            f"want {float(want)!r}"
        )
        if any(g != float(want) for g in got):
            wrong.append((name, dtype, first, second))
    if wrong:
        print(f"BUG: {len(wrong)} cross-process all-reduces kept the old value: {wrong}")
        return 1
    print("OK: cross-process f16 all-reduces give the sum, the max and the min")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        host(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    raise SystemExit(main())
