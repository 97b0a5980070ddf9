"""What a campaign says about itself: the live progress line and summary.json."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from xla_sentinel.campaign import coverage
from xla_sentinel.campaign.recording import Counters
from xla_sentinel.core.model import ProgramStatus
from xla_sentinel.core.program import save_summary
from xla_sentinel.core.versions import package_versions
from xla_sentinel.judge.targets import Target
from xla_sentinel.spec.campaign import CampaignSpec
from xla_sentinel.storage.store import Store
from xla_sentinel.triage.signature import configurations


def print_progress(c: Counters, total: int | None, final: bool = False) -> None:
    """One line: a bar (or a count), programs per second, findings by verdict."""
    el = time.monotonic() - c.started
    bar = ""
    if total:
        done = min(c.programs, total)
        bar = "[" + "#" * (20 * done // total) + "." * (20 - 20 * done // total) + f"] {done}/{total} "
    else:
        bar = f"{c.programs} programs "
    found = " ".join(f"{k}={v}" for k, v in sorted(c.findings.items())) or "none"
    line = f"{bar}| {c.programs / max(el, 1e-9):.1f}/s | findings: {found} | {el:.0f}s"
    end = "\n" if final or not sys.stderr.isatty() else ""
    sys.stderr.write(("\r" if sys.stderr.isatty() else "") + line + end)
    sys.stderr.flush()


def write_summary(out: Path, store: Store, counters: Counters, *, name: str, spec: CampaignSpec,
                  targets: list[Target], plugins: list[str], shard: tuple[int, int],
                  worker_restarts: dict[str, int],
                  unavailable_targets: dict[str, str] | None = None) -> dict[str, Any]:
    """summary.json (the contract of docs/architecture.md, "The flow"); returns it."""
    totals = store.totals()
    elapsed = time.monotonic() - counters.started
    sigs = store.signatures()
    findings = store.findings()
    worker_s = counters.worker_s
    known = sum(1 for f in findings if f.known_bug)
    shown_in = configurations(findings)
    stored = coverage.stored_stats(out / "campaign.sqlite")
    fallbacks: Counter[str] = Counter()
    eager_xla: Counter[str] = Counter()
    for st in stored:
        fallbacks.update(st.get("reference_fallbacks", {}))
        eager_xla.update(st.get("eager_xla_ops", {}))
    summary = {
        "campaign": name,
        "programs": totals["programs"],
        "executions": totals["executions"],
        "elapsed_s": round(elapsed, 2),
        "programs_per_s": round(counters.status.total() / max(elapsed, 1e-9), 3),
        # Plain strings, as summary.json has them (and as `run` prints them), not enum members.
        "program_status": {str(k): n for k, n in totals["status"].items()},
        "trace_errors": store.programs_with_status(ProgramStatus.TRACE_ERROR),
        "corpus_errors": store.programs_with_status(ProgramStatus.CORPUS_ERROR),
        "coverage": coverage.total(stored).to_json(),
        # Which of XLA:CPU's kernel decisions (coverage.KERNEL_DECISIONS) the campaign reached.
        "kernel_decisions": coverage.decisions_summary(coverage.total(stored)),
        # Time the worker processes spent in jax/XLA against the slots' wall time: what
        # is left is the harness (pipes, pickling, the oracle, the store).
        "worker_seconds": round(worker_s, 2),
        "harness_share": round(max(0.0, 1 - worker_s / max(elapsed * spec.workers, 1e-9)), 3),
        "worker_restarts": worker_restarts,
        "findings": {str(k): n for k, n in totals["findings"].items()},
        "findings_new": len(findings) - known,
        "findings_known": known,
        # One row per bug: the configurations it shows in (each with its own finding and
        # evidence), and bugs counted as signatures beside the findings.
        "signatures": [{**s.to_summary(), "configurations": shown_in.get(s.id, [s.target] if s.target else [])}
                       for s in sigs],
        "signatures_new": sum(1 for s in sigs if not s.known_bug),
        "signatures_known": sum(1 for s in sigs if s.known_bug),
        "targets": [{"name": t.name, "options": t.options} for t in targets],
        # Targets left out because this machine lacks their platform (engine.validate).
        "unavailable_targets": dict(unavailable_targets or {}),
        "references": list(spec.references),
        # f64_numpy: its ops evaluated by XLA, and why the XLA float64 references ran
        # (suspect, sample, fallback, numpy_failed), in programs.
        "reference_fallbacks": dict(fallbacks),
        "cross_checks": dict(Counter(st["cross_check"] for st in stored if st.get("cross_check"))),
        # Judged programs with outputs the float64 references disagree on (not judged there).
        "undecided_outputs": sum(1 for st in stored if st.get("undecided_outputs")),
        # eager: the ops numpy does not reproduce bit for bit, evaluated by XLA, in ops.
        "eager_xla_ops": dict(eager_xla),
        "injected_passes": plugins,
        "seed": spec.seed,
        "shard": {"index": shard[0], "count": shard[1]},
        "jax_version": package_versions()["jax"],
        "jaxlib_version": package_versions()["jaxlib"],
    }
    save_summary(out, summary)
    return summary
