"""Stage 2a, regions: which op inside the culprit's regions goes wrong?

The suffix search stops at an op of @main; where that op holds regions (a while, a case
or if, a shard_map's `sdy.manual_computation`) or is a `func.call`, the op that goes wrong
is inside it. The reduced case (for a call, the culprit alone), fed exact values as every
cut is, is taken apart in the reference worker (xla/cuts.py): calls inlined, then values
of a region exposed as extra results of every op around them, up to @main, which returns
only those. A while exposes the value of one iteration (a counter carried beside the
loop picks it; computed from the loop's initial values, which the cut feeds exactly), a
branch its value (zeros from the other branches), a manual computation each device's
value stacked. Their float64 reference is computed as every value of the finding is
(EveryValue: the probe's ops each alone in float64; the region op whole, so with its
devices where it is a manual computation, docs/spmd.md), and the target's values are
judged against it by the oracle as any case.

Control: the region's own arguments, exposed the same way, must come out right (else a
value is wrong however it leaves the region: no op inside is to blame). Prefix search:
P_n exposes the results of the first n ops of a region (constants and ops without a
tensor result aside). If P_all fails, the smallest failing n names the
first op whose value is wrong while every op before it in the region is right: the
culprit inside (about log2(N) probes). An op found that holds regions itself is descended
into the same way. The region path names where it sits, region by region:
`main/while#3/body/dynamic_update_slice#7` (op indices count the ops of the region as
written, calls inlined).

A while is searched in three steps (`_search_while`). Its trip count first, counted
beside it: where the target's differs from the reference's, the condition decided wrong
at check k = the smaller of the two; the condition's ops, recomputed from what it reads
there (which must come out right: else the body handed it wrong values), name the first
that goes wrong, or, all right, the op whose result the condition returns (its decision):
`main/while#3/cond/compare#1`. Then its body at the first iteration; where every value
of it comes out right, later ones: P_all at iteration 1, 2, 4, ... (below the trip count,
at most MAX_ITERATION_PROBES probes) until one fails, then a binary search between the
last that passed and it for an iteration k whose predecessor's values all come out
right, and the prefix search at k. The evidence says which `iteration`. Where no exposed
value fails (a bug that lives where a region hands its values on, or an iteration the
doubling steps over), the culprit stays the op of @main and the evidence says so.

A hang (a collective that one host of a multi-host group compiled without, docs/spmd.md)
has no wrong value to follow, but the prefix search asks its question as well: does P_n
still hang? Exposing a prefix leaves the region's later ops dead (nothing returned reads
them), and XLA removes dead ops, collectives included, so the shortest prefix that hangs
ends at the op that hangs: a binary search over its length, as above, with no float64
values computed and the trail's entries saying `hangs` instead of `fails`. The control
(the region's arguments alone) must finish, else the hang is not inside the region. Each
probe that hangs costs the hang probe time and a restart of the target (a group of host
processes), so a hang spends at most MAX_HANG_PROBES probes and is not run again to
confirm it (the reproduce stage ran the finding twice); a while's body is searched at its
first iteration only (its ops run at every iteration, exposed or not), its condition not
at all. The evidence says `found_by: hang`.

A crash or a compile error is followed the same way, for the same reason: the prefix that
still crashes (or is still refused) ends at the op whose compile fails, since the ops past
it are dead and gone before the compile gets to them. Unlike a hang, each probe costs a
compile (and a worker restart where it crashes), so no budget beyond a value search's, and
the shortest prefix is run again to confirm it. The evidence says `found_by: crash` (or
`compile_error`). In a while's body nothing can be found this way (the loop runs its body
whole, so the control fails too), as for a hang.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import Case, Check, LabError
from xla_sentinel.core.model import Verdict
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.stablehlo import holds_floats
from xla_sentinel.judge import oracle
from xla_sentinel.worker.protocol import EveryValue, Region

NAME = "regions"
MAX_DEPTH = 4  # nested regions descended into
MAX_ITERATION_PROBES = 24  # probes the search over one loop's iterations may spend
# Probes a hang's descent may spend in all: every one that still hangs waits the hang probe
# time and restarts the target. Enough for the control, P_all and a binary search over 500
# ops of a region.
MAX_HANG_PROBES = 12
# Regions each op kind exposes values of (xla/cuts.EXPOSABLE), and what they are called
# (a while's condition, "cond", is searched apart: _search_while).
_WHILE = "stablehlo.while"
_REGIONS = {_WHILE: {1: "body"}, "stablehlo.if": {0: "true", 1: "false"},
            "sdy.manual_computation": {0: "body"}}
_CALLEE = re.compile(r"func\.call @([\w.$-]+)")


def _region_names(op: dict[str, Any]) -> dict[int, str]:
    if op["name"] == "stablehlo.case":
        return {r: f"branch{r}" for r in range(op["regions"])}
    return _REGIONS.get(op["name"], {})


def _label(op: dict[str, Any], index: int) -> str:
    name = op["name"].removeprefix("stablehlo.").removeprefix("sdy.")
    if op["name"] == "func.call":
        callee = _CALLEE.search(op["text"])
        name = f"call@{callee.group(1)}" if callee else "call"
    return f"{name}#{index}"


def canonical(op: dict[str, Any]) -> str:
    """An inner op in the form context.canonical_op gives an op of @main."""
    name = op["name"].removeprefix("stablehlo.")
    direction = ""
    if op["name"] == "stablehlo.compare":
        direction = " " + op["text"].split("stablehlo.compare", 1)[1].split()[0].rstrip(",")
    ins = ",".join(dict.fromkeys(str(v["dtype"]) for v in op["operands"]))
    outs = ",".join(dict.fromkeys(str(r["dtype"]) for r in op["results"]))
    return f"{name}{direction} ({ins}->{outs})"


class _OutOfProbes(Exception):
    """A hang's descent spent MAX_HANG_PROBES probes."""


