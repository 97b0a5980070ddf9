"""Recording a campaign: the store (opened fresh or resumed), each finding on disk and in
the store (signed, matched to known bugs, refined), and each program's status.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import structlog

from xla_sentinel.bisect.refine import refine_finding
from xla_sentinel.campaign.coverage import Coverage, stored_stats, total
from xla_sentinel.core.dtypes import name_of
from xla_sentinel.core.model import (
    CULPRIT_FIELDS,
    ERROR_SIGNED,
    Finding,
    ProgramStatus,
    Verdict,
)
from xla_sentinel.core.program import Program, json_default, save_arrays
from xla_sentinel.judge.targets import Target
from xla_sentinel.spec.campaign import CampaignSpec, SpecError, parse_spec
from xla_sentinel.storage.objects import FINDING_FORMAT
from xla_sentinel.storage.store import Store
from xla_sentinel.triage import known_bugs
from xla_sentinel.triage.signature import canonical_error, signature_of

log = structlog.get_logger("xla_sentinel.campaign.engine")


class Reporter(Protocol):
    def finding(self, record: dict[str, Any]) -> None: ...
    def progress(self, counters: dict[str, Any]) -> None: ...


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _changed(value: Any, default: Any) -> Any:
    """The parts of `value` that differ from `default` (None where nothing does)."""
    if isinstance(value, dict) and isinstance(default, dict):
        diff = {k: _changed(v, default.get(k)) for k, v in value.items()}
        return {k: v for k, v in diff.items() if v is not None} or None
    return None if value == default else value


def group_key(finding: Finding) -> tuple[Any, ...]:
    """What findings of one program must share to be one bug shown in several
    configurations: the verdict, the output it breaks and, for a crash, compile error or
    compile anomaly, the error text without names and numbers (signature.canonical_error).
    The targets are judged in the campaign's order, so the first of a group is the same
    configuration in every program that shows the bug (judge/assess.py)."""
    error = canonical_error(finding.error) if finding.verdict in ERROR_SIGNED else None
    return (finding.verdict, finding.evidence.get("output"), error)


def spec_fingerprint(spec: CampaignSpec, shard: tuple[int, int]) -> str:
    """What must match for a second run into the same folder to resume it.

    Only what differs from the defaults counts, so that a newer xla-sentinel that adds a
    field (at a default that keeps the old behaviour) still resumes an older campaign.
    """
    d = _changed(spec.to_dict(), CampaignSpec().to_dict()) or {}
    d.pop("budget", None)  # a resumed run may extend the budget
    d.pop("workers", None)
    d["shard"] = list(shard)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Counters:
    programs: int = 0
    executions: int = 0
    status: Counter[ProgramStatus] = field(default_factory=Counter)
    findings: Counter[Verdict] = field(default_factory=Counter)
    worker_s: float = 0.0  # this run's time in worker processes
    started: float = field(default_factory=time.monotonic)
    # What the campaign's programs exercised so far (a resumed store's included): a
    # worker's report carries its op counts (cluster/report.py coverage_of).
    coverage: Coverage = field(default_factory=Coverage)

    def snapshot(self) -> dict[str, Any]:
        cov = self.coverage
        return {"programs": self.programs, "executions": self.executions,
                "findings": dict(self.findings), "elapsed_s": round(time.monotonic() - self.started, 2),
                "coverage": {"programs": cov.programs, "ops": dict(cov.sections["ops"]),
                             "fusion_kinds": dict(cov.sections["fusion_kinds"])}}


class Recorder:
    """Writes what a campaign finds into `out` (campaign.sqlite, findings/<id>/)."""

    def __init__(self, out: Path, name: str, spec: CampaignSpec, plugins: list[str],
                 shard: tuple[int, int], counters: Counters, lock: threading.Lock,
                 reporter: Reporter | None) -> None:
        self.out = out
        self.name = name
        self.spec = spec
        self.plugins = plugins
        self.shard = shard
        self.counters = counters
        self.lock = lock
        self.reporter = reporter
        self.store: Store | None = None
        # The first finding of each group of the program in flight (group_key), as
        # recorded (signed, matched, bisected): the later ones join its signature.
        self._groups: dict[str, dict[tuple[Any, ...], Finding]] = {}

    def open(self) -> set[int]:
        """Open the store, fresh or resumed; the indices already done (empty when fresh)."""
        self.out.mkdir(parents=True, exist_ok=True)
        db = self.out / "campaign.sqlite"
        fresh = not db.exists()
        self.store = Store(db)
        fp = spec_fingerprint(self.spec, self.shard)
        if fresh:
            self.store.set_meta("fingerprint", fp)
            self.store.set_meta("name", self.name)
            self.store.set_meta("spec", json.dumps(self.spec.to_dict(), sort_keys=True))
            self.store.set_meta("created", now())
            self.store.set_meta("plugins", json.dumps(self.plugins))
            self.store.set_meta("shard", json.dumps(list(self.shard)))
            return set()
        if self._stored_fingerprint() != fp or self.store.get_meta("plugins") != json.dumps(self.plugins):
            raise SpecError(f"{self.out}: holds campaign {self.store.get_meta('name')!r} with a "
                            "different spec or injected passes; use a new --out folder to start "
                            "a new campaign, or the same campaign file to resume it")
        totals = self.store.totals()
        self.counters.programs = totals["programs"]
        self.counters.executions = totals["executions"]
        self.counters.findings.update(totals["findings"])
        self.counters.coverage = total(stored_stats(db))
        return self.store.done_indices()

    def _stored_fingerprint(self) -> str | None:
        """The stored campaign's fingerprint, recomputed from its spec by this version."""
        assert self.store is not None
        try:
            stored = parse_spec(json.loads(self.store.get_meta("spec") or "null"))
            shard = tuple(json.loads(self.store.get_meta("shard") or "[0, 1]"))
            return spec_fingerprint(stored, shard)
        except (SpecError, json.JSONDecodeError):
            return self.store.get_meta("fingerprint")

    def finding(self, program: Program, target: Target, verdict: Verdict, evidence: dict[str, Any],
                expected: list[np.ndarray] | None, actual: list[np.ndarray] | None,
                output: int | None = None) -> None:
        assert self.store is not None
        fid = hashlib.sha256(f"{program.id}|{target.name}|{verdict}".encode()).hexdigest()[:16]
        folder = self.out / "findings" / fid
        program.save(folder / "program")
        dtype = evidence.get("dtype")
        if expected is not None and actual is not None:
            # expected is the float64 reference (f64 for float outputs), actual the target's.
            for name, arrays in (("expected.npz", expected), ("actual.npz", actual)):
                arrays = [np.asarray(a) for a in arrays]
                save_arrays(folder / name, arrays, [name_of(a.dtype) for a in arrays])
        finding = Finding(
            id=fid, campaign=self.name, program=program.id, target=target.name, verdict=verdict,
            dtype=dtype, evidence={**evidence, "output": output, "target_options": target.options,
                                   "plugins": self.plugins},
            dir=str(folder.relative_to(self.out)), time=now())
        key = group_key(finding)
        with self.lock:
            first = self._groups.get(program.id, {}).get(key)
        if first is None:
            finding.known_bug = known_bugs.match(finding, graph=program.graph,
                                                 module=program.module if program.graph is None else None)
            finding.signature = signature_of(finding)  # a known bug signs it (signature_id)
        else:
            # One bug, one signature: the program's first finding of this group was signed,
            # matched to the known bugs and bisected; this configuration joins it (its own
            # evidence kept) with no second bisection or reproducer.
            finding = dataclasses.replace(
                finding, signature=first.signature, known_bug=first.known_bug,
                evidence={**finding.evidence, "grouped_with": first.id},
                **{k: getattr(first, k) for k in CULPRIT_FIELDS})
        # The format version travels with the finding, so a reader of a stored campaign can
        # refuse a layout newer than it knows (storage.read_finding).
        record = {"format": FINDING_FORMAT, **finding.to_json()}
        (folder / "finding.json").write_text(json.dumps(record, indent=1, default=json_default))
        if self.store.add_finding(finding):
            with self.lock:
                self.counters.findings[verdict] += 1
            log.info("finding", verdict=verdict, target=target.name, program=program.id,
                     signature=finding.signature, known_bug=finding.known_bug,
                     grouped_with=first.id if first is not None else None)
            if first is None:
                # Bisection (issue 4): the first findings of a candidate signature get localized.
                finding = refine_finding(self.store, self.out, finding, self.spec.bisect,
                                         self.spec.timeouts.programSeconds)
                with self.lock:
                    self._groups.setdefault(program.id, {})[key] = finding
            if self.reporter:
                self.reporter.finding(finding.to_json())

    def program(self, idx: int, pid: str, ops: int, status: ProgramStatus, executions: int,
                t0: float, stats: dict[str, Any]) -> None:
        """Record one program's status; counts it."""
        assert self.store is not None
        self.store.record_program(idx, pid, ops, status, executions, time.monotonic() - t0, stats)
        with self.lock:
            self._groups.pop(pid, None)
            self.counters.programs += 1
            self.counters.executions += executions
            self.counters.status[status] += 1
            self.counters.worker_s += stats.get("worker_s", 0.0)
            if "coverage" in stats:
                self.counters.coverage.add(stats["coverage"])
