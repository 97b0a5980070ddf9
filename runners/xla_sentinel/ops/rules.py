"""StableHLO-level rules derived from the op table: which ops fix their results bitwise
(exact.py's tags) and which make a module discrete (its exact ties flip legally,
docs/architecture.md "Oracle"). A replayed module and a bisector's cut are judged by the
ops they hold with these, as a generated program is by its graph's entries; workers apply
them and the coordinator gets the answers in replies.
"""

from __future__ import annotations

import re
from typing import Any

from xla_sentinel.ops.spec import EXACT, SELECTS
from xla_sentinel.ops.table import OPS

BITWISE_TAGS = frozenset({"exact", "selects", "rounded"})
# StableHLO ops that no entry lowers to alone but every module may hold, with their
# bitwise tags: literals, index ramps and barriers (they pass their operands through).
STABLEHLO_ONLY_TAGS: dict[str, frozenset[str]] = {
    "stablehlo.constant": EXACT,
    "stablehlo.iota": EXACT,
    "stablehlo.optimization_barrier": SELECTS,
}


def _tags() -> dict[str, frozenset[str]]:
    tags = dict(STABLEHLO_ONLY_TAGS)
    for op in OPS.values():
        if len(op.stablehlo) != 1 or not op.tags & BITWISE_TAGS:
            continue  # several ops together mean what none of them means alone
        name = op.stablehlo[0]
        if tags.setdefault(name, op.tags & BITWISE_TAGS) != op.tags & BITWISE_TAGS:
            raise AssertionError(f"ops/entries: entries lowering to {name} disagree on its tags")
    return tags


STABLEHLO_TAGS: dict[str, frozenset[str]] = _tags()
DISCRETE_OPS: frozenset[str] = frozenset(h for op in OPS.values() if op.discrete for h in op.stablehlo)

_OP_NAME = re.compile(r"\b(?:stablehlo|chlo)\.[a-z_]+")


def has_discrete_ops(module: str) -> bool:
    """Whether a module without a graph (replayed) holds an op whose exact ties flip
    legally, anywhere in it (called functions and regions too)."""
    return not DISCRETE_OPS.isdisjoint(_OP_NAME.findall(module))


def annotate_ops(info: dict[str, Any]) -> dict[str, Any]:
    """Give each op of a module's info (bisect.module) its bitwise tags and whether it is
    discrete; a reduce whose body is a max or min selects. In place; returns `info`."""
    for op in info["ops"]:
        tags = STABLEHLO_TAGS.get(op["name"], frozenset())
        if op["name"] == "stablehlo.reduce" and re.search(r"applies stablehlo\.(maximum|minimum)", op["text"]):
            tags = frozenset({"selects"})
        op["tags"] = sorted(tags)
        op["discrete"] = op["name"] in DISCRETE_OPS
    return info
