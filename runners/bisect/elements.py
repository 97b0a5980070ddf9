"""Element types a cut can carry: the program model's, plus the wider integers jax emits
for indices and shapes (i64 scalars appear in most programs that slice)."""

from __future__ import annotations

import numpy as np

from ..dtypes import NP_DTYPES
from ..program import MLIR_TYPES

MLIR_ELEMENTS: dict[str, str] = {**MLIR_TYPES, "i64": "s64", "ui64": "u64", "i16": "s16",
                                 "ui16": "u16"}
NUMPY: dict[str, np.dtype] = {**NP_DTYPES, "s64": np.dtype(np.int64), "u64": np.dtype(np.uint64),
                              "s16": np.dtype(np.int16), "u16": np.dtype(np.uint16)}
_NAMES = {v: k for k, v in NUMPY.items()}


def name_of(dtype: np.dtype) -> str:
    return _NAMES[np.dtype(dtype)]
