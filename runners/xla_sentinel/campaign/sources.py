"""Program sources of a campaign: trace files, corpus submissions and the generator,
each turned into a Program by the slot's program worker (docs/architecture.md, "The flow").

Trace and corpus units take the negative indices (-1, -2, ...; traces first), generated
programs the non-negative ones, so neither collides with the other on resume.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from xla_sentinel.campaign import coverage
from xla_sentinel.campaign.guide import Guide
from xla_sentinel.core.model import ProgramStatus
from xla_sentinel.core.program import Program
from xla_sentinel.judge import invariants
from xla_sentinel.judge.assess import Assessment, Slot
from xla_sentinel.programs import units
from xla_sentinel.spec.campaign import CampaignSpec, resolve_generator
from xla_sentinel.worker.client import Worker, WorkerDied, WorkerHung
from xla_sentinel.worker.protocol import (
    Generate,
    LoadCorpus,
    Loaded,
    LoadTrace,
    PassEffects,
    RequestFailed,
)

log = structlog.get_logger("xla_sentinel.campaign.engine")


@dataclass
class Unloadable:
    """A unit that gave no program: what the store records for it instead."""

    pid: str  # the unit's path, or the generated program's id
    status: ProgramStatus  # one whose `unloadable` is true
    error: str = ""

    @property
    def stats(self) -> dict[str, Any]:
        return {"error": self.error} if self.error else {}


class ProgramSources:
    def __init__(self, spec: CampaignSpec, name: str, out: Path) -> None:
        self.spec = spec
        self.name = name
        self.out = out
        self.trace_units = units.trace_units([*spec.traces], spec.mutations)
        self.corpus_units = units.corpus_units([*spec.corpus])  # after the trace units
        self.guide = Guide(spec.seed, decisions=spec.generator.version >= 2) if spec.generator.guided else None

    @property
    def file_units(self) -> int:
        """How many negative indices the trace and corpus units take."""
        return len(self.trace_units) + len(self.corpus_units)

    def resume(self, stored_stats: list[dict[str, Any]]) -> None:
        """A resumed guided campaign starts from the coverage it had."""
        if self.guide:
            for stats in stored_stats:
                if "coverage" in stats:
                    self.guide.observe(0, stats["coverage"], None, None)

    def program(self, slot: Slot, idx: int) -> Program | Unloadable:
        if idx < -len(self.trace_units):
            return self._load_corpus(slot, idx)
        if idx < 0:
            return self._load_trace(slot, idx)
        return self._generate(slot, idx) or Unloadable(f"s{self.spec.seed}-i{idx}", ProgramStatus.GENERATOR_ERROR)

    def _load_trace(self, slot: Slot, idx: int) -> Program | Unloadable:
        path = self.trace_units[-idx - 1]
        try:
            reply = slot.programs.call(LoadTrace(str(path), self.spec.seed),
                                       self.spec.timeouts.programSeconds)
        except (WorkerDied, WorkerHung) as e:
            error = f"{path}: loading crashed the worker ({e})"
        except RequestFailed as e:
            error = e.error.removeprefix("ProgramError: ")
        else:
            error = misdeclared(reply)
            if not error:
                return self._loaded(reply)
        # A bad trace is reported and skipped; the campaign goes on.
        log.warning("trace unreadable", error=error)
        return Unloadable(str(path), ProgramStatus.TRACE_ERROR, error)

    def _load_corpus(self, slot: Slot, idx: int) -> Program | Unloadable:
        path = self.corpus_units[-idx - 1 - len(self.trace_units)]
        # A snippet is user code: it runs in a process of its own, so whatever it does to
        # jax's state (or to the process) cannot reach the references that run later.
        loader = Worker(f"{slot.programs.name}-corpus", (), self.out / "logs" / "corpus.log") \
            if path.suffix == units.SNIPPET_SUFFIX else slot.programs
        try:
            reply = loader.call(LoadCorpus(str(path), self.spec.seed), self.spec.timeouts.programSeconds)
        except (WorkerDied, WorkerHung) as e:
            error = f"{path}: loading crashed or hung the worker ({str(e).splitlines()[0]})"
        except RequestFailed as e:
            error = e.error.removeprefix("ProgramError: ")
        else:
            error = misdeclared(reply)
            if not error:
                return self._loaded(reply)
        finally:
            if loader is not slot.programs:
                loader.close()
        # A malformed submission is reported and skipped; the campaign goes on.
        log.warning("corpus file rejected", error=error)
        return Unloadable(str(path), ProgramStatus.CORPUS_ERROR, error)

    def _loaded(self, reply: Loaded) -> Program:
        return Program(id=reply.id, module=reply.module, inputs=reply.inputs,
                       input_dtypes=reply.input_dtypes,
                       provenance={**reply.provenance, "campaign": self.name})

    def _generate(self, slot: Slot, idx: int) -> Program | None:
        special = np.random.default_rng([self.spec.seed, idx, 0x5BEC]).random() < self.spec.generator.specialValues
        bias = self.guide.bias(idx) if self.guide else None
        req = Generate(self.spec.seed, idx, asdict(resolve_generator(self.spec)), bool(special), bias)
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

    def observe(self, slot: Slot, idx: int, program: Program, result: Assessment) -> dict[str, Any]:
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


def misdeclared(reply: Loaded) -> str:
    """Why a loaded trace's meta.json `invariants` cannot judge its module (the file, the
    entry and what is wrong), or "". A malformed declaration refuses the trace as any
    unreadable input is (docs/detection.md, "Invariants"): judging it without would lose
    the invariant silently."""
    try:
        invariants.for_module(reply.provenance, reply.module)
    except invariants.InvariantError as e:
        where = Path(str(reply.provenance.get("path", reply.id)))
        meta = where / "meta.json" if where.is_dir() else where.parent / "meta.json"
        return f"{meta}: {e}"
    return ""
