"""Stage 0, reproduce: does the finding still fail, and the same way twice?

A finding that does not fail again, or fails differently on a second compile, ends the
pipeline here: reducing a nondeterministic failure would produce a wrong reproducer. An
invariant finding fails again when the invariant is broken again (Context.check); the
evidence names it (`judged_by: invariant`, `invariant`, `violations`).
"""

from __future__ import annotations

from typing import Any

from xla_sentinel.bisect.context import Context
from xla_sentinel.core.model import StillFails

NAME = "reproduce"


def run(ctx: Context) -> dict[str, Any]:
    keep = list(range(len(ctx.ops)))
    returns = list(dict.fromkeys(v for v in ctx.info["returns"] if ctx.defined_at(v) >= 0))
    case = ctx.case(keep, returns)
    if case is None:
        ctx.stopped = "not_reproduced"
        return {"fails": False, "reason": "the module returns only its parameters"}
    check = ctx.check(case, repeat=True)
    evidence = {"fails": check.fails, "verdict": check.verdict, "deterministic": check.deterministic,
                "ops": len(ctx.ops), **{k: v for k, v in check.evidence.items()
                                        if k in ("error", "threshold", "output", "max_rel", "judged_by",
                                                 "invariant", "declared_by", "count", "violations",
                                                 "invariant_lost")}}
    if ctx.values_unavailable:
        # A compiler failure's cuts ran on stand-ins: say that the values were not there, and why.
        evidence["values"] = f"unavailable: {ctx.values_unavailable}"
    if ctx.promoted:
        evidence["module"] = ctx.promoted
    if ctx.still_fails is StillFails.REPRODUCE_ONLY or check.deterministic is False:
        # The campaign or this re-run saw two different answers from the same compile.
        ctx.stopped = "nondeterministic"
    elif not check.fails:
        ctx.stopped = "not_reproduced"
    else:
        ctx.full = ctx.reduced = case
    return evidence
