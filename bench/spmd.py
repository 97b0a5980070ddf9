"""Throughput of sharded programs next to the same programs unsharded, in one run.

The same seed draws the same graphs whatever `generator.devices` says (the sharding plan
has a random stream of its own, generator._partition), so campaigns that differ only in
devices and partitioner judge the same programs:

  unsharded   devices 1: every program on one device
  sharded     devices 4, sharded 1.0, partitioners as given (default: Shardy and GSPMD
              drawn per program): every program partitioned over a random 1-D or 2-D
              mesh, with its shardings, constraints and shard_map regions, and judged
              also against itself unsharded (the `unsharded` configuration)
  shardy, gspmd   the same with one partitioner each (--per-partitioner)

Campaigns run one after the other (targets default, O0, no_fusion_emitters; 1 worker;
bisection off) and the order is repeated --rounds times, alternating, so a load that
changes during the run reaches both sides alike. For each it prints programs per wall
second and per core-second (CPU time of the coordinator and its workers), executions,
findings and program statuses, then each sharded variant's ratio to unsharded.
Usage: python bench/spmd.py [--programs N] [--seed S] [--rounds R] [--per-partitioner]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import parse_spec

TARGETS = ["default", "O0", "no_fusion_emitters"]
DEVICES = 4


def _cpu_seconds() -> float:
    """CPU time of this process and of its exited children (the campaign's workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _generator(variant: str) -> dict[str, Any]:
    if variant == "unsharded":
        return {"devices": 1}
    partitioners = {"sharded": ["shardy", "gspmd"], "shardy": ["shardy"], "gspmd": ["gspmd"]}[variant]
    return {"devices": DEVICES, "sharded": 1.0, "partitioners": partitioners}


def campaign(variant: str, seed: int, programs: int, budget_s: float) -> dict[str, Any]:
    spec = parse_spec({"seed": seed, "generator": {"minOps": 2, "maxOps": 16, **_generator(variant)},
                       "targets": TARGETS, "budget": {"programs": programs, "seconds": budget_s},
                       "workers": 1, "bisect": {"enabled": False}})
    with tempfile.TemporaryDirectory() as tmp:
        cpu0 = _cpu_seconds()
        s = run_campaign(spec, Path(tmp), name=f"spmd-bench-{variant}")
        cpu = _cpu_seconds() - cpu0
    return {"programs": s["programs"], "elapsed_s": s["elapsed_s"], "cpu_s": round(cpu, 1),
            "executions": s["executions"], "findings": s["findings"],
            "program_status": s["program_status"]}


def _total(runs: list[dict[str, Any]]) -> dict[str, Any]:
    programs = sum(r["programs"] for r in runs)
    elapsed = sum(r["elapsed_s"] for r in runs)
    cpu = sum(r["cpu_s"] for r in runs)
    findings: dict[str, int] = {}
    status: dict[str, int] = {}
    for r in runs:
        for k, v in r["findings"].items():
            findings[k] = findings.get(k, 0) + v
        for k, v in r["program_status"].items():
            status[k] = status.get(k, 0) + v
    return {"programs": programs, "elapsed_s": round(elapsed, 1), "cpu_s": round(cpu, 1),
            "programs_per_s": round(programs / elapsed, 3),
            "programs_per_core_s": round(programs / cpu, 3),
            "executions_per_program": round(sum(r["executions"] for r in runs) / programs, 2),
            "findings": findings, "program_status": status}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=30, help="programs per campaign")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--rounds", type=int, default=1, help="alternating repeats (seed + round)")
    ap.add_argument("--per-partitioner", action="store_true",
                    help="also Shardy-only and GSPMD-only campaigns")
    ap.add_argument("--budget-seconds", type=float, default=900.0, help="per campaign")
    args = ap.parse_args()
    variants = ["unsharded", "sharded"] + (["shardy", "gspmd"] if args.per_partitioner else [])
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for r in range(args.rounds):
        # Alternate the order: the first campaign of a round also warms the disk cache.
        for v in variants if r % 2 == 0 else reversed(variants):
            runs[v].append(campaign(v, args.seed + r, args.programs, args.budget_seconds))
            print(f"round {r} {v}: {json.dumps(runs[v][-1])}", file=sys.stderr)
    result: dict[str, Any] = {"seed": args.seed, "rounds": args.rounds, "devices": DEVICES,
                              "targets": TARGETS, **{v: _total(runs[v]) for v in variants}}
    base = result["unsharded"]
    for v in variants[1:]:
        result[f"ratio_{v}_over_unsharded"] = {
            k: round(result[v][k] / base[k], 2) for k in ("programs_per_s", "programs_per_core_s")}
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