# The question a compiler failure's probes ask, in the trail: does the prefix still ...
_ASKS = {Verdict.HANG: "hangs", Verdict.CRASH: "crashes", Verdict.COMPILE_ERROR: "is_refused"}


class _Probe:
    """The case taken apart (the reduced case, or the culprit alone) and its float64
    inputs; checks exposures of its values. `failure`: a compiler failure's verdict (hang,
    crash, compile error), the question asked of each exposure being whether it still
    shows (no values compared); None: whether a value comes out wrong."""

    def __init__(self, ctx: Context, base: Case, wide: list[Any], failure: Verdict | None = None) -> None:
        self.ctx, self.base, self.wide, self.failure = ctx, base, wide, failure
        self.count = 0

    @property
    def hang(self) -> bool:
        """Each probe that still fails waits the hang probe time and restarts the target."""
        return self.failure == Verdict.HANG

    @property
    def asks(self) -> str:
        """The trail's key for a probe's answer."""
        return _ASKS[self.failure] if self.failure else "fails"

    def listing(self, path: list[list[int]]) -> dict[str, Any]:
        """{"ops", "arguments"} of the region at `path`."""
        return self.ctx.lab.ask_reference(Region(self.base.module, path, [])).info

    def check(self, path: list[list[int]], ops: list[int], listing: dict[str, Any],
              repeat: bool = False, infos: list[oracle.OutputInfo] | None = None
              ) -> tuple[Check, list[Any]]:
        """The target's answer on the values of ops `ops` (-k-1: argument k) of the region
        at `path` (judged as `infos` say, else as their results' types), and their float64
        reference."""
        if self.hang and self.count >= MAX_HANG_PROBES:
            raise _OutOfProbes
        self.count += 1
        lab = self.ctx.lab
        reply = lab.ask_reference(Region(self.base.module, path, ops)).info
        module = reply["module"]
        if self.failure:
            # Context.check asks a compiler failure's case for the same verdict only: no
            # values to expect.
            case = Case(module=module, inputs=self.base.inputs, expected=[], infos=[],
                        discrete=self.base.discrete, ops=self.base.ops)
            return self.ctx.check(case, repeat=repeat), []
        values = lab.ask_reference(EveryValue(module, self.wide)).values
        floats = holds_floats(module)
        if infos is None:
            dtypes = [r["dtype"] for j in ops
                      for r in ([listing["arguments"][-j - 1]] if j < 0 else listing["ops"][j]["results"])
                      if r["dtype"]]
            infos = [oracle.OutputInfo(d, d in FLOATS or floats, False) for d in dtypes]
        expected = [values[v] for v in reply["returns"]]
        case = Case(module=module, inputs=self.base.inputs, expected=expected, infos=infos,
                    discrete=self.base.discrete, ops=self.base.ops)
        return self.ctx.check(case, repeat=repeat), expected

    def fails(self, path: list[list[int]], ops: list[int], listing: dict[str, Any],
              repeat: bool = False) -> tuple[bool, bool | None]:
        """Does the target get a value of ops `ops` (-k-1: argument k) of the region at
        `path` wrong?"""
        check, _ = self.check(path, ops, listing, repeat)
        return check.fails, check.deterministic


