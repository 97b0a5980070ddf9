"""Input values for programs: domain-aware by default, special values on purpose.

The recipe is (seed, index, special): the same recipe gives the same arrays. Ordinary
inputs stay where references are finite and well conditioned; special inputs mix in
ties (x.5 for rounding, repeated values for sort and argmax), signed zeros, subnormals,
huge and tiny magnitudes, NaN and Inf, integer extremes, and out-of-range indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from .dtypes import FLOATS, NP_DTYPES


def _float_special(rng: np.random.Generator, dt: np.dtype, n: int) -> np.ndarray:
    info = ml_dtypes.finfo(dt)
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


def make_inputs(recipe: dict[str, Any], specs: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    """Arrays for the program's parameters, in argument order, from a recipe."""
    rng = np.random.default_rng([recipe["seed"], recipe["index"], 0x1A9])
    special = bool(recipe.get("special", False))
    return [make_array(rng, s["shape"], s["dtype"], special) for s in specs]
