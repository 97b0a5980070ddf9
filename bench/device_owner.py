"""Cost of the one-owner-per-accelerator rule (issue 26) for CPU-only campaigns.

Runs the same CPU-only campaign (default targets and references, SLOTS slots, bisection
off) under two copies of the engine, alternating, in one run on the same machine:

  before     this working tree with the files of the change as they are at --before
             (campaign/engine.py, judge/assess.py, worker/client.py, worker/server.py;
             worker/devices.py absent)
  after      this working tree
  cpu owned  this working tree with the CPU treated as an exclusive device
             (XLA_SENTINEL_TEST_EXCLUSIVE_PLATFORMS=cpu): every slot's targets queue for
             one process, as a TPU or GPU's do; what serializing the targets costs

Each campaign runs in a fresh interpreter; CPU time is the campaign process and every
worker below it (RUSAGE_CHILDREN). Prints JSON: per row the median programs per wall
second and per core-second, and after/before ratios.

    python bench/device_owner.py [--programs 24] [--slots 2] [--rounds 2] [--before HEAD]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "runners" / "xla_sentinel"
CHANGED = ("campaign/engine.py", "judge/assess.py", "worker/client.py", "worker/server.py")
ADDED = ("worker/devices.py",)

CAMPAIGN = """
import json, sys
from pathlib import Path
import xla_sentinel
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import parse_spec
spec = parse_spec({"seed": 5, "budget": {"programs": int(sys.argv[1])}, "workers": int(sys.argv[2]),
                   "bisect": {"enabled": False}})
s = run_campaign(spec, Path(sys.argv[3]))
print(json.dumps({"package": xla_sentinel.__file__, "programs": s["programs"], "elapsed_s": s["elapsed_s"],
                  "findings": s["findings"]}))
"""


def before_tree(ref: str, into: Path) -> Path:
    """A copy of the package with the change's files as at `ref`."""
    pkg = into / "xla_sentinel"
    shutil.copytree(PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in CHANGED:
        text = subprocess.run(["git", "show", f"{ref}:runners/xla_sentinel/{rel}"], cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout
        (pkg / rel).write_text(text)
    for rel in ADDED:
        (pkg / rel).unlink(missing_ok=True)
    return into


def run(path: Path, programs: int, slots: int, env: dict[str, str]) -> dict[str, object]:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", CAMPAIGN, str(programs), str(slots), out],
                              env={**os.environ, "PYTHONPATH": str(path), **env},
                              capture_output=True, text=True, check=True)
        wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - kids.ru_utime) + (after.ru_stime - kids.ru_stime)
    s = json.loads(done.stdout.strip().splitlines()[-1])
    assert str(path) in s["package"], f"ran {s['package']}, not the copy under {path}"
    return {"programs": s["programs"], "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "programs_per_s": round(s["programs"] / s["elapsed_s"], 3),
            "programs_per_core_s": round(s["programs"] / cpu, 3), "findings": s["findings"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=24)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--before", default="HEAD", help="git ref of the engine before the change")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = {"before": (before_tree(args.before, Path(tmp)), {}),
                "after": (ROOT / "runners", {}),
                "cpu owned": (ROOT / "runners", {"XLA_SENTINEL_TEST_EXCLUSIVE_PLATFORMS": "cpu"})}
        runs: dict[str, list[dict[str, object]]] = {name: [] for name in rows}
        for _ in range(args.rounds):  # alternating, so a change of machine load hits every row
            for name, (path, env) in rows.items():
                runs[name].append(run(path, args.programs, args.slots, env))
                print(name, runs[name][-1], file=sys.stderr)
    median = {name: {k: statistics.median(float(r[k]) for r in rs)  # type: ignore[arg-type]
                     for k in ("programs_per_s", "programs_per_core_s", "wall_s", "cpu_s")}
              for name, rs in runs.items()}
    ratio = {f"{name}/before": {k: round(median[name][k] / median["before"][k], 3)
                                for k in ("programs_per_s", "programs_per_core_s")}
             for name in ("after", "cpu owned")}
    print(json.dumps({"programs": args.programs, "slots": args.slots, "rounds": args.rounds,
                      "before": args.before, "median": median, "ratio": ratio, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
