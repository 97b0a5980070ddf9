"""Stage 1, graph: which op of the module first goes wrong?

Suffix search: S_k is the module from op k on, its inputs (the values live at k) fed
with float64 reference values. S_0 fails (stage 0) and an empty suffix cannot, so a
binary search over k finds the last k whose suffix still fails in about log2(N) target
compiles; op k then turns exact inputs into a wrong result: the culprit.
"""

from __future__ import annotations

from typing import Any

from xla_sentinel.bisect.context import Context

NAME = "graph"


def _suffix_outputs(ctx: Context, k: int) -> list[str]:
    return list(dict.fromkeys(v for v in ctx.info["returns"] if ctx.defined_at(v) >= k))


def suffix_fails(ctx: Context, k: int) -> bool:
    case = ctx.case(list(range(k, len(ctx.ops))), _suffix_outputs(ctx, k))
    return case is not None and ctx.check(case).fails


def _feedable(ctx: Context, k: int) -> bool:
    """Whether every value live at op k has a global value to feed: not inside a GSPMD
    module's manual region, whose values exist per device only (runners/xla_sentinel/programs/spmd.py)."""
    params, _ = ctx.subgraph(list(range(k, len(ctx.ops))), [])
    return all(p in ctx.values for p in params)


def run(ctx: Context) -> dict[str, Any]:
    starts = [k for k in range(len(ctx.ops)) if k == 0 or _feedable(ctx, k)]
    lo, hi = 0, len(starts)  # positions in starts; len(starts): the empty suffix
    probes = []
    while hi - lo > 1:
        mid = (lo + hi) // 2
        fails = suffix_fails(ctx, starts[mid])
        probes.append([starts[mid], fails])
        lo, hi = (mid, hi) if fails else (lo, mid)
    lo = starts[lo]
    ctx.culprit = lo
    op = ctx.ops[lo]
    return {"culprit_index": lo, "culprit_op": ctx.canonical_op(lo), "op_text": op["text"],
            "value": op["results"][0]["vid"] if op["results"] else None,
            "ops": len(ctx.ops), "probes": probes}


def isolate_each(ctx: Context) -> list[int]:
    """The linear alternative: every non-constant op compiled alone on reference inputs;
    the indices of those that fail (the benchmark's baseline)."""
    failing = []
    for i, op in enumerate(ctx.ops):
        if op["name"] == "stablehlo.constant":
            continue
        case = ctx.case([i])
        if case is not None and ctx.check(case).fails:
            failing.append(i)
    return failing
