"""Hand-built finding folders: a jax function lowered to StableHLO, its inputs, and the
failing target's options and plugins, laid out as the campaign writes them."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from xla_sentinel.core.dtypes import name_of
from xla_sentinel.core.program import Program
from xla_sentinel.triage.signature import signature_id


def make_finding(folder: Path, fn: Callable[..., Any], inputs: Sequence[np.ndarray],
                 plugins: Sequence[str] = (), options: dict[str, Any] | None = None,
                 verdict: str = "mismatch", dtype: str = "f32",
                 evidence: dict[str, Any] | None = None) -> Path:
    import jax

    module = jax.jit(fn).lower(*inputs).as_text()
    program = Program(id=folder.name, module=module, inputs=list(inputs),
                      input_dtypes=[name_of(x.dtype) for x in inputs],
                      provenance={"source": "test"})
    program.save(folder / "program")
    record = {"id": folder.name, "campaign": "test", "program": folder.name, "target": "default",
              "verdict": verdict, "culprit_op": None, "culprit_pass": None, "fusion_kind": None,
              "dtype": dtype, "evidence": {"target_options": options or {}, "plugins": list(plugins),
                           **(evidence or {})},
              "dir": folder.name, "time": "2026-01-01T00:00:00+00:00"}
    record["signature"] = signature_id(record)
    (folder / "finding.json").write_text(json.dumps(record, indent=1))
    return folder


def select_program(x: Any, y: Any) -> Any:
    """A select on a non-strict compare (what select_ge_to_gt breaks on ties) among other ops."""
    from jax import lax

    a = x * 2
    b = y + 3
    noise = lax.abs(x - y) * 5
    picked = lax.select(a >= b, a, b - 1)
    return picked - noise, lax.max(x, y) + 7


def select_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.integers(-5, 6, size=(8, 8)).astype(np.int32)
    y = (2 * x - 3).astype(np.int32)
    y[::2] = rng.integers(-5, 6, size=(4, 8))  # half the rows tie (2x == y + 3), half do not
    return [x, y]


def shift_program(x: Any, s: Any) -> Any:
    from jax import lax

    scaled = x * 3 + 1
    shifted = lax.shift_right_arithmetic(scaled, s)
    return shifted + (x & 7), lax.shift_left(x, s)


def shift_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.integers(-1000, 1000, size=(16, 4)).astype(np.int32),
            rng.integers(0, 5, size=(16, 4)).astype(np.int32)]


def exp_program(x: Any, y: Any) -> Any:
    import jax.numpy as jnp

    h = jnp.tanh(y) * 0.5
    e = jnp.exp(jnp.clip(x, -4.0, 4.0))
    return e * y + h, jnp.sin(x) - y


def exp_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(2)
    return [rng.normal(size=(6, 5)).astype(np.float32), rng.normal(size=(6, 5)).astype(np.float32)]


def bf16_exp_program(x: Any, y: Any) -> Any:
    """bf16 inputs, an f32 exp in the middle, an f32 and a bf16 output."""
    import jax.numpy as jnp

    a = (x * y).astype(jnp.float32)
    b = jnp.exp(a) * 3.0
    return b, b.astype(jnp.bfloat16) + x


def bf16_exp_inputs() -> list[np.ndarray]:
    import ml_dtypes

    rng = np.random.default_rng(5)
    return [rng.normal(size=(6, 7)).astype(ml_dtypes.bfloat16) for _ in range(2)]


def concat3_program(x: Any, y: Any) -> Any:
    """Concatenates of two and of three arrays (the later, three, is the one found)."""
    import jax.numpy as jnp

    two = jnp.concatenate([x * 2, y], axis=0)
    three = jnp.concatenate([y, x, y - 1], axis=1)
    return jnp.sin(two) + 1, three * 3


def concat2_program(x: Any, y: Any) -> Any:
    import jax.numpy as jnp

    return jnp.cos(jnp.concatenate([x - y, y], axis=1)) * 2


def concat_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.normal(size=(4, 4)).astype(np.float32) for _ in range(2)]


def atan2_program(x: Any, y: Any) -> Any:
    """abort_on_pattern kills any compile that holds an atan2."""
    import jax.numpy as jnp

    a = jnp.sin(x) * y
    b = jnp.arctan2(a, y + 2)
    return b - x, jnp.exp(y)


def nan_program(x: Any, y: Any) -> Any:
    import jax.numpy as jnp

    return jnp.maximum(x * 2, y) + 1, x - y


def nan_inputs() -> list[np.ndarray]:
    """A NaN in each input: nan_dropping_max loses the one in max's first operand."""
    rng = np.random.default_rng(9)
    x, y = (rng.normal(size=(5, 6)).astype(np.float32) for _ in range(2))
    x[1, 2] = y[3, 4] = np.nan
    return [x, y]


def convert_program(x: Any, y: Any) -> Any:
    """A scaled f32 value converted to bf16 and moved (an output fixed bitwise), beside an
    output that is not."""
    import jax.numpy as jnp

    scaled = x * 3.0
    narrow = -scaled.astype(jnp.bfloat16).T
    return narrow, jnp.exp(jnp.clip(y, -4.0, 4.0)) + x


def convert_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.normal(size=(6, 5)).astype(np.float32), rng.normal(size=(6, 5)).astype(np.float32)]
