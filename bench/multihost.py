"""Throughput of a 2-host campaign next to a 1-host campaign of the same programs.

Both campaigns draw the same programs (same seed and generator: 4 devices, the generator's
default sharded share, Shardy and GSPMD drawn per program); they differ only in
`accelerator.hosts`:

  1host   every program on one process (target default, the references)
  2hosts  the same, and every program partitioned over the 4 devices once more on 2 host
          processes x 2 devices (the `hosts2x2` target, worker/hosts.py)

Campaigns run one after the other in this process (1 worker, bisection off). For each it
prints programs per wall second and per core-second (CPU time of this process and of every
process it started and waited for: workers, the forkserver, the host processes), the
executions, findings and statuses; for the 2-host campaign (summary.json `multihost`), how
many programs ran on the hosts and how many hold a collective that moves data between the
hosts (read from each program's optimized module, worker/hosts.py `collectives`).
Usage: python bench/multihost.py [--programs N] [--seed S]
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

DEVICES = 4


def _cpu_seconds() -> float:
    """CPU time of this process and of its exited children (workers, hosts)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def campaign(hosts: int, seed: int, programs: int) -> dict[str, Any]:
    spec = parse_spec({"seed": seed, "generator": {"minOps": 2, "maxOps": 16, "devices": DEVICES},
                       "targets": ["default"], "budget": {"programs": programs},
                       "accelerator": {"hosts": hosts}, "workers": 1, "bisect": {"enabled": False}})
    with tempfile.TemporaryDirectory() as tmp:
        cpu0 = _cpu_seconds()
        s = run_campaign(spec, Path(tmp), name=f"multihost-bench-{hosts}")
        cpu = _cpu_seconds() - cpu0
    out = {"programs": s["programs"], "elapsed_s": s["elapsed_s"], "cpu_s": round(cpu, 1),
           "programs_per_s": round(s["programs"] / s["elapsed_s"], 3),
           "programs_per_core_s": round(s["programs"] / cpu, 3),
           "executions": s["executions"], "findings": s["findings"],
           "program_status": s["program_status"]}
    if "multihost" in s:  # summary.json's account of the layout's target
        layout = s["multihost"]
        out["ran_on_hosts"] = layout["programs"]
        out["cross_host_programs"] = layout["cross_host_programs"]
        out["cross_host_share"] = round(layout["cross_host_programs"] / max(1, s["programs"]), 3)
        out["cross_host_share_of_ran"] = round(layout["cross_host_programs"] / max(1, layout["programs"]), 3)
        out["group_restarts"] = layout["group_restarts"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=30, help="programs per campaign")
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()
    result: dict[str, Any] = {"seed": args.seed, "devices": DEVICES}
    for hosts in (1, 2):
        result[f"{hosts}host{'s' if hosts > 1 else ''}"] = r = campaign(hosts, args.seed, args.programs)
        print(f"hosts {hosts}: {json.dumps(r)}", file=sys.stderr)
    one, two = result["1host"], result["2hosts"]
    result["ratio_2hosts_over_1host"] = {k: round(two[k] / one[k], 2)
                                         for k in ("programs_per_s", "programs_per_core_s")}
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
