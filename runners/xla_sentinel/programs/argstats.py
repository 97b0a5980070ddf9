"""Per-argument statistics of a recorded computation (stats.json), and their checks.

A trace recorded without values keeps only these numbers per argument: shape, dtype,
sharding, and for floats min, max, mean and std over the finite values and the fractions
of zeros, NaN, Inf and subnormals; for integers and bools the value range. Pure numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xla_sentinel.core.dtypes import NAMES, subnormal
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import ProgramError

FLOAT_KEYS = ("min", "max", "mean", "std", "zero", "nan", "inf", "subnormal")
INT_KEYS = ("min", "max", "zero")


def dtype_name(a: np.ndarray) -> str:
    """The engine's short dtype name, or numpy's own for a type the engine lacks."""
    return NAMES.get(np.dtype(a.dtype), str(a.dtype))


def arg_stats(a: np.ndarray) -> dict[str, Any]:
    """Statistics of one argument; never the values themselves."""
    a = np.asarray(a)
    name = dtype_name(a)
    out: dict[str, Any] = {"shape": list(a.shape), "dtype": name}
    n = a.size
    if n == 0:
        return out
    if name in FLOATS:
        x = a.astype(np.float64)
        finite = x[np.isfinite(x)]
        out.update(zero=float(np.mean(x == 0)), nan=float(np.mean(np.isnan(x))),
                   inf=float(np.mean(np.isinf(x))), subnormal=float(np.mean(subnormal(a))))
        if finite.size:
            out.update(min=float(finite.min()), max=float(finite.max()),
                       mean=float(finite.mean()), std=float(finite.std()))
    else:
        x = a.astype(np.int64)
        out.update(min=int(x.min()), max=int(x.max()), zero=float(np.mean(x == 0)))
    return out


def check_stats(stats: dict[str, Any], specs: list[dict[str, Any]], where: str) -> list[dict[str, Any] | None]:
    """The stats.json entries `arg0`, `arg1`, ... matched to the module's parameters, one per
    parameter (None where none was recorded); ProgramError naming `where` when an entry
    contradicts the module's signature or is not a statistic."""
    out: list[dict[str, Any] | None] = []
    known = {f"arg{i}" for i in range(len(specs))}
    extra = sorted(k for k in stats if k.startswith("arg") and k not in known)
    if extra:
        raise ProgramError(f"{where}: statistics for {extra[0]}, the module has {len(specs)} parameters")
    for i, spec in enumerate(specs):
        entry = stats.get(f"arg{i}")
        if entry is None:
            out.append(None)
            continue
        if not isinstance(entry, dict):
            raise ProgramError(f"{where}: arg{i} must be an object, got {type(entry).__name__}")
        if "shape" in entry and list(entry["shape"]) != spec["shape"]:
            raise ProgramError(f"{where}: arg{i} was recorded with shape {entry['shape']}, "
                               f"the module expects {spec['shape']}")
        if "dtype" in entry and entry["dtype"] != spec["dtype"]:
            raise ProgramError(f"{where}: arg{i} was recorded as {entry['dtype']}, "
                               f"the module expects {spec['dtype']}")
        for key in FLOAT_KEYS:
            value = entry.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise ProgramError(f"{where}: arg{i}.{key} must be a number, got {value!r}")
        if entry.get("min") is not None and entry.get("max") is not None and entry["min"] > entry["max"]:
            raise ProgramError(f"{where}: arg{i} has min {entry['min']} above max {entry['max']}")
        out.append(entry)
    return out
