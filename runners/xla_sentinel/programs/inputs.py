"""Input values for programs: domain-aware by default, special values on purpose.

The recipe is (seed, index, special): the same recipe gives the same arrays. Ordinary
inputs stay where references are finite and well conditioned; special inputs mix in
ties (x.5 for rounding, repeated values for sort and argmax), signed zeros, subnormals,
huge and tiny magnitudes, NaN and Inf, integer extremes, and out-of-range indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.graph import Graph, Value
from xla_sentinel.core.names import FLOATS
from xla_sentinel.ops.entries.templates import INVARIANTS as TEMPLATE_INVARIANTS
from xla_sentinel.ops.numpy_forms import float_info


def _float_special(rng: np.random.Generator, dt: np.dtype, n: int) -> np.ndarray:
    info = float_info(dt)
    pool = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, 1.0, -1.0, float(info.tiny),
                     float(info.tiny) / 4, float(info.max) / 2, -float(info.max) / 2, 1e-30,
                     np.nan, np.inf, -np.inf, 3.0, 3.0], dtype=np.float64)
    base = rng.normal(size=n)
    pick = rng.random(n) < 0.5
    base[pick] = rng.choice(pool, size=int(pick.sum()))
    with np.errstate(over="ignore"):
        return base.astype(dt)


def _int_special(rng: np.random.Generator, dt: np.dtype, n: int) -> np.ndarray:
    info = np.iinfo(dt)
    pool = np.array([info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 63, 64, 1000],
                    dtype=np.int64)
    base = rng.integers(max(info.min, -8), min(info.max, 16) + 1, size=n)
    pick = rng.random(n) < 0.5
    base[pick] = rng.choice(pool, size=int(pick.sum()))
    return np.clip(base, info.min, info.max).astype(dt)


def make_array(rng: np.random.Generator, shape: Sequence[int], dtype: str, special: bool) -> np.ndarray:
    dt = NP_DTYPES[dtype]
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        flat = rng.random(n) < 0.5
    elif dtype in FLOATS:
        if special:
            flat = _float_special(rng, dt, n)
        else:
            scale = float(rng.choice([0.1, 1.0, 4.0]))
            flat = (rng.normal(size=n) * scale).astype(dt)
    elif special:
        flat = _int_special(rng, dt, n)
    else:
        lo = -8 if np.iinfo(dt).min < 0 else 0
        flat = rng.integers(lo, 17, size=n).astype(dt)
    return np.asarray(flat, dtype=dt).reshape(tuple(shape))


def make_inputs(recipe: dict[str, Any], params: Sequence[Value]) -> list[np.ndarray]:
    """Arrays for the program's parameters (Graph.inputs), in argument order, from a recipe.
    The parameters the recipe's `stress` names are then redrawn by stress_array."""
    rng = np.random.default_rng([recipe["seed"], recipe["index"], 0x1A9])
    special = bool(recipe.get("special", False))
    arrays = [make_array(rng, v.shape, v.dtype, special) for v in params]
    stress = recipe.get("stress") or ()
    if stress:
        # A stream of its own: every other parameter keeps the values it had.
        srng = np.random.default_rng([recipe["seed"], recipe["index"], STRESS_STREAM])
        for k, v in enumerate(params):
            if v.input in stress:
                arrays[k] = stress_array(srng, v.shape, v.dtype)
    return arrays


# Stress inputs for the invariants of templates (docs/detection.md, "Invariants"): from
# generator version 2 on, a share STRESS_P of the programs whose templates declare
# invariants draw their float operands huge (logits around 1e10, or an eighth of the
# dtype's largest value where that is less), so a softmax's max shift, a layer norm's
# variance or an exp near overflow is exercised. Drawn from their own stream, decided by
# stress_recipe: version 1 draws exactly what it drew before.
STRESS_P = 0.1
STRESS_STREAM = 0x57E55
STRESS_LOGIT = 1e10


