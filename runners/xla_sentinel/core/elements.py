"""Element types a cut can carry: the program model's, plus the wider integers jax emits
for indices and shapes (i64 scalars appear in most programs that slice)."""

from __future__ import annotations

import numpy as np

from xla_sentinel.core.dtypes import INDEX_ELEMENT_TYPES, NP_DTYPES
from xla_sentinel.core.program import MLIR_TYPES

MLIR_ELEMENTS: dict[str, str] = {**MLIR_TYPES, **{m: n for n, (m, _) in INDEX_ELEMENT_TYPES.items()}}
NUMPY: dict[str, np.dtype] = {**NP_DTYPES, **{n: d for n, (_, d) in INDEX_ELEMENT_TYPES.items()}}
_NAMES = {v: k for k, v in NUMPY.items()}


def name_of(dtype: np.dtype) -> str:
    return _NAMES[np.dtype(dtype)]
