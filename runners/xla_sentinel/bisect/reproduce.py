"""Stage 0, reproduce: does the finding still fail, and the same way twice?

A finding that does not fail again, or fails differently on a second compile, ends the
pipeline here: reducing a nondeterministic failure would produce a wrong reproducer. An
invariant finding fails again when the invariant is broken again (Context.check); the
evidence names it (`judged_by: invariant`, `invariant`, `violations`).

A finding whose numbers come out right beside the legal compile is checked again beside
its ops each compiled alone (Lab.legal_by_ops): the campaign judges a replayed module
beside that reference, and a bug that every configuration shares, the legal one
included, shows only there. Where it then fails, every later stage judges so (evidence
`legal`).
"""

from __future__ import annotations

from typing import Any

from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import LabError
from xla_sentinel.core.model import StillFails, Verdict
from xla_sentinel.core.stablehlo import partitions

NAME = "reproduce"


def run(ctx: Context) -> dict[str, Any]:
    keep = list(range(len(ctx.ops)))
    returns = list(dict.fromkeys(v for v in ctx.info["returns"] if ctx.defined_at(v) >= 0))
    case = ctx.case(keep, returns)
    if case is None:
        ctx.stopped = "not_reproduced"
        return {"fails": False, "reason": "the module returns only its parameters"}
    check = ctx.check(case, repeat=True)
    legal_by_ops = None
    if not check.fails and check.verdict == Verdict.PASS and not ctx.compiler_failure \
            and partitions(ctx.program.module) == 1:
        # Right beside the legal compile, yet flagged: where every configuration shares the
        # bug (the campaign judged it beside each op compiled alone, `eager_module`), the
        # legal compile is as wrong as the target. Judged beside the ops alone from here on.
        # (An SPMD module's legal run is unsharded already: docs/spmd.md "Bisecting".)
        ctx.lab.legal_by_ops = True
        try:
            again = ctx.check(case, repeat=True)
        except LabError:  # an op the reference cannot compile alone: as it was
            again = check
        if again.fails:
            check, legal_by_ops = again, ("the legal configuration compiled whole gives the target's "
                                          "wrong numbers: every case is judged beside its ops each "
                                          "compiled alone (the campaign's eager_module)")
        else:
            ctx.lab.legal_by_ops = False
    evidence = {"fails": check.fails, "verdict": check.verdict, "deterministic": check.deterministic,
                "ops": len(ctx.ops), **{k: v for k, v in check.evidence.items()
                                        if k in ("error", "threshold", "output", "max_rel", "judged_by",
                                                 "invariant", "declared_by", "count", "violations",
                                                 "invariant_lost")}}
    if legal_by_ops:
        evidence["legal"] = legal_by_ops
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
