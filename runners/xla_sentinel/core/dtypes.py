"""Dtypes in numpy: each name's numpy type (names.py holds the names), unit roundoffs,
and the oracle tolerance table."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from xla_sentinel.core.names import DTYPES, FLOATS, INTS, MLIR_NAMES, NARROW_FLOATS  # noqa: F401 - re-exported with their numpy types

NP_DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
    "f64": np.dtype(np.float64),
    "s32": np.dtype(np.int32),
    "s8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "u32": np.dtype(np.uint32),
    "bool": np.dtype(np.bool_),
}
assert tuple(NP_DTYPES) == DTYPES
NAMES = {v: k for k, v in NP_DTYPES.items()}
# Wider integers jax emits for indices and shapes: a bisector's cut can carry them, a
# program's inputs never do.
INDEX_ELEMENT_TYPES: dict[str, tuple[str, np.dtype]] = {
    "s64": ("i64", np.dtype(np.int64)), "u64": ("ui64", np.dtype(np.uint64)),
    "s16": ("i16", np.dtype(np.int16)), "u16": ("ui16", np.dtype(np.uint16))}

# Unit roundoff (half an ulp at 1.0) of each float format.
UNIT_ROUNDOFF = {"f64": 2.0**-53, "f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}

# The oracle factor k per dtype (docs/architecture.md, measured over 600 random programs with zero
# false positives): a configuration is flagged when its normwise error against float64
# exceeds k * max(best other configuration, noise model, unit roundoff).
TOLERANCE_K = {"f64": 32.0, "f32": 32.0, "f16": 8.0, "bf16": 8.0}
# Programs with discrete ops (compare, select, floor, round, ...) flip exact ties legally.
DISCRETE_FACTOR = 2.0

def name_of(dtype: np.dtype | type) -> str:
    """The short name ("f32") of a numpy or jax dtype."""
    return NAMES[np.dtype(dtype)]


def is_float(name: str) -> bool:
    return name in FLOATS


def subnormal(a: np.ndarray) -> np.ndarray:
    """Elementwise: a nonzero value below the smallest normal of the array's own float type."""
    x = np.asarray(a).astype(np.float64)
    tiny = float(ml_dtypes.finfo(np.asarray(a).dtype).tiny)  # type: ignore[no-untyped-call]  # no hints
    below: np.ndarray = (x != 0) & (np.abs(x) < tiny)
    return below


def bit_view(name: str) -> np.dtype | None:
    """Unsigned integer dtype of the same width, used to store ml_dtypes in npz files."""
    if name == "bf16":
        return np.dtype(np.uint16)
    return None
