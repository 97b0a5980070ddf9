"""Stage 2a, regions: which op inside the culprit's regions goes wrong?

The suffix search stops at an op of @main; where that op holds regions (a while, a case
or if, a shard_map's `sdy.manual_computation`) or is a `func.call`, the op that goes wrong
is inside it. The reduced case (for a call, the culprit alone), fed exact values as every
cut is, is taken apart in the reference worker (xla/cuts.py): calls inlined, then values
of a region exposed as extra results of every op around them, up to @main, which returns
only those. A while exposes
the value of its first iteration (computed from the loop's initial values, which the cut
feeds exactly), a branch its value (zeros from the other branches), a manual computation
each device's value stacked. Their float64 reference is computed as every value of the
finding is (EveryValue: the probe's ops each alone in float64; the region op whole, so
with its devices where it is a manual computation, docs/spmd.md), and the target's values
are judged against it by the oracle as any case.

Control: the region's own arguments, exposed the same way, must come out right (else a
value is wrong however it leaves the region: no op inside is to blame). Prefix search:
P_n exposes the results of the first n ops of a region (constants and ops without a
tensor result aside). If P_all fails, the smallest failing n names the
first op whose value is wrong while every op before it in the region is right: the
culprit inside (about log2(N) probes). An op found that holds regions itself is descended
into the same way. The region path names where it sits, region by region:
`main/while#3/body/dynamic_update_slice#7` (op indices count the ops of the region as
written, calls inlined). Where no exposed value fails (the bug needs the values of a
later iteration, or lives where a region hands its values on), the culprit stays the op
of @main and the evidence says so.
"""

from __future__ import annotations

import re
from typing import Any

from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import Case, LabError
from xla_sentinel.core.dtypes import FLOATS
from xla_sentinel.core.stablehlo import holds_floats
from xla_sentinel.judge import oracle
from xla_sentinel.worker.protocol import EveryValue, Region