def _candidates(listing: dict[str, Any]) -> list[int]:
    """The ops of a region whose values are searched: not constants, with a tensor result."""
    return [k for k, op in enumerate(listing["ops"])
            if op["name"] != "stablehlo.constant" and any(r["dtype"] for r in op["results"])]


def _first_wrong(probe: _Probe, path: list[list[int]], listing: dict[str, Any],
                 trail: list[dict[str, Any]], known: dict[int, bool] | None = None
                 ) -> tuple[int | None, bool]:
    """The first op of the region at `path` whose value the target gets wrong, or None;
    and whether the control (the region's own arguments) failed. `known`: P_n already
    probed."""
    cands = _candidates(listing)
    if not cands:
        return None, False
    args = [-k - 1 for k, a in enumerate(listing["arguments"]) if a["dtype"]]
    if path and args:
        # Control: the region's own arguments (a loop's values at the iteration, each
        # device's shards), exposed the same way, must come out right; where they do not,
        # values come out wrong however they leave the region (a loop that stores what it
        # carries wrongly) and no op inside is to blame.
        control = probe.fails(path, args, listing)[0]
        trail.append({"path": path, "exposed": "arguments", probe.asks: control})
        if control:
            return None, True
    cache: dict[int, bool] = dict(known or {})

    def fails(n: int) -> bool:
        if n not in cache:
            cache[n] = probe.fails(path, cands[:n], listing)[0]
            trail.append({"path": path, "exposed": n, "of": len(cands), probe.asks: cache[n]})
        return cache[n]

    if not fails(len(cands)):
        return None, False
    lo, hi = 0, len(cands)  # P_lo passes (nothing exposed), P_hi fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fails(mid) else (mid, hi)
    if probe.hang:
        # P_hi hung and P_hi-1 finished: not run again (a hang probe and a restart each).
        return cands[hi - 1], False
    again, deterministic = probe.fails(path, cands[:hi], listing, repeat=True)
    return (cands[hi - 1] if again and deterministic is not False else None), False


@dataclass
class _Hit:
    """An op found inside a region: the block's path, the region's name, its listing, the
    op's index there, and what the evidence adds (a loop's iteration, its trip counts)."""

    path: list[list[int]]
    region: str | None
    listing: dict[str, Any]
    index: int
    notes: dict[str, Any] = field(default_factory=dict)


def _search(probe: _Probe, prefix: list[list[int]], j: int, op: dict[str, Any],
            trail: list[dict[str, Any]]) -> _Hit | None:
    """The op that goes wrong inside the regions of op `j` of the block at `prefix`."""
    if op["name"] == _WHILE and not probe.failure:
        # A compiler failure has no trip count or iteration to compare: its body, exposed
        # at the first iteration, is compiled whole.
        return _search_while(probe, prefix, j, trail)
    for r, name in _region_names(op).items():
        path = [*prefix, [j, r]]
        listing = probe.listing(path)
        found, _ = _first_wrong(probe, path, listing, trail)
        if found is not None:
            return _Hit(path, name, listing, found)
    return None


def _scalar(value: Any) -> int:
    return int(np.asarray(value).reshape(-1)[0])


