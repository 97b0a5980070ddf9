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

The flags are the presets and single-pass disables (PASS_DISABLES: algsimp). Where nothing
cures the reduced case, flags and passes are tried again on the original module (the
evidence's `searched_on`, with the reduced case's own tries under `reduced_case`).
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
# Single passes a user can disable with a flag, tried as cures beside the presets, before
# the first preset that disables several (no_algsimp_fusion): a bug that disabling the
# simplifier alone cures (dynamic_slice_of_dynamic_slice, shift_set_then_reshape,
# divide_by_broadcast_reciprocal) is named by that flag, not by the blunter pair.
PASS_DISABLES = ("algsimp",)


def flags_to_try(base: dict[str, Any]) -> list[dict[str, Any]]:
    """The cures tried on top of the target's options `base`, in order: the presets
    (options.cures_to_try) with PASS_DISABLES each alone before the first preset that
    disables several passes."""
    presets = cures_to_try(base)
    disabled = [p for p in str(base.get("xla_disable_hlo_passes", "")).split(",") if p]
    singles = [{"xla_disable_hlo_passes": ",".join([*disabled, p])} for p in PASS_DISABLES if p not in disabled]
    singles = [o for o in singles if o not in presets]
    at = next((k for k, o in enumerate(presets) if "," in str(o.get("xla_disable_hlo_passes", ""))), len(presets))
    return presets[:at] + singles + presets[at:]


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


def _search(ctx: Context, case: Case) -> dict[str, Any]:
    """The flags tried on `case` and the pass search over the passes XLA ran on it."""
    base = ctx.lab.options
    flags = {flag_name(o): _cures(ctx, case, {**base, **o}) for o in flags_to_try(base)}
    curing_flags = [f for f, cured in flags.items() if cured]  # most specific first
    evidence: dict[str, Any] = {"flags": flags, "curing_flags": curing_flags}
    disabled = set(str(base.get("xla_disable_hlo_passes", "")).split(","))
    seen = _passes_seen(ctx, case)
    if seen is None:
        return {**evidence, "passes_seen": None, "curing_passes": None, "pass_tests": [],
                "pass_search": "no compile of the case lists its passes"}
    passes = [p for p in seen if p not in disabled]
    found, tests = curing_passes(ctx, case, passes) if passes else (None, [])
    return {**evidence, "passes_seen": passes, "curing_passes": sorted(found) if found else None,
            "pass_tests": tests}


def run(ctx: Context) -> dict[str, Any]:
    case = ctx.reduced
    assert case is not None
    evidence = _search(ctx, case)
    evidence["searched_on"] = "reduced case"
    if not evidence["curing_flags"] and not evidence["curing_passes"] and ctx.full is not None \
            and ctx.full.ops != case.ops:
        # Nothing cures the reduced case: where the bug shows under every configuration
        # the campaign ran, the cure may need what the reduction dropped (a constant the
        # simplifier folds). Tried again on the original module; the report says so.
        original = _search(ctx, ctx.full)
        evidence["reduced_case"] = {k: evidence[k] for k in ("flags", "curing_flags", "curing_passes")}
        evidence.update(original, searched_on="original module (nothing cured the reduced case)")
    # The first curing flag names the cure; the passes are still searched, for the report.
    curing_flags, found = evidence["curing_flags"], evidence["curing_passes"]
    ctx.culprit_pass = curing_flags[0] if curing_flags else ",".join(found) if found else None
    # The options the cure adds, for the bundle's check that its repro.py is cured by them.
    base = ctx.lab.options
    options = next(({**o} for o in flags_to_try(base) if curing_flags and flag_name(o) == curing_flags[0]),
                   None) or (_with_disabled(base, found) if found else None)
    evidence["cure_options"] = {k: v for k, v in options.items() if base.get(k) != v} if options else None
    return evidence