def stress_array(rng: np.random.Generator, shape: Sequence[int], dtype: str) -> np.ndarray:
    """Normal values of magnitude min(1e10, max/8) of `dtype`, a quarter of them ordinary."""
    dt = NP_DTYPES[dtype]
    n = int(np.prod(shape, dtype=np.int64))
    scale = min(STRESS_LOGIT, float(float_info(dt).max) / 8)
    flat = rng.normal(size=n) * scale
    plain = rng.random(n) < 0.25
    flat[plain] = rng.normal(size=int(plain.sum()))
    with np.errstate(over="ignore"):
        return flat.astype(dt).reshape(tuple(shape))


def stress_recipe(graph: Graph, seed: int, index: int, version: int) -> dict[str, Any]:
    """The recipe's `stress` part: {"stress": [parameter positions]} for a share STRESS_P of
    the programs where a template that declares invariants (templates.INVARIANTS) reads a
    float parameter as its first operand; {} otherwise, and always under generator version 1."""
    if version < 2:
        return {}
    positions = sorted({v.input for n in graph.nodes if n.op in TEMPLATE_INVARIANTS and n.args
                        for v in [graph.values[n.args[0]]] if v.input is not None and v.dtype in FLOATS})
    if not positions or np.random.default_rng([seed, index, STRESS_STREAM, 1]).random() >= STRESS_P:
        return {}
    return {"stress": positions}


def matching_array(rng: np.random.Generator, shape: Sequence[int], dtype: str,
                   stats: dict[str, Any] | None) -> np.ndarray:
    """An array drawn to match one argument's recorded statistics (runners/xla_sentinel/programs/argstats.py):
    floats normal with the recorded mean and std inside [min, max], the extremes present,
    and the recorded fractions of zeros, NaN, Inf and subnormals planted; integers and
    bools uniform over the recorded value range, so an index stays a valid index."""
    if not stats:
        return make_array(rng, shape, dtype, special=False)
    dt = NP_DTYPES[dtype]
    n = int(np.prod(shape, dtype=np.int64))
    if dtype in FLOATS:
        flat = _matching_floats(rng, dt, n, stats)
    else:
        lo = int(_num(stats, "min", 0))
        hi = int(_num(stats, "max", lo))
        flat = rng.integers(lo, hi + 1, size=n)
        if n >= 2:
            flat[rng.choice(n, 2, replace=False)] = [lo, hi]
        _plant(rng, flat, float(stats.get("zero", 0.0)), 0 if lo <= 0 <= hi else None)
    return np.asarray(flat).astype(dt).reshape(tuple(shape))


def _matching_floats(rng: np.random.Generator, dt: np.dtype, n: int, stats: dict[str, Any]) -> np.ndarray:
    # A bound or moment not recorded (a hand-written stats.json) leaves that side open.
    lo, hi = _num(stats, "min", -np.inf), _num(stats, "max", np.inf)
    finite_mid = (lo + hi) / 2 if np.isfinite(lo + hi) else 0.0
    mean = _num(stats, "mean", finite_mid)
    std = abs(_num(stats, "std", (hi - lo) / 4 if np.isfinite(hi - lo) else 1.0))
    flat = np.clip(rng.normal(mean, std, size=n), lo, hi)
    if n >= 2 and np.isfinite(lo) and np.isfinite(hi):
        flat[rng.choice(n, 2, replace=False)] = [lo, hi]
    tiny = float(float_info(dt).tiny)
    order = rng.permutation(n)
    start = 0
    for key, value in (("zero", 0.0), ("nan", np.nan), ("inf", np.inf), ("subnormal", None)):
        k = int(round(_num(stats, key, 0.0) * n))
        idx = order[start:start + k]
        start += k
        signs = rng.choice([-1, 1], size=len(idx)) if lo < 0 else 1
        flat[idx] = tiny * rng.uniform(0.1, 0.9, size=len(idx)) * signs if value is None else value
    with np.errstate(over="ignore"):
        return flat.astype(dt)


def _plant(rng: np.random.Generator, flat: np.ndarray, fraction: float, value: Any) -> None:
    k = int(round(fraction * flat.size))
    if value is not None and k:
        flat[rng.choice(flat.size, k, replace=False)] = value


def _num(stats: dict[str, Any], key: str, default: float) -> float:
    value = stats.get(key)
    return default if value is None else float(value)