def _search_while(probe: _Probe, prefix: list[list[int]], j: int,
                  trail: list[dict[str, Any]]) -> _Hit | None:
    """The op that goes wrong in while `j` of the block at `prefix`: in its condition
    where the trip count differs, else in its body at the first iteration whose values
    come out wrong."""
    cond = probe.listing([*prefix, [j, 0]])
    # A trip count is judged exactly where the condition computes on integers only (a
    # counted loop); one that a float decides may legally differ (tainted: never a fail
    # here, where no noise model is sampled).
    floats = any(v["dtype"] in FLOATS for op in cond["ops"] for v in [*op["operands"], *op["results"]])
    try:
        trips, expected = probe.check([*prefix, [j, 0]], [len(cond["ops"])], cond,
                                      infos=[oracle.OutputInfo("s32", floats, False)])
    except LabError as e:
        # A loop whose trip count cannot be counted beside it: its first iteration only.
        trail.append({"path": [*prefix, [j, 0]], "exposed": "trips", "error": str(e)[:500]})
        trips, expected = None, []
    reference = _scalar(expected[0]) if trips else 1
    target = _scalar(trips.outputs[0]) if trips and trips.outputs else None
    if trips:
        trail.append({"path": [*prefix, [j, 0]], "exposed": "trips", "fails": trips.fails,
                      "reference": reference, "target": target})
    bound = reference  # iterations whose body values can be compared
    if trips and trips.fails and target is not None:
        # The condition decided wrong at check k (before iteration k), the first where the
        # two runs part; what it reads there must come out right, else the body is to blame.
        k = min(reference, target)
        path = [*prefix, [j, 0, k]]
        notes = {"iteration": k, "trips": {"reference": reference, "target": target}}
        found, control = _first_wrong(probe, path, cond, trail)
        if found is not None:
            return _Hit(path, "cond", cond, found, notes)
        if not control:
            # Every value it reads and computes comes out right, its decision does not.
            decision = next((i for i, o in enumerate(cond["ops"]) if o["returned"]), None)
            return None if decision is None else _Hit(path, "cond", cond, decision,
                                                       {**notes, "decision": True})
        bound = k
    body = probe.listing([*prefix, [j, 1]])

    def at(k: int) -> list[list[int]]:
        return [*prefix, [j, 1, k]]

    found, control = _first_wrong(probe, at(0), body, trail)
    if found is not None:
        return _Hit(at(0), "body", body, found, {"iteration": 0})
    if control or bound <= 1:
        return None
    wrong = _wrong_iteration(probe, at, body, bound, trail)
    if wrong is None:
        return None
    found, _ = _first_wrong(probe, at(wrong), body, trail, known={len(_candidates(body)): True})
    return None if found is None else _Hit(at(wrong), "body", body, found, {"iteration": wrong})


def _wrong_iteration(probe: _Probe, at: Callable[[int], list[list[int]]], body: dict[str, Any],
                     bound: int, trail: list[dict[str, Any]]) -> int | None:
    """An iteration k (0 < k < bound) whose body values the target gets wrong while those
    of iteration k - 1 come out right, iteration 0's known right; None where iterations
    1, 2, 4, ... and bound - 1 all come out right, or MAX_ITERATION_PROBES run out."""
    cands = _candidates(body)
    spent = 0

    def fails(k: int) -> bool:
        nonlocal spent
        spent += 1
        f = probe.fails(at(k), cands, body)[0]
        trail.append({"path": at(k), "exposed": len(cands), "of": len(cands), "iteration": k,
                      "fails": f})
        return f

    lo, hi, k = 0, None, 1  # iteration lo's values come out right, hi's wrong
    while hi is None:
        if spent >= MAX_ITERATION_PROBES:
            trail.append({"path": at(k), "exposed": "iterations", "budget": MAX_ITERATION_PROBES})
            return None
        if fails(k):
            hi = k
        elif k >= bound - 1:
            return None
        else:
            lo, k = k, min(2 * k, bound - 1)
    while hi - lo > 1:
        if spent >= MAX_ITERATION_PROBES:
            trail.append({"path": at(hi), "exposed": "iterations", "budget": MAX_ITERATION_PROBES})
            return None
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fails(mid) else (mid, hi)
    return hi


