"""The campaign loop: programs in, verdicts out, findings stored as they happen.

The coordinator never imports jax. Each slot (one per worker) owns a program worker
(generation and references, no injected passes) and one worker process per target
under test; slots run in threads, each XLA compile in its own process.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import structlog

from . import corpus, coverage, known_bugs, traces
from .assess import Assessment, Assessor, Slot, Stopped
from .bisect.refine import refine_finding
from .campaign import CampaignSpec, SpecError, parse_spec
from .dtypes import name_of
from .guide import Guide
from .model import Finding, Verdict
from .plugins import check_ref, split_ref
from .program import Program, save_arrays
from .protocol import Generate, LoadCorpus, Loaded, LoadTrace, PassEffects, RequestFailed, Validate
from .signature import signature_of
from .store import Store
from .targets import Target, resolve
from .versions import package_versions
from .worker import Worker, WorkerDied, WorkerHung, wait_ready

log = structlog.get_logger("xla_sentinel.engine")


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
    status: Counter = field(default_factory=Counter)
    findings: Counter = field(default_factory=Counter)
    worker_s: float = 0.0  # this run's time in worker processes
    started: float = field(default_factory=time.monotonic)

    def snapshot(self) -> dict[str, Any]:
        return {"programs": self.programs, "executions": self.executions,
                "findings": dict(self.findings), "elapsed_s": round(time.monotonic() - self.started, 2)}


class CampaignRun:
    def __init__(self, spec: CampaignSpec, out_dir: Path, *, name: str = "campaign",
                 shard_index: int = 0, shard_count: int = 1, reporter: Reporter | None = None,
                 progress: bool = False, inject_passes: Sequence[str] = ()) -> None:
        self.spec = spec
        self.out = Path(out_dir)
        self.name = name
        self.shard = (shard_index, shard_count)
        self.reporter = reporter
        self.show_progress = progress
        refs = [*spec.injectPasses, *inject_passes]
        for i, ref in enumerate(refs):
            check_ref(ref, f"spec.injectPasses[{i}]" if i < len(spec.injectPasses) else "--inject-pass")
        # Absolute paths: worker processes and repro bundles must find the same files.
        self.plugins = [f"{split_ref(r)[0].resolve()}:{split_ref(r)[1]}" for r in refs]
        self.targets = [resolve(t) for t in spec.targets]
        self.trace_units = traces.discover(spec.traces)
        # Corpus units follow the trace units in the negative indices.
        self.corpus_units = corpus.discover(spec.corpus)
        self.guide = Guide(spec.seed) if spec.generator.guided else None
        self.counters = Counters()
        self.stop = threading.Event()
        self.assessor = Assessor(self.targets, spec.references, spec.timeouts.programSeconds,
                                 {d: t.k for d, t in spec.tolerances.items()}, self.stop)
        self.lock = threading.Lock()
        self.done: set[int] = set()
        self.store: Store | None = None
        self.worker_restarts: dict[str, int] = {}

    # --- setup -----------------------------------------------------------------------------

    def _open_store(self) -> None:
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
            return
        if self._stored_fingerprint() != fp or self.store.get_meta("plugins") != json.dumps(self.plugins):
            raise SpecError(f"{self.out}: holds campaign {self.store.get_meta('name')!r} with a "
                            "different spec or injected passes; use a new --out folder to start "
                            "a new campaign, or the same campaign file to resume it")
        self.done = self.store.done_indices()
        totals = self.store.totals()
        self.counters.programs = totals["programs"]
        self.counters.executions = totals["executions"]
        self.counters.findings.update(totals["findings"])
        if self.guide:  # a resumed guided campaign starts from the coverage it had
            for stats in coverage.stored_stats(db):
                if "coverage" in stats:
                    self.guide.observe(0, stats["coverage"], None, None)

    def _stored_fingerprint(self) -> str | None:
        """The stored campaign's fingerprint, recomputed from its spec by this version."""
        assert self.store is not None
        try:
            stored = parse_spec(json.loads(self.store.get_meta("spec") or "null"))
            shard = tuple(json.loads(self.store.get_meta("shard") or "[0, 1]"))
            return spec_fingerprint(stored, shard)  # type: ignore[arg-type]
        except (SpecError, json.JSONDecodeError):
            return self.store.get_meta("fingerprint")

    def _indices(self) -> Iterator[int]:
        # Trace and corpus units first, as negative indices, so they never collide with
        # generated ones.
        for k in range(len(self.trace_units) + len(self.corpus_units)):
            if k % self.shard[1] == self.shard[0] and -(k + 1) not in self.done:
                yield -(k + 1)
        k = 0
        while True:
            idx = self.shard[0] + k * self.shard[1]
            k += 1
            if idx not in self.done:
                yield idx

    def _budget_left(self) -> bool:
        b = self.spec.budget
        if b.continuous:
            return True
        if b.programs is not None and self.counters.programs + self._in_flight >= b.programs:
            return False
        if b.seconds is not None and time.monotonic() - self.counters.started >= b.seconds:
            return False
        return True

    # --- one program ---------------------------------------------------------------------

    def _load_trace(self, slot: Slot, idx: int) -> tuple[Program | None, str]:
        path = self.trace_units[-idx - 1]
        try:
            reply = slot.programs.call(LoadTrace(str(path), self.spec.seed),
                                       self.spec.timeouts.programSeconds)
        except (WorkerDied, WorkerHung) as e:
            return None, f"{path}: loading crashed the worker ({e})"
        except RequestFailed as e:
            return None, e.error.removeprefix("ProgramError: ")
        return self._loaded(reply), ""

    def _load_corpus(self, slot: Slot, idx: int) -> tuple[Program | None, str]:
        path = self.corpus_units[-idx - 1 - len(self.trace_units)]
        req = LoadCorpus(str(path), self.spec.seed)
        # A snippet is user code: it runs in a process of its own, so whatever it does to
        # jax's state (or to the process) cannot reach the references that run later.
        loader = Worker(f"{slot.programs.name}-corpus", (), self.out / "logs" / "corpus.log") \
            if path.suffix == corpus.SNIPPET_SUFFIX else slot.programs
        try:
            reply = loader.call(req, self.spec.timeouts.programSeconds)
        except (WorkerDied, WorkerHung) as e:
            return None, f"{path}: loading crashed or hung the worker ({str(e).splitlines()[0]})"
        except RequestFailed as e:
            return None, e.error.removeprefix("ProgramError: ")
        finally:
            if loader is not slot.programs:
                loader.close()
        return self._loaded(reply), ""

    def _loaded(self, reply: Loaded) -> Program:
        return Program(id=reply.id, module=reply.module, inputs=reply.inputs,
                       input_dtypes=reply.input_dtypes,
                       provenance={**reply.provenance, "campaign": self.name})

    def _generate(self, slot: Slot, idx: int) -> Program | None:
        special = np.random.default_rng([self.spec.seed, idx, 0x5BEC]).random() < self.spec.generator.specialValues
        bias = self.guide.bias(idx) if self.guide else None
        req = Generate(self.spec.seed, idx, asdict(self.spec.generator), bool(special), bias)
        try:
            reply = slot.programs.call(req, self.spec.timeouts.programSeconds)
        except (WorkerDied, WorkerHung, RequestFailed) as e:
            log.warning("generator failed", index=idx, error=str(e))
            return None
        return Program(id=f"s{self.spec.seed}-i{idx}", module=reply.module, inputs=reply.inputs,
                       input_dtypes=reply.input_dtypes, graph=reply.graph,
                       provenance={"source": "generator", "campaign": self.name,
                                   "recipe": reply.recipe, "generation_s": reply.busy_s,
                                   **({"guidance": Guide.describe(bias)} if self.guide else {})})

    def run_program(self, slot: Slot, idx: int) -> None:
        t0 = time.monotonic()
        if idx < -len(self.trace_units):
            program, error = self._load_corpus(slot, idx)
            if program is None:
                # A malformed submission is reported and skipped; the campaign goes on.
                log.warning("corpus file rejected", error=error)
                path = self.corpus_units[-idx - 1 - len(self.trace_units)]
                self._finish_program(idx, str(path), 0, "corpus_error", 0, t0, {"error": error})
                return
        elif idx < 0:
            program, error = self._load_trace(slot, idx)
            if program is None:
                # A bad trace is reported and skipped; the campaign goes on.
                log.warning("trace unreadable", error=error)
                self._finish_program(idx, str(self.trace_units[-idx - 1]), 0, "trace_error", 0, t0,
                                     {"error": error})
                return
        else:
            program = self._generate(slot, idx)
        if program is None:
            self._finish_program(idx, f"s{self.spec.seed}-i{idx}", 0, "generator_error", 0, t0, {})
            return
        result = self.assessor.assess(slot, program)
        for v in result.verdicts:
            self._record(program, v.target, v.verdict, v.evidence, result.expected, v.actual, v.output)
        graph = program.graph or {}
        stats = {"ops": dict(Counter(n["op"] for n in graph.get("nodes", []))),
                 "dtypes": sorted({v["dtype"] for v in graph.get("values", [])}),
                 "special": bool(program.provenance.get("recipe", {}).get("special")),
                 "compile_s": result.compile_s,
                 "worker_s": result.worker_s + program.provenance.get("generation_s", 0.0)}
        stats["coverage"] = self._coverage(slot, idx, program, result)
        self._finish_program(idx, program.id, program.op_count, result.status, result.executions,
                             t0, stats)

    def _coverage(self, slot: Slot, idx: int, program: Program, result: Assessment) -> dict[str, Any]:
        """What the program exercised; feeds the guide. Pass effects only on a sample."""
        passes = None
        if coverage.pass_sampled(idx):
            try:
                # One compile per pass, each allowed what a program is allowed.
                passes = slot.programs.call(
                    PassEffects(program.module, list(coverage.PASSES)),
                    self.spec.timeouts.programSeconds * (len(coverage.PASSES) + 1)).changed
            except (WorkerDied, WorkerHung, RequestFailed):
                passes = None  # a module a pass-disabled compile kills: no measurement
        cov = coverage.program_coverage(program.graph, program.module, program.inputs,
                                        result.hlo, passes)
        if self.guide and idx >= 0:
            # A program with a finding is no near miss: it hit.
            margin = None if result.verdicts else max(result.margins.values(), default=None)
            self.guide.observe(idx, cov, program.graph, margin)
        return cov

    # --- recording -----------------------------------------------------------------------

    def _record(self, program: Program, target: Target, verdict: Verdict, evidence: dict[str, Any],
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
        finding.signature = signature_of(finding)
        finding.known_bug = known_bugs.match(finding)
        (folder / "finding.json").write_text(json.dumps(finding.to_json(), indent=1, default=_json_default))
        if self.store.add_finding(finding):
            with self.lock:
                self.counters.findings[verdict] += 1
            log.info("finding", verdict=verdict, target=target.name, program=program.id,
                     signature=finding.signature, known_bug=finding.known_bug)
            # Bisection (issue 4): the first findings of a candidate signature get localized.
            finding = refine_finding(self.store, self.out, finding, self.spec.bisect,
                                     self.spec.timeouts.programSeconds)
            if self.reporter:
                self.reporter.finding(finding.to_json())

    def _finish_program(self, idx: int, pid: str, ops: int, status: str, executions: int,
                        t0: float, stats: dict[str, Any]) -> None:
        assert self.store is not None
        self.store.record_program(idx, pid, ops, status, executions, time.monotonic() - t0, stats)
        with self.lock:
            self.counters.programs += 1
            self.counters.executions += executions
            self.counters.status[status] += 1
            self.counters.worker_s += stats.get("worker_s", 0.0)

    # --- loop ----------------------------------------------------------------------------

    def _slot_loop(self, slot: Slot, indices: Iterator[int]) -> None:
        while not self.stop.is_set():
            with self.lock:
                if not self._budget_left():
                    return
                idx = next(indices)
                self._in_flight += 1
            try:
                self.run_program(slot, idx)
            except Stopped:
                return
            except Exception:
                log.exception("program failed in the harness", index=idx)
                self._finish_program(idx, f"s{self.spec.seed}-i{idx}", 0, "harness_error", 0,
                                     time.monotonic(), {})
            finally:
                with self.lock:
                    self._in_flight -= 1

    def _progress_loop(self) -> None:
        last_report = last_line = 0.0
        # A terminal gets a live line; a log file gets a line every 10 seconds.
        every = 0.5 if sys.stderr.isatty() else 10.0
        while not self.stop.wait(0.5):
            if self.show_progress and time.monotonic() - last_line >= every:
                last_line = time.monotonic()
                self._print_progress()
            if self.reporter and time.monotonic() - last_report > 5:
                last_report = time.monotonic()
                self.reporter.progress(self.counters.snapshot())

    def _print_progress(self, final: bool = False) -> None:
        c = self.counters
        el = time.monotonic() - c.started
        total = self.spec.budget.programs
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

    def validate(self) -> None:
        """Fail before writing anything if a plugin or a target's XLA options are unusable."""
        checker = Worker("validate")
        try:
            reply = checker.call(Validate(self.plugins, [asdict(t) for t in self.targets]), 120)
        except RequestFailed as e:
            raise SpecError(e.error) from None
        finally:
            checker.close()
        if reply.errors:
            raise SpecError(reply.errors[0])

    def run(self) -> dict[str, Any]:
        self.validate()
        self._open_store()
        self._in_flight = 0
        logs = self.out / "logs"
        logs.mkdir(exist_ok=True)
        interpreter = "interpreter" in self.spec.references
        slots = [Slot(i, self.targets, self.plugins, logs, interpreter) for i in range(self.spec.workers)]
        progress = threading.Thread(target=self._progress_loop, daemon=True)
        try:
            wait_ready([w for s in slots for w in s.workers()])
            self.counters.started = time.monotonic()
            progress.start()
            indices = self._indices()
            threads = [threading.Thread(target=self._slot_loop, args=(s, indices), daemon=True)
                       for s in slots]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        finally:
            self.stop.set()
            workers = [w for s in slots for w in s.workers()]
            self.worker_restarts = {"recycled_for_memory": sum(w.recycles for w in workers),
                                    "restarted_after_death": sum(w.restarts for w in workers)}
            for s in slots:
                s.close()
            if self.show_progress:
                self._print_progress(final=True)
        summary = self.summary()
        if self.reporter:
            self.reporter.progress(self.counters.snapshot())
        assert self.store is not None
        self.store.close()
        return summary

    def summary(self) -> dict[str, Any]:
        assert self.store is not None
        totals = self.store.totals()
        elapsed = time.monotonic() - self.counters.started
        sigs = self.store.signatures()
        findings = self.store.findings()
        worker_s = self.counters.worker_s
        known = sum(1 for f in findings if f.known_bug)
        summary = {
            "campaign": self.name,
            "programs": totals["programs"],
            "executions": totals["executions"],
            "elapsed_s": round(elapsed, 2),
            "programs_per_s": round(self.counters.status.total() / max(elapsed, 1e-9), 3),
            "program_status": totals["status"],
            "trace_errors": self.store.programs_with_status("trace_error"),
            "corpus_errors": self.store.programs_with_status("corpus_error"),
            "coverage": coverage.total(coverage.stored_stats(self.out / "campaign.sqlite")).to_json(),
            # Time the worker processes spent in jax/XLA against the slots' wall time: what
            # is left is the harness (pipes, pickling, the oracle, the store).
            "worker_seconds": round(worker_s, 2),
            "harness_share": round(max(0.0, 1 - worker_s / max(elapsed * self.spec.workers, 1e-9)), 3),
            "worker_restarts": self.worker_restarts,
            "findings": totals["findings"],
            "findings_new": len(findings) - known,
            "findings_known": known,
            "signatures": [s.to_summary() for s in sigs],
            "targets": [{"name": t.name, "options": t.options} for t in self.targets],
            "references": list(self.spec.references),
            "injected_passes": self.plugins,
            "seed": self.spec.seed,
            "shard": {"index": self.shard[0], "count": self.shard[1]},
            "jax_version": package_versions()["jax"],
            "jaxlib_version": package_versions()["jaxlib"],
        }
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1, default=_json_default))
        return summary


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def run_campaign(spec: CampaignSpec, out_dir: Path, *, name: str = "campaign", shard_index: int = 0,
                 shard_count: int = 1, reporter: Reporter | None = None, progress: bool = False,
                 inject_passes: Sequence[str] = ()) -> dict[str, Any]:
    """Run a campaign into `out_dir`; returns the summary (also written to summary.json)."""
    run = CampaignRun(spec, out_dir, name=name, shard_index=shard_index, shard_count=shard_count,
                      reporter=reporter, progress=progress, inject_passes=inject_passes)
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a pod being stopped) ends the campaign like Ctrl-C: findings are committed.
        signal.signal(signal.SIGTERM, lambda *_: run.stop.set())
        # A process started with SIGINT ignored (a background job of a shell without job
        # control, a parent that ignores it) inherits that, and Python keeps it: Ctrl-C or
        # kill -INT would then not stop the campaign at all.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run.run()
    except KeyboardInterrupt:
        run.stop.set()
        return run.summary()
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous[0])
            signal.signal(signal.SIGINT, previous[1])
