"""The campaign loop: programs in, verdicts out, findings stored as they happen.

The coordinator never imports jax. Each slot (one per worker) owns a program worker
(generation and references, no injected passes) and one worker process per CPU target
under test; the targets of an accelerator platform run in the one process that owns it
on this host, shared by every slot (worker/devices.py). Slots run in threads, each XLA
compile in a worker process. CampaignRun
orchestrates the parts (docs/architecture.md, "The flow"): program sources (sources.py),
scheduling (scheduling.py), judging (assess.py), recording (recording.py) and the
summary (summary.py).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import structlog

from xla_sentinel.campaign import coverage
from xla_sentinel.campaign.multihost import MultiHost
from xla_sentinel.campaign.recording import Counters, Recorder, Reporter
from xla_sentinel.campaign.scheduling import Scheduler, shard_indices
from xla_sentinel.campaign.sources import ProgramSources, Unloadable
from xla_sentinel.campaign.summary import print_progress, write_summary
from xla_sentinel.core import cpu_account
from xla_sentinel.core.cpu_account import stage
from xla_sentinel.core.graph import Graph
from xla_sentinel.core.model import ProgramStatus
from xla_sentinel.judge.assess import Assessor, Slot, device_owners
from xla_sentinel.judge.targets import release_option_errors, resolve
from xla_sentinel.spec.campaign import CampaignSpec, SpecError
from xla_sentinel.spec.plugins import check_ref, split_ref
from xla_sentinel.worker import memory
from xla_sentinel.worker.client import Worker, distinct, release_workers, wait_ready
from xla_sentinel.worker.devices import process_kind
from xla_sentinel.worker.protocol import RequestFailed, Validate

log = structlog.get_logger()


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
        self.sources = ProgramSources(spec, name, self.out)
        self.counters = Counters()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.assessor = Assessor(self.targets, spec.references, spec.timeouts.programSeconds,
                                 {d: t.k for d, t in spec.tolerances.items()}, self.stop,
                                 spec.crossCheckEvery)
        # accelerator.hosts > 1: one more target, the process layout (campaign/multihost.py).
        self.multihost = MultiHost.of(spec, self.plugins)
        if self.multihost is not None:
            self.assessor = self.multihost.assessor(self.assessor)
            self.targets.append(self.assessor.targets[-1])
        self.recorder = Recorder(self.out, name, spec, self.plugins, self.shard, self.counters,
                                 self.lock, reporter)
        self.scheduler = Scheduler(spec.budget, self.stop, self.lock,
                                   lambda: self.counters.programs, lambda: self.counters.started)
        self.worker_restarts: dict[str, int] = {}
        self.unavailable: dict[str, str] = {}  # target -> why its platform is not here

    def run_program(self, slot: Slot, idx: int) -> None:
        # Each part in the CPU account (core/cpu_account.py); what none takes is "program".
        with stage("program"):
            self._run_program(slot, idx)

    def _run_program(self, slot: Slot, idx: int) -> None:
        t0 = time.monotonic()
        with stage("sources"):
            program = self.sources.program(slot, idx)
        if isinstance(program, Unloadable):
            with stage("storage"):
                self.recorder.program(idx, program.pid, 0, program.status, 0, t0, program.stats)
            return
        with stage("judging"):
            result = self.assessor.assess(slot, program)
        with stage("storage"):
            for v in result.verdicts:
                self.recorder.finding(program, v.target, v.verdict, v.evidence, result.expected,
                                      v.actual, v.output)
        graph = program.graph or Graph()
        stats = {"ops": dict(Counter(graph.op_names())),
                 "dtypes": sorted({v.dtype for v in graph.values}),
                 "special": bool(program.provenance.get("recipe", {}).get("special")),
                 "compile_s": result.compile_s,
                 "worker_s": result.worker_s + program.provenance.get("generation_s", 0.0)}
        if result.reference_fallbacks:
            stats["reference_fallbacks"] = result.reference_fallbacks
        if result.cross_check:
            stats["cross_check"] = result.cross_check
        if result.undecided_outputs:
            stats["undecided_outputs"] = result.undecided_outputs
        if result.eager_xla_ops:
            stats["eager_xla_ops"] = result.eager_xla_ops
        with stage("coverage"):
            stats["coverage"] = self.sources.observe(slot, idx, program, result)
        with stage("storage"):
            self.recorder.program(idx, program.id, program.op_count, result.status,
                                  result.executions, t0, stats)

    def _harness_error(self, idx: int) -> None:
        self.recorder.program(idx, f"s{self.spec.seed}-i{idx}", 0, ProgramStatus.HARNESS_ERROR, 0,
                              time.monotonic(), {})

    def _progress_loop(self) -> None:
        last_report = last_line = 0.0
        # A terminal gets a live line; a log file gets a line every 10 seconds.
        every = 0.5 if sys.stderr.isatty() else 10.0
        while not self.stop.wait(0.5):
            if self.show_progress and time.monotonic() - last_line >= every:
                last_line = time.monotonic()
                print_progress(self.counters, self.spec.budget.programs)
            if self.reporter and time.monotonic() - last_report > 5:
                last_report = time.monotonic()
                self.reporter.progress(self.counters.snapshot())

    def validate(self) -> None:
        """Fail before writing anything if a plugin or a target's XLA options are unusable,
        under the current jaxlib or a target's own release (targets.release_option_errors).
        A target whose platform this machine lacks is left out, said once (stderr, the
        log, summary.json `unavailable_targets`), and the campaign goes on with the rest."""
        errors: list[str] = []
        # Each platform's targets are checked in a worker that sees that platform, as
        # their own workers will (worker._serve); the plugins in the CPU one.
        for platform in dict.fromkeys(["cpu", *(t.platform for t in self.targets)]):
            group = [asdict(t) for t in self.targets if t.platform == platform]
            # On an accelerator the checker must be gone before the device's owner starts
            # (one process per host holds it): waited for as an owner is (DeviceOwner).
            checker = Worker(f"validate-{platform}", platform=platform,
                             exit_wait=30.0 if process_kind(platform) == "device_owner" else 5.0)
            try:
                reply = checker.call(Validate(self.plugins if platform == "cpu" else [], group), 120)
            except RequestFailed as e:
                raise SpecError(e.error) from None
            finally:
                checker.close()
            errors += reply.errors
            self.unavailable.update(reply.unavailable)
        errors += release_option_errors(self.spec.targets)
        if errors:
            raise SpecError(errors[0])
        device_owners(self.targets, self.plugins, None)  # SpecError where targets cannot share an owner
        if self.unavailable:
            for name, why in self.unavailable.items():
                log.warning("target_unavailable", target=name, reason=why)
                print(f"xla-sentinel: target {name}: {why}; the campaign goes on without it", file=sys.stderr)
            self.targets = [t for t in self.targets if t.name not in self.unavailable]
            self.assessor.targets = list(self.targets)
            if not self.targets:
                raise SpecError("spec.targets: none can run on this machine")

    def run(self) -> dict[str, Any]:
        # Set before any worker starts (validate's too): they inherit it; the campaign's
        # own, undone at its end, so a later campaign in this process counts its own.
        shared = memory_share_environment(self.spec, os.environ)
        os.environ.update(shared)
        try:
            return self._run()
        finally:
            for key in shared:
                os.environ.pop(key, None)

    def _run(self) -> dict[str, Any]:
        with stage(cpu_account.STARTUP):
            self.validate()
        with stage("storage"):
            done = self.recorder.open()
        if done:
            self.sources.resume(coverage.stored_stats(self.out / "campaign.sqlite"))
        logs = self.out / "logs"
        logs.mkdir(exist_ok=True)
        interpreter = "interpreter" in self.spec.references
        # One process per host owns each accelerator, fed by every slot; CPU targets and
        # the references keep a process per slot (docs/architecture.md, "Accelerators").
        owners = device_owners(self.targets, self.plugins, logs)
        slots = [Slot(i, self.targets, self.plugins, logs, interpreter, owners)
                 for i in range(self.spec.workers)]
        if self.multihost is not None:
            self.multihost.attach(slots, logs)
        progress = threading.Thread(target=self._progress_loop, daemon=True)
        try:
            with stage(cpu_account.STARTUP):
                wait_ready([w for s in slots for w in s.workers()])
            self.counters.started = time.monotonic()
            progress.start()
            indices = shard_indices(self.shard, self.sources.file_units, done)
            with stage(cpu_account.IDLE):  # the slots' threads run the programs
                self.scheduler.run(slots, indices, self.run_program, self._harness_error)
        finally:
            self.stop.set()
            workers = distinct([w for s in slots for w in s.workers()])
            self.worker_restarts = {"recycled_for_memory": sum(w.recycles for w in workers),
                                    "restarted_after_death": sum(w.restarts for w in workers)}
            for s in slots:
                s.close()
            release_workers()
            if self.show_progress:
                print_progress(self.counters, self.spec.budget.programs, final=True)
        with stage("storage"):
            summary = self.summary()
        if self.reporter:
            self.reporter.progress(self.counters.snapshot())
        assert self.recorder.store is not None
        self.recorder.store.close()
        return summary

    def summary(self) -> dict[str, Any]:
        assert self.recorder.store is not None
        summary = write_summary(self.out, self.recorder.store, self.counters, name=self.name,
                                spec=self.spec, targets=self.targets, plugins=self.plugins,
                                shard=self.shard, worker_restarts=self.worker_restarts,
                                unavailable_targets=self.unavailable)
        if self.multihost is not None:
            self.multihost.add_to_summary(self.out, summary)
        return summary


def memory_share_environment(spec: CampaignSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """What the engine adds to its environment for its worker processes: how many of them
    share the container's memory limit (worker/memory.py), unless `environ` says already
    (a pod's entrypoint counts the same, cluster/pod.py). Without it a local run in a
    memory-limited container (docker run -m, a CI job) gave each worker the share of one."""
    if environ.get(memory.WORKERS_ENV):
        return {}
    return {memory.WORKERS_ENV: str(memory.engine_workers(spec))}


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