def run(ctx: Context) -> dict[str, Any]:
    assert ctx.culprit is not None
    i = ctx.culprit
    top = ctx.ops[i]
    if not top["regions"] and top["name"] != "func.call":
        return {"skipped": "the culprit holds no region"}
    failure = ctx.verdict if ctx.compiler_failure else None
    if ctx.record.get("evidence", {}).get("reason") == "buffers":
        return {"skipped": f"no wrong value to follow into a region (a failure of buffers: {ctx.verdict})"}
    # The probe: a region op within the reduced case, which keeps what the bug needs
    # besides it (a loop's trip count as a constant) and is known to fail; a call (whose
    # inlined ops must not mix with others') or a culprit that reduce did not keep, alone.
    # A compiler failure's whole module (not reduced: the reproduce stage's case) keeps
    # every op before the culprit, which may hang (crash) as well and would fail the
    # control: the culprit alone, fed exact values as the graph stage's suffixes were.
    base, at = (None if failure and ctx.reduced is ctx.full else ctx.reduced), None
    if base is not None and i in base.ops and top["name"] != "func.call":
        kept = sorted(base.ops)
        if not any(ctx.ops[k]["name"] == "func.call" for k in kept[:kept.index(i)]):
            at = kept.index(i)  # its index in the probe's @main, calls inlined
    if at is None:
        base, at = ctx.case([i]), 0
        if base is None:
            return {"skipped": "the culprit alone returns nothing it can be judged on"}
        # A compiler failure is not checked alone first: P_all asks the same (every value
        # of the region exposed) at the same price (for a hang, a hang probe and a restart).
        if not failure and not ctx.check(base).fails:
            return {"skipped": "the culprit alone passes", "probes": 1}
    assert base is not None  # `at` was found in the reduced case
    params, _ = ctx.subgraph(base.ops)
    probe = _Probe(ctx, base, [ctx.values[p] for p in params], failure=failure)
    return _descend(ctx, probe, top, i, at)


def _descend(ctx: Context, probe: _Probe, top: dict[str, Any], i: int, at: int) -> dict[str, Any]:
    trail: list[dict[str, Any]] = []
    labels = ["main", _label(top, i)]
    error = None
    found = None
    iterations: dict[str, int] = {}  # each loop on the path -> the iteration searched
    notes: dict[str, Any] = {}
    # A call alone is inlined into the probe's @main, searched as a block of its own; a
    # region op is op `at` of it.
    prefix: list[list[int]] = []
    op, j = top, at
    for _ in range(MAX_DEPTH):
        try:
            if op["name"] == "func.call":
                listing = probe.listing([])
                k, _ = _first_wrong(probe, [], listing, trail)
                hit = None if k is None else _Hit([], None, listing, k)
            else:
                hit = _search(probe, prefix, j, op, trail)
        except LabError as e:
            # A region this cannot take apart (a type with no zero, an op kind it does not
            # thread values out of): the culprit stays the op found so far.
            error = str(e)[:2000]
            hit = None
        except _OutOfProbes:
            trail.append({"exposed": "prefixes", "budget": MAX_HANG_PROBES})
            hit = None
        if hit is None:
            break
        if hit.region:
            labels.append(hit.region)
        if "iteration" in hit.notes:
            iterations["/".join(labels[:-1])] = hit.notes["iteration"]
        notes = hit.notes
        op, j = hit.listing["ops"][hit.index], hit.index
        labels.append(_label(op, j))
        found, prefix = op, hit.path
        # A condition's ops are recomputed to be seen: nothing is threaded out of what
        # they hold.
        if hit.region == "cond" or not _region_names(op):
            break
    evidence: dict[str, Any] = {"probes": probe.count, "trail": trail,
                                **({"error": error} if error else {})}
    if found is None:
        note = (f"no prefix of the ops of the culprit's regions {_ASKS[probe.failure].replace('_', ' ')} "
                "on its own (a loop's body at its first iteration, each branch, the manual "
                "computation's body)") if probe.failure \
            else ("no value inside the culprit's regions comes out wrong on its own "
                  "(a loop's trip count, its iterations 1, 2, 4, ... below it, the "
                  "taken branch, each device's part)")
        return {**evidence, "inner_op": None, "note": note}
    ctx.culprit_path = "/".join(labels)
    ctx.inner_op = canonical(found)
    ctx.inner_text = found["text"]
    # `iteration`: the iteration (from 0) of the innermost loop around the op at which it
    # goes wrong, or the check of a condition (before that iteration).
    loop = {"iteration": list(iterations.values())[-1], "iterations": iterations,
            **{k: v for k, v in notes.items() if k != "iteration"}} if iterations else {}
    # How the op was found: the first whose value is wrong, or where the shortest prefix of
    # its region that still hangs (crashes, is refused) ends: no value was compared.
    by = {"found_by": str(probe.failure),
          "question": f"the shortest prefix of the region's ops that still {_ASKS[probe.failure].replace('_', ' ')}"} \
        if probe.failure else {"found_by": "value"}
    return {**evidence, "inner_op": ctx.inner_op, "culprit_path": ctx.culprit_path,
            "op_text": found["text"], "location": found.get("location"),
            "outer_op": ctx.canonical_op(i), **by, **loop}
