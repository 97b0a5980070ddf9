"""Trace folders of real XLA bugs in jaxlib 0.10.2, made from the reproducers in
bench/repros/ the way a user's job would hand them over: a whole (small) jitted step lowered
to StableHLO, the buggy op among ordinary ones, and the inputs that show the bug. Run as a
script it writes them: `python tests/bisect/real_traces.py OUT`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

# Each trace is lowered in a process of its own: the SPMD one needs virtual devices,
# which jax reads once, when it starts.
_LOWER = """
import os, sys
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
sys.path.insert(0, {here!r})
import real_traces
real_traces._{name}({out!r})
"""


def _save(out: Path, module: str, inputs: list[np.ndarray]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "module.mlir").write_text(module)
    np.savez(out / "inputs.npz", **{f"arg{i}": x for i, x in enumerate(inputs)})
    return out


def _spmd_pad(out: str) -> None:
    """bench/repros/spmd_pad_negative_low_interior.py inside a step: a value resharded
    along its dimension, padded there with low -1 and interior 1 (the SPMD partitioner
    aborts), between ops that compile fine."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))

    def step(x: Any, y: Any) -> Any:
        a = jnp.sin(x) * y + 1
        a = lax.with_sharding_constraint(a, NamedSharding(mesh, P(None, "x")))
        padded = lax.pad(a, np.float32(0), [(0, 0, 0), (-1, 0, 1)])
        return padded * 2, jnp.exp(y).sum()

    rng = np.random.default_rng(0)
    x, y = (rng.normal(size=(4, 8)).astype(np.float32) for _ in range(2))
    _save(Path(out), jax.jit(step).lower(x, y).as_text(), [x, y])


def _nan_max(out: str) -> None:
    """bench/repros/reduce_max_drops_nan.py inside a step: the max of 4,096 elements, one
    of them NaN (YNNPACK's reduction drops it), beside a scaled copy of the input."""
    import jax
    from jax import lax

    def step(x: Any, y: Any) -> Any:
        return lax.reduce_max(x, (0,)), (y * 3.0 - 1.0).sum()

    x = np.linspace(-2, 2, 4096, dtype=np.float32)
    x[1234] = np.nan
    y = np.linspace(0, 1, 64, dtype=np.float32)
    _save(Path(out), jax.jit(step).lower(x, y).as_text(), [x, y])


TRACES = ("spmd_pad", "nan_max")


def make(name: str, out: Path) -> Path:
    """Write trace `name` (one of TRACES) into folder `out`."""
    here = str(Path(__file__).resolve().parent)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    subprocess.run([sys.executable, "-c", _LOWER.format(here=here, name=name, out=str(out))],
                   check=True, env=env, capture_output=True, timeout=120)
    return out


if __name__ == "__main__":
    for trace in TRACES:
        print(make(trace, Path(sys.argv[1]) / trace))
