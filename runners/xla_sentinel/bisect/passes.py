"""Stage 4, pass and flag: which XLA flag, or which HLO pass disabled, cures the case?

Flags a user can set (options.cures_to_try: the target presets) are tried first, one by
one, and the first that cures names the cure: a bug that the fusion emitters' flag cures
is in that code path, and disabling the `fusion` pass, which also avoids it, would point
at the wrong place (issue 14). A curing pass names it only where no flag cures; the passes
are searched either way, for the report. Passes are group tested on the reduced case: all the passes XLA ran on it are disabled at once; if that
cures it, halves are tried and the curing half kept, then single passes are dropped while
the rest still cures, giving a 1-minimal curing set in about log2(P) compiles when one
pass is to blame. A group whose compile crashes (some passes are load-bearing) is split
rather than judged.
"""

from __future__ import annotations

from typing import Any

from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import Case
from xla_sentinel.core.model import COMPILER_FAILURES
from xla_sentinel.spec.options import cures_to_try, flag_name
from xla_sentinel.worker.client import WorkerDied, WorkerHung
from xla_sentinel.worker.protocol import ListPasses, RequestFailed

NAME = "passes"
MAX_COMPILES = 60


def _cures(ctx: Context, case: Case, options: dict[str, Any]) -> bool | None:
    """True: cured; False: the failure still shows; None: some other failure (a crash
    where passes that others depend on were disabled), which proves nothing."""
    check = ctx.check(case, options)
    if check.fails:
        return False
    return None if check.verdict in COMPILER_FAILURES else True


def _with_disabled(base: dict[str, Any], passes: list[str]) -> dict[str, Any]:
    already = [p for p in str(base.get("xla_disable_hlo_passes", "")).split(",") if p]
    return {**base, "xla_disable_hlo_passes": ",".join([*already, *passes])}


def curing_passes(ctx: Context, case: Case, passes: list[str]) -> tuple[list[str] | None, list[list[Any]]]:
    """A 1-minimal set of passes whose disabling cures `case`, and the tests made."""
    tests: list[list[Any]] = []
    base = ctx.lab.options

    def cures(group: list[str]) -> bool | None:
        if len(tests) >= MAX_COMPILES:
            return False
        result = _cures(ctx, case, _with_disabled(base, group))
        tests.append([",".join(group) if len(group) < 6 else f"{len(group)} passes", result])
        return result

    def find(group: list[str]) -> list[str] | None:
        result = cures(group)
        if result is True:
            return group
        if result is False or len(group) == 1:
            return None
        half = len(group) // 2
        return find(group[:half]) or find(group[half:])

    found = find(passes)
    if found is None:
        return None, tests
    while len(found) > 1:
        half = len(found) // 2
        if cures(found[:half]):
            found = found[:half]
        elif cures(found[half:]):
            found = found[half:]
        else:
            break
    for p in list(found):
        if len(found) > 1 and cures([q for q in found if q != p]):
            found = [q for q in found if q != p]
    return found, tests


def _passes_seen(ctx: Context, case: Case) -> list[str] | None:
    """Passes that changed the case when compiled under the target's options, in the
    target's worker (with its plugins) and in the reference worker (which also compiles a
    case whose failure is a crash of the target only); None when both fail to compile it
    (a real compiler crash takes every worker down), so there is nothing to search."""
    names: set[str] = set()
    listed = False
    for worker in (ctx.lab.target, ctx.lab.reference):
        ctx.lab.compiles[NAME] += worker is ctx.lab.target
        try:
            names.update(worker.call(ListPasses(case.module, ctx.lab.options),
                                     ctx.lab.probe_timeout).passes)
            listed = True
        except (WorkerDied, WorkerHung, RequestFailed):
            continue
    return sorted(names) if listed else None


def run(ctx: Context) -> dict[str, Any]:
    case = ctx.reduced
    assert case is not None
    base = ctx.lab.options
    flags = {flag_name(o): _cures(ctx, case, {**base, **o}) for o in cures_to_try(base)}
    curing_flags = [f for f, cured in flags.items() if cured]  # most specific first
    evidence: dict[str, Any] = {"flags": flags, "curing_flags": curing_flags}
    # The first curing flag names the cure; the passes are still searched, for the report.
    ctx.culprit_pass = curing_flags[0] if curing_flags else None
    disabled = set(str(base.get("xla_disable_hlo_passes", "")).split(","))
    seen = _passes_seen(ctx, case)
    if seen is None:
        return {**evidence, "passes_seen": None, "curing_passes": None, "pass_tests": [],
                "pass_search": "no compile of the case lists its passes"}
    passes = [p for p in seen if p not in disabled]
    found, tests = curing_passes(ctx, case, passes) if passes else (None, [])
    if found and not curing_flags:
        ctx.culprit_pass = ",".join(sorted(found))
    return {**evidence, "passes_seen": passes, "curing_passes": sorted(found) if found else None,
            "pass_tests": tests}

