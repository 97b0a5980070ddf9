"""StableHLO-level rules: which ops of a module make it discrete (its exact ties flip
legally) and which fix their results bitwise. Runs in workers."""

from __future__ import annotations

import re

from .dtypes import DISCRETE_OPS

_OP_NAME = re.compile(r"\b(?:stablehlo|chlo)\.[a-z_]+")


def has_discrete_ops(module: str) -> bool:
    """Whether a module without a graph (replayed) holds an op whose exact ties flip
    legally, anywhere in it (called functions and regions too)."""
    return not DISCRETE_OPS.isdisjoint(_OP_NAME.findall(module))
