"""Stage 2, reduce: the fewest ops that still fail (ddmin, 1-minimal).

Starts from the culprit's suffix. Dropping an op makes the values it produced parameters
fed with their float64 reference values, so every candidate is a valid module. The
culprit alone is tried first, since it usually fails alone. Each accepted step is
compiled and run twice more: a step that answers differently ends the reduction, so a
nondeterministic failure is never reduced into a wrong reproducer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .context import Context
from .lab import Case

NAME = "reduce"
MAX_TESTS = 300


class _Nondeterministic(Exception):
    pass


def ddmin(items: list[int], fails: Callable[[list[int]], bool]) -> list[int]:
    """Zeller's ddmin: a 1-minimal sublist of `items` (which fails) that still fails."""
    n = 2
    while len(items) >= 2:
        size = len(items) / n
        chunks = [items[round(i * size):round((i + 1) * size)] for i in range(n)]
        chunks = [c for c in chunks if c]
        for chunk in chunks:
            if fails(chunk):
                items, n = chunk, 2
                break
        else:
            for chunk in chunks:
                rest = [x for x in items if x not in chunk]
                if fails(rest):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    return items
                n = min(len(items), 2 * n)
    return items


def run(ctx: Context) -> dict[str, Any]:
    assert ctx.culprit is not None
    cache: dict[frozenset[int], bool] = {}
    accepted: dict[frozenset[int], Case] = {}

    def fails(keep: list[int]) -> bool:
        key = frozenset(keep)
        if key not in cache:
            if len(cache) >= MAX_TESTS:
                return False
            case = ctx.case(sorted(keep))
            result = case is not None and ctx.check(case).fails
            if result:
                again = ctx.check(case, repeat=True)
                if again.deterministic is False or not again.fails:
                    raise _Nondeterministic(f"ops {sorted(keep)}")
                accepted[key] = case
            cache[key] = result
        return cache[key]

    start = list(range(ctx.culprit, len(ctx.ops)))
    try:
        keep = [ctx.culprit] if fails([ctx.culprit]) else ddmin(start, fails)
    except _Nondeterministic as e:
        ctx.stopped = "nondeterministic"
        return {"nondeterministic_at": str(e), "tests": len(cache)}
    case = accepted.get(frozenset(keep))
    if case is None:  # the suffix itself: kept as the stage-1 cut, already known to fail
        case = ctx.case(start, [v for v in ctx.info["returns"] if ctx.defined_at(v) >= ctx.culprit])
    ctx.reduced = case
    return {"ops_before": len(ctx.ops), "ops_after": len(keep), "kept": sorted(keep),
            "kept_ops": [ctx.ops[i]["name"] for i in sorted(keep)], "tests": len(cache),
            "culprit_alone_fails": cache.get(frozenset([ctx.culprit]), False)}
