"""The op table: every op the generator knows, assembled from ops/entries, and `ops_for`,
which picks the ops a value may feed. Imports no jax (each op's lax form is its builder
in ops/lax_builders.py)."""

from __future__ import annotations

from collections.abc import Sequence

from xla_sentinel.ops.entries import (
    control,
    conversion,
    elementwise,
    indexing,
    indices,
    linalg,
    loops,
    mixed_precision,
    reductions,
    shape,
    sort,
    templates,
)
from xla_sentinel.ops.spec import OpDef, registry

# In the generator's draw order: it picks from ops_for's list by index, so moving an
# entry, like adding one, changes the programs a seed gives (tests/fuzz/test_golden.py).
OPS: dict[str, OpDef] = registry(
    elementwise.ENTRIES, conversion.ENTRIES, reductions.ENTRIES, linalg.ENTRIES, shape.ENTRIES,
    indexing.ENTRIES, sort.ENTRIES, control.ENTRIES,
    # Program shapes from real bugs (SHAPE_FAMILIES): drawn only where a campaign asks.
    indices.ENTRIES, loops.ENTRIES, mixed_precision.ENTRIES, templates.ENTRIES,
)


def ops_for(dtype: str, allow: Sequence[str] = (), exclude: Sequence[str] = (),
            families: Sequence[str] = ()) -> list[OpDef]:
    """The ops that accept `dtype` as their primary operand, filtered by name; an op of a
    shape family only where `families` holds it or `allow` names it."""
    return [op for op in OPS.values()
            if dtype in op.dtypes and (not allow or op.name in allow) and op.name not in exclude
            and (op.family is None or op.family in families or op.name in allow)]
