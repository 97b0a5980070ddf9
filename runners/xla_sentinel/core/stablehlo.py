"""What the engine reads from StableHLO text without parsing it (no jax, no MLIR): how many
devices a module is partitioned over, which ops of a module's info only annotate
shardings, and the location name the bisector's cuts give each kept op (xla/cuts.py
writes it, bisect/fusion.py finds it in the optimized HLO's metadata)."""

from __future__ import annotations

import re
from typing import Any

# The location of op i of a cut (`sentinel.op<i>`); XLA copies it into each instruction's
# op_name metadata.
LOCATION_PREFIX = "sentinel.op"

# Ops that only say how a value is laid out over the devices, computing nothing: GSPMD's
# custom calls and Shardy's constraint and reshard ops.
_ANNOTATION = re.compile(r"custom_call @(?:Sharding|SPMDFullToShardShape|SPMDShardToFullShape)\b"
                         r"|sdy\.(?:sharding_constraint|reshard)\b")


_PARTITIONS = re.compile(r"mhlo\.num_partitions\s*=\s*(\d+)")


def partitions(module: str) -> int:
    """How many devices an SPMD module (StableHLO text) is partitioned over
    (`mhlo.num_partitions`), 1 if it does not say."""
    m = _PARTITIONS.search(module[:4096])  # a module attribute: in its head
    return int(m.group(1)) if m else 1


def is_annotation(op: dict[str, Any]) -> bool:
    """Whether an op of @main (module info) is a sharding annotation, not a computation."""
    return _ANNOTATION.search(op["text"]) is not None