NAME = "regions"
MAX_DEPTH = 4  # nested regions descended into
# Regions each op kind exposes values of (xla/cuts.EXPOSABLE), and what they are called.
_REGIONS = {"stablehlo.while": {1: "body"}, "stablehlo.if": {0: "true", 1: "false"},
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


class _Probe:
    """The case taken apart (the reduced case, or the culprit alone) and its float64
    inputs; checks exposures of its values."""

    def __init__(self, ctx: Context, base: Case, wide: list[Any]) -> None:
        self.ctx, self.base, self.wide = ctx, base, wide
        self.count = 0

    def listing(self, path: list[list[int]]) -> dict[str, Any]:
        """{"ops", "arguments"} of the region at `path`."""
        return self.ctx.lab.ask_reference(Region(self.base.module, path, [])).info

    def fails(self, path: list[list[int]], ops: list[int], listing: dict[str, Any],
              repeat: bool = False) -> tuple[bool, bool | None]:
        """Does the target get a value of ops `ops` (-k-1: argument k) of the region at
        `path` wrong?"""
        self.count += 1
        lab = self.ctx.lab
        reply = lab.ask_reference(Region(self.base.module, path, ops)).info
        module = reply["module"]
        values = lab.ask_reference(EveryValue(module, self.wide)).values
        floats = holds_floats(module)
        dtypes = [r["dtype"] for j in ops
                  for r in ([listing["arguments"][-j - 1]] if j < 0 else listing["ops"][j]["results"])
                  if r["dtype"]]
        case = Case(module=module, inputs=self.base.inputs,
                    expected=[values[v] for v in reply["returns"]],
                    infos=[oracle.OutputInfo(d, d in FLOATS or floats, False) for d in dtypes],
                    discrete=self.base.discrete, ops=self.base.ops)
        check = self.ctx.check(case, repeat=repeat)
        return check.fails, check.deterministic


def _first_wrong(probe: _Probe, path: list[list[int]], listing: dict[str, Any],
                 trail: list[dict[str, Any]]) -> int | None:
    """The first op of the region at `path` whose value the target gets wrong, or None."""
    cands = [k for k, op in enumerate(listing["ops"])
             if op["name"] != "stablehlo.constant" and any(r["dtype"] for r in op["results"])]
    if not cands:
        return None
    args = [-k - 1 for k, a in enumerate(listing["arguments"]) if a["dtype"]]
    if path and args:
        # Control: the region's own arguments (a loop's initial values, each device's
        # shards), exposed the same way, must come out right; where they do not, values
        # come out wrong however they leave the region (a loop that stores what it carries
        # wrongly) and no op inside is to blame.
        control = probe.fails(path, args, listing)[0]
        trail.append({"path": path, "exposed": "arguments", "fails": control})
        if control:
            return None
    cache: dict[int, bool] = {}

    def fails(n: int) -> bool:
        if n not in cache:
            cache[n] = probe.fails(path, cands[:n], listing)[0]
            trail.append({"path": path, "exposed": n, "of": len(cands), "fails": cache[n]})
        return cache[n]

    if not fails(len(cands)):
        return None
    lo, hi = 0, len(cands)  # P_lo passes (nothing exposed), P_hi fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fails(mid) else (mid, hi)
    again, deterministic = probe.fails(path, cands[:hi], listing, repeat=True)
    return cands[hi - 1] if again and deterministic is not False else None


def run(ctx: Context) -> dict[str, Any]:
    assert ctx.culprit is not None
    i = ctx.culprit
    top = ctx.ops[i]
    if not top["regions"] and top["name"] != "func.call":
        return {"skipped": "the culprit holds no region"}
    if ctx.compiler_failure or ctx.record.get("evidence", {}).get("reason") == "buffers":
        return {"skipped": "no wrong value to follow into a region (a failure of the "
                           f"compile or of buffers: {ctx.record.get('verdict')})"}
    # The probe: a region op within the reduced case, which keeps what the bug needs
    # besides it (a loop's trip count as a constant) and is known to fail; a call (whose
    # inlined ops must not mix with others') or a culprit that reduce did not keep, alone.
    base, at = ctx.reduced, None
    if base is not None and i in base.ops and top["name"] != "func.call":
        kept = sorted(base.ops)
        if not any(ctx.ops[k]["name"] == "func.call" for k in kept[:kept.index(i)]):
            at = kept.index(i)  # its index in the probe's @main, calls inlined
    if at is None:
        base, at = ctx.case([i]), 0
        if base is None:
            return {"skipped": "the culprit alone returns nothing it can be judged on"}
        if not ctx.check(base).fails:
            return {"skipped": "the culprit alone passes", "probes": 1}
    params, _ = ctx.subgraph(base.ops)
    probe = _Probe(ctx, base, [ctx.values[p] for p in params])
    return _descend(ctx, probe, top, i, at)


def _descend(ctx: Context, probe: _Probe, top: dict[str, Any], i: int, at: int) -> dict[str, Any]:
    trail: list[dict[str, Any]] = []
    labels = ["main", _label(top, i)]
    error = None
    # A call alone is inlined into the probe's @main; a region op is op `at` of it.
    if top["name"] == "func.call":
        levels = [([], None)]
    else:
        levels = [([[at, r]], name) for r, name in _region_names(top).items()]
    found = None
    for _ in range(MAX_DEPTH):
        hit = None
        try:
            for path, region_name in levels:
                listing = probe.listing(path)
                j = _first_wrong(probe, path, listing, trail)
                if j is not None:
                    hit = (path, region_name, listing, j)
                    break
        except LabError as e:
            # A region this cannot take apart (a type with no zero, an op kind it does not
            # thread values out of): the culprit stays the op found so far.
            error = str(e)[:2000]
        if hit is None:
            break
        path, region_name, listing, j = hit
        op = listing["ops"][j]
        if region_name:
            labels.append(region_name)
        labels.append(_label(op, j))
        found = op
        levels = [([*path, [j, r]], name) for r, name in _region_names(op).items()]
        if not levels:
            break
    evidence: dict[str, Any] = {"probes": probe.count, "trail": trail,
                                **({"error": error} if error else {})}
    if found is None:
        return {**evidence, "inner_op": None,
                "note": "no value inside the culprit's regions comes out wrong on its own "
                        "(first iteration of a loop, the taken branch, each device's part)"}
    ctx.culprit_path = "/".join(labels)
    ctx.inner_op = canonical(found)
    ctx.inner_text = found["text"]
    return {**evidence, "inner_op": ctx.inner_op, "culprit_path": ctx.culprit_path,
            "op_text": found["text"], "location": found.get("location"), "outer_op": ctx.canonical_op(i)}
