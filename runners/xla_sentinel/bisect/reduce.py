"""Stage 2, reduce: the fewest ops that still fail (ddmin, 1-minimal).

Starts from the culprit's suffix. Dropping an op makes the values it produced parameters
fed with their float64 reference values, so every candidate is a valid module. The
culprit alone is tried first, since it usually fails alone. Each accepted step is
compiled and run twice more: a step that answers differently ends the reduction, so a
nondeterministic failure is never reduced into a wrong reproducer.

For a crash, hang or compile error the op that "first diverges" means nothing (no op
computes a wrong value): the suffix search stops at the first op the failure needs, often
a sharding annotation or a constant that feeds the op the compiler chokes on. The culprit
is then the last op of the reduced case that computes something: every kept op is needed,
and the ones before it only make its operands what the failing compile needs. So too for
wrong numbers where the search stops at a sharding constraint (an SPMD partitioner bug
that needs its operand laid out so) or at a constant, whose value no compiler gets wrong
(a bug that needs a loop's trip count known: s31-i2080's shift-then-reshape, whose loop
algsimp unrolls only from a constant start).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import Case
from xla_sentinel.core.stablehlo import is_annotation

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


def _layout(op: dict[str, Any]) -> bool:
    """A sharding annotation that only lays a value out: not where a GSPMD manual region
    starts, which stands for the region (the suffix search cannot start inside it)."""
    return is_annotation(op) and "@SPMDFullToShardShape" not in op["text"]


def _constant(op: dict[str, Any]) -> bool:
    return bool(op["name"] == "stablehlo.constant")


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
            result = False
            if case is not None and ctx.check(case).fails:
                again = ctx.check(case, repeat=True)
                if again.deterministic is False or not again.fails:
                    raise _Nondeterministic(f"ops {sorted(keep)}")
                accepted[key] = case
                result = True
            cache[key] = result
        return cache[key]

    start = list(range(ctx.culprit, len(ctx.ops)))
    # An invariant finding keeps the op that computes the invariant's output: the smallest
    # case that still breaks the invariant, not one whose other numbers happen to differ.
    required = {i for i in map(ctx.defined_at, ctx.invariant_values()) if i >= ctx.culprit}

    def with_required(keep: list[int]) -> bool:
        return fails(sorted({*keep, *required}))

    try:
        rest = [i for i in start if i not in required]
        if with_required([ctx.culprit]):
            keep = sorted({ctx.culprit, *required})
        else:
            keep = sorted({*ddmin(rest, with_required), *required}) if rest else start
    except _Nondeterministic as e:
        ctx.stopped = "nondeterministic"
        return {"nondeterministic_at": str(e), "tests": len(cache)}
    case = accepted.get(frozenset(keep))
    if case is None:  # the suffix itself: kept as the stage-1 cut, already known to fail
        case = ctx.case(start, [v for v in ctx.info["returns"] if ctx.defined_at(v) >= ctx.culprit])
    ctx.reduced = case
    alone = cache.get(frozenset({ctx.culprit, *required}), False)
    moved = None
    if ctx.compiler_failure or _layout(ctx.ops[ctx.culprit]) or _constant(ctx.ops[ctx.culprit]):
        # A sharding constraint computes nothing either: where the suffix search stops at
        # one (s31-i124: the GSPMD Sharding call of an input), the bug needs the layout it
        # gives its value, and the op that computes wrongly on it comes later. So for a
        # constant, which the bug needs as a constant (fed as a parameter, it is right).
        computing = [i for i in sorted(keep)
                     if not is_annotation(ctx.ops[i]) and not _constant(ctx.ops[i])]
        if computing and computing[-1] != ctx.culprit:
            moved = {"from": ctx.canonical_op(ctx.culprit), "to": ctx.canonical_op(computing[-1])}
            ctx.culprit = computing[-1]
    first_wrong = None
    if moved is None and not alone and not ctx.compiler_failure and ctx.invariant is None \
            and _computes_nothing(ctx.ops[ctx.culprit]):
        first_wrong = _first_wrong(ctx, sorted(keep))
        if first_wrong["op"] is not None and first_wrong["op"] != ctx.culprit:
            moved = {"from": ctx.canonical_op(ctx.culprit), "to": ctx.canonical_op(first_wrong["op"]),
                     "why": "the first kept op whose value comes out wrong"}
            ctx.culprit = first_wrong["op"]
    return {"ops_before": len(ctx.ops), "ops_after": len(keep), "kept": sorted(keep),
            **({"kept_for_invariant": sorted(required)} if required else {}),
            **({"culprit_moved": moved} if moved else {}),
            **({"first_wrong": first_wrong["probes"]} if first_wrong else {}),
            "kept_ops": [ctx.ops[i]["name"] for i in sorted(keep)], "tests": len(cache),
            "culprit_alone_fails": alone}


def _computes_nothing(op: dict[str, Any]) -> bool:
    """An op that only moves or selects values (rules.py's `selects` tag: a broadcast, a
    slice, a reshape) or calls a function whose value is right alone: a culprit that does
    not fail alone there is where the failure starts, not what computes wrongly. An op that
    computes (a compare that a fault corrupts only where it feeds a select) stays named."""
    return "selects" in op["tags"] or op["name"] == "func.call"


def _first_wrong(ctx: Context, keep: list[int]) -> dict[str, Any]:
    """The first op of the reduced case `keep` whose own value comes out wrong: the case
    returning that op's results alone (the ops after it left out), checked as every cut
    is. Where the culprit computes nothing and does not fail alone, the suffix search
    named the first op the failure needs (the broadcast a divide is rewritten around, the
    slice a scatter copies from), not the op that computes wrongly on right operands."""
    probes: list[list[Any]] = []
    for i in keep:
        op = ctx.ops[i]
        if is_annotation(op) or _constant(op):
            continue
        outputs = [r["vid"] for r in op["results"] if r["dtype"] is not None]
        case = ctx.case([k for k in keep if k <= i], outputs) if outputs else None
        if case is None:
            continue
        wrong = ctx.check(case).fails
        probes.append([op["name"], wrong])
        if wrong:
            producer = _relabelled(ctx, i, keep)
            if producer is not None:
                # A reshape moves no element: its value is its operand's, read in place.
                # Wrong only beside its producer (the in-place copy of a scatter that XLA
                # fuses with it, shift_set_then_reshape), it names that producer.
                probes.append([ctx.ops[producer]["name"], "the producer of a reshape"])
                return {"op": producer, "probes": probes}
            return {"op": i, "probes": probes}
    return {"op": None, "probes": probes}


def _relabelled(ctx: Context, i: int, keep: list[int]) -> int | None:
    """The kept op whose value op `i` only reshapes (a reshape, or a broadcast_in_dim
    that adds unit dimensions: the same elements in the same order), or None."""
    op = ctx.ops[i]
    if op["name"] not in ("stablehlo.reshape", "stablehlo.broadcast_in_dim") or len(op["operands"]) != 1:
        return None
    (operand,) = op["operands"]
    shape, result = ctx.shape(operand), op["results"][0]["shape"]
    if shape is None or result is None or math.prod(shape) != math.prod(result):
        return None
    if op["name"] == "stablehlo.broadcast_in_dim":
        dims = re.search(r"dims = \[([\d, ]*)\]", op["text"])
        order = [int(d) for d in dims.group(1).split(",") if d.strip()] if dims else None
        # Increasing dims: no transpose; the same non-unit sizes: nothing repeated.
        if order is None or order != sorted(order) or [d for d in result if d != 1] != [d for d in shape if d != 1]:
            return None
    producer = ctx.defined_at(operand)
    return producer if producer in keep else None
