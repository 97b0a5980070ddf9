"""Detection power, measured: each injected fault against a fixed campaign budget.

For every fault in the suite (runners/xla_sentinel/xla/faults/) it runs one campaign per generation mode
(plain and coverage-guided, same seed and budget), both at the same time with one worker
each so that they see the same machine load, with the fault injected into the targets
under test, and stops each campaign at its first finding.
It prints and writes, into --out (default bench/results/, git-ignored):

    detection.md    table: fault, mode, detected, programs and seconds to first detection,
                    the verdict and signature of that finding
    detection.json  the same rows plus the budget and versions
    detection.png   programs to first detection per fault, plain vs guided

With --clean N it instead runs one campaign of N programs on unmodified jaxlib and
writes clean-sSEED.json / .md (campaign in clean-sSEED/): every finding with its verdict, target and known-bug
match, so each can be explained as a real XLA bug or counted as a false positive.

Usage:
    python bench/detection.py [--faults a,b] [--seconds 600] [--programs 2000]
                              [--modes plain,guided] [--workers 2] [--seed 3]
    python bench/detection.py --clean 10000 --workers 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from xla_sentinel.campaign import coverage
from xla_sentinel.campaign.engine import CampaignRun
from xla_sentinel.core.versions import package_versions as versions
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.storage.store import Store
from xla_sentinel.xla.faults import FAULTS, fault_path

MODES = {"plain": False, "guided": True}


class FirstFinding:
    """Reporter that notes when the first finding arrives, then stops the campaign.

    A `nondeterministic` finding (a recompile disagreed bitwise with the first run) is
    counted but does not stop the campaign: it says the program is unstable, not that the
    oracle caught the injected miscompilation.
    """

    def __init__(self) -> None:
        self.run: CampaignRun | None = None
        self.first: dict[str, Any] | None = None
        self.nondeterministic = 0

    def finding(self, record: dict[str, Any]) -> None:
        assert self.run is not None
        if record["verdict"] == "nondeterministic":
            self.nondeterministic += 1
            return
        if self.first is None:
            c = self.run.counters
            # The finding's own program is still in flight: it is program number done + 1.
            self.first = {"programs": c.programs + 1,
                          "seconds": round(time.monotonic() - c.started, 1),
                          "verdict": record["verdict"], "signature": record["signature"],
                          "target": record["target"], "program": record["program"]}
        self.run.stop.set()

    def progress(self, counters: dict[str, Any]) -> None:
        pass


def _spec(args: argparse.Namespace, guided: bool, plugin: str | None, programs: int,
          seconds: float | None) -> Any:
    budget: dict[str, Any] = {"programs": programs}
    if seconds is not None:
        budget["seconds"] = seconds
    return parse_spec({
        "seed": args.seed,
        "generator": {"minOps": 2, "maxOps": 16, "guided": guided},
        # One target under test and no float64 jit keep each program cheap (f64_eager only
        # cross-checks numpy's float64 answer on a suspect or a sample):
        # the fault is injected in the target only, so the float64 op-by-op reference is
        # untouched by it; eager (op by op at the program's precision) is the other
        # configuration the oracle compares with.
        "targets": ["default"],
        "references": args.references or ["f64_numpy", "f64_eager", "eager"],
        "budget": budget,
        "workers": args.workers,
        "injectPasses": [plugin] if plugin else [],
        "bisect": {"enabled": False},
        "timeouts": {"programSeconds": 60},
    })


def detect(args: argparse.Namespace, fault: str, modes: list[str]) -> list[dict[str, Any]]:
    """One campaign per mode for `fault`, run side by side; a row per mode."""
    runs, reporters = {}, {}
    for mode in modes:
        out = Path(args.out) / "detection" / f"{fault}-{mode}"
        shutil.rmtree(out, ignore_errors=True)  # a fresh campaign: resuming would skew the count
        spec = _spec(args, MODES[mode], fault_path(fault), args.programs, args.seconds)
        reporters[mode] = FirstFinding()
        runs[mode] = CampaignRun(spec, out, name=f"{fault}-{mode}", reporter=reporters[mode])
        reporters[mode].run = runs[mode]
    summaries: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}

    def run(mode: str) -> None:
        try:
            summaries[mode] = runs[mode].run()
        except Exception as e:  # one broken campaign is a row, not the end of the bench
            errors[mode] = f"{type(e).__name__}: {e}"

    threads = [threading.Thread(target=run, args=(m,)) for m in modes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = []
    for mode in modes:
        if mode in errors:
            rows.append({"fault": fault, "mode": mode, "detected": False, "programs_run": 0,
                         "elapsed_s": 0.0, "error": errors[mode]})
            continue
        s = summaries[mode]
        row: dict[str, Any] = {"fault": fault, "mode": mode, "detected": reporters[mode].first is not None,
                               "programs_run": s["programs"], "elapsed_s": s["elapsed_s"],
                               "nondeterministic": reporters[mode].nondeterministic}
        row.update(reporters[mode].first or {})
        # Breadth of what the campaign exercised, to compare the modes beyond detection.
        cov = coverage.total(coverage.stored_stats(runs[mode].out / "campaign.sqlite")).to_json()
        row.update(distinct_ops=len(cov["ops"]), distinct_pairs=len(cov["op_pairs"]),
                   distinct_fused=len(cov["fused"]))
        rows.append(row)
    return rows


def _table(rows: list[dict[str, Any]], budget: str) -> str:
    lines = [f"Budget per campaign: {budget}; stops at the first finding.", "",
             "| fault | mode | detected | programs to first | seconds to first | verdict | signature "
             "| distinct ops / pairs / fused |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        breadth = f"{r.get('distinct_ops', '-')} / {r.get('distinct_pairs', '-')} / {r.get('distinct_fused', '-')}"
        if r["detected"]:
            lines.append(f"| {r['fault']} | {r['mode']} | yes | {r['programs']} | {r['seconds']} | "
                         f"{r['verdict']} | {r['signature']} | {breadth} |")
        else:
            lines.append(f"| {r['fault']} | {r['mode']} | **no** ({r['programs_run']} programs, "
                         f"{r['elapsed_s']:.0f} s) | - | - | - | - | {breadth} |")
    return "\n".join(lines) + "\n"


def _chart(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    faults = sorted({r["fault"] for r in rows})
    modes = [m for m in MODES if any(r["mode"] == m for r in rows)]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(faults) + 1.5))
    height = 0.8 / max(len(modes), 1)
    for j, mode in enumerate(modes):
        by = {r["fault"]: r for r in rows if r["mode"] == mode}
        ys = [i + j * height for i in range(len(faults))]
        # Undetected faults are drawn hatched at the programs they ran without a detection.
        vals = [(by[f]["programs"] if by[f]["detected"] else by[f]["programs_run"]) if f in by else 0
                for f in faults]
        hatch = ["" if f in by and by[f]["detected"] else "//" for f in faults]
        bars = ax.barh(ys, vals, height, label=mode)
        for b, h in zip(bars, hatch, strict=True):
            b.set_hatch(h)
    ax.set_yticks([i + height * (len(modes) - 1) / 2 for i in range(len(faults))], faults)
    ax.set_xscale("log")
    ax.set_xlabel("programs to first detection (hatched: programs run without detection)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def clean(args: argparse.Namespace) -> int:
    out = Path(args.out) / f"clean-s{args.seed}"
    spec = parse_spec({
        "seed": args.seed, "generator": {"minOps": 2, "maxOps": 16},
        "targets": ["default", "O0", "no_fusion_emitters"],
        **({"references": args.references} if args.references else {}),  # else the default
        "budget": {"programs": args.clean}, "workers": args.workers,
        "bisect": {"enabled": False}, "timeouts": {"programSeconds": 120},
    })
    # Resumable: a second invocation into the same folder goes on where it stopped.
    summary = CampaignRun(spec, out, name="clean", progress=True).run()
    store = Store(out / "campaign.sqlite")
    findings = store.findings()
    store.close()
    rows = [{"id": f.id, "program": f.program, "target": f.target, "verdict": f.verdict,
             "signature": f.signature, "known_bug": f.known_bug, "dir": f.dir}
            for f in findings]
    result = {"programs": summary["programs"], "elapsed_s": summary["elapsed_s"],
              "program_status": summary["program_status"], "findings": rows, **versions()}
    (out.parent / f"clean-s{args.seed}.json").write_text(json.dumps(result, indent=1))
    lines = [f"Clean campaign: {summary['programs']} programs in {summary['elapsed_s']:.0f} s, "
             f"{len(rows)} findings ({sum(1 for r in rows if r['known_bug'])} known XLA bugs).", "",
             "| finding | program | target | verdict | known bug |", "|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['program']} | {r['target']} | {r['verdict']} | {r['known_bug'] or '-'} |"
              for r in rows]
    (out.parent / f"clean-s{args.seed}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--faults", default=",".join(FAULTS), help="comma-separated fault names")
    ap.add_argument("--modes", default="plain,guided", help="comma-separated: plain, guided")
    ap.add_argument("--programs", type=int, default=5000, help="program budget per campaign")
    ap.add_argument("--seconds", type=float, default=600.0, help="time budget per campaign")
    ap.add_argument("--workers", type=int, default=1, help="workers per campaign")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--references", type=lambda s: [r for r in s.split(",") if r], default=None,
                    help="comma-separated references (default: the campaign default for --clean)")
    ap.add_argument("--clean", type=int, metavar="N", help="run a clean campaign of N programs instead")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.clean:
        return clean(args)
    faults = [f for f in args.faults.split(",") if f]
    modes = [m for m in args.modes.split(",") if m]
    for name in faults:
        if name not in FAULTS:
            print(f"--faults: unknown fault {name!r}; known: {', '.join(FAULTS)}", file=sys.stderr)
            return 2
    for m in modes:
        if m not in MODES:
            print(f"--modes: unknown mode {m!r}; known: {', '.join(MODES)}", file=sys.stderr)
            return 2
    rows = []
    budget = f"{args.programs} programs or {args.seconds:.0f} s, {args.workers} workers, seed {args.seed}"
    out = Path(args.out)
    for fault in faults:
        for row in detect(args, fault, modes):
            rows.append(row)
            print(json.dumps(row), flush=True)
        # Written after every fault: a long bench that is stopped keeps what it measured.
        (out / "detection.md").write_text(_table(rows, budget))
        (out / "detection.json").write_text(json.dumps({"budget": budget, "rows": rows, **versions()},
                                                       indent=1))
    _chart(rows, out / "detection.png")
    print(_table(rows, budget))
    return 0


if __name__ == "__main__":
    sys.exit(main())
