"""The bisector's bench: a worker with the failing target's plugins, a reference worker
without them, and the one question every stage asks: does this case still fail?

"Fails" is the oracle's rule (oracle.judge): the target's error against the float64
reference is far beyond the error of a legal configuration at the same precision (the
float64 jit settings, no plugins, an SPMD case unsharded: serve.legal) on the same case.
For an `invariant_violated` finding it is the invariant instead (check_invariant): the
target's result still breaks it, whatever the numbers.
A failing result is compiled and run a second time when asked; a different answer means
the failure is nondeterministic.
Coordinator side: no jax here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from xla_sentinel.core.elements import NUMPY
from xla_sentinel.core.model import ProgramStatus, Verdict
from xla_sentinel.judge import invariants, oracle, targets
from xla_sentinel.judge.invariants import Invariant
from xla_sentinel.worker.client import Worker, WorkerDied, WorkerHung
from xla_sentinel.worker.hosts import HostGroup, Layout
from xla_sentinel.worker.protocol import (
    Cut,
    Legal,
    ModuleReference,
    Outputs,
    Ping,
    R,
    Ran,
    Request,
    RequestFailed,
    Run,
)


class LabError(RuntimeError):
    """A request the bisector relies on failed where it must not (e.g. cutting a module)."""


@dataclass
class Case:
    """A module to check, with its inputs and the float64 values its outputs should have."""

    module: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    infos: list[oracle.OutputInfo]
    discrete: bool
    ops: list[int] = field(default_factory=list)  # indices of the original @main ops it keeps
    # The values of @main its parameters and outputs are (context.Context.case); empty for a
    # case that is not a cut of @main (a region's exposed values, bisect/regions.py).
    params: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


# A probe that this project's own code failed (ProgramStatus.HARNESS_ERROR): no Verdict of the
# target, so no failure of the finding's kind, and kept apart from every Verdict.
HarnessError = Literal[ProgramStatus.HARNESS_ERROR]


@dataclass
class TargetRun:
    """The target's run of a case: `ran` when it compiled and ran, else why not."""

    verdict: Verdict | HarnessError  # PASS when it ran, else a compiler failure or the harness's
    error: str = ""
    ran: Ran | None = None

    @property
    def same(self) -> bool | None:
        """Whether a repeated run agreed bitwise with the first (None: not repeated)."""
        if self.ran is None or self.ran.again is None:
            return None
        return all(np.array_equal(a, b, equal_nan=True)
                   for a, b in zip(self.ran.outputs, self.ran.again, strict=True))


@dataclass
class Check:
    """The target's answer on a case."""

    fails: bool
    verdict: Verdict | HarnessError  # the oracle's verdict, or why the target did not run
    evidence: dict[str, Any] = field(default_factory=dict)
    outputs: list[np.ndarray] | None = None
    deterministic: bool | None = None  # set when the case was run twice
    hlo: str | None = None


class Lab:
    def __init__(self, options: dict[str, Any], plugins: Sequence[str], timeout: float,
                 log_dir: Path | None = None, probe_timeout: float | None = None,
                 layout: Layout | None = None) -> None:
        """`probe_timeout`: how long a target compile and run of a case may take before it
        counts as a hang (default `timeout`); short when bisecting a hang, whose every
        probe that still fails takes that long. `layout`: the target is a group of host
        processes (worker/hosts.py), every case compiled and run on all of them in
        lockstep, as the campaign ran the finding's program (a `hosts2x2` finding)."""
        self.options = dict(options)
        self.plugins = list(plugins)
        self.timeout = timeout
        self.probe_timeout = probe_timeout or timeout
        self._warm_first = probe_timeout is not None
        self.layout = layout
        self.target: Worker | HostGroup
        if layout is not None:
            self.target = HostGroup(layout, tuple(plugins), log_dir, name=f"bisect-{layout.name}")
        else:
            self.target = Worker("bisect-target", tuple(plugins),
                                 log_dir / "bisect-target.log" if log_dir else None)
        self.reference = Worker("bisect-reference", (),
                                      log_dir / "bisect-reference.log" if log_dir else None)
        self.compiles: Counter[str] = Counter()  # target compiles per stage
        self.stage = "setup"
        # The legal configuration evaluated op by op (each op compiled alone, the campaign's
        # `eager_module` reference of a replayed module) instead of compiled whole: set by
        # the reproduce stage where the whole compile shares the finding's wrong numbers
        # (a bug every configuration has: divide_by_broadcast_reciprocal), so a case is not
        # judged right for being as wrong as the legal compile.
        self.legal_by_ops = False

    def close(self) -> None:
        self.target.close()
        self.reference.close()

    def ask_reference(self, request: Request[R]) -> R:
        """A request to the reference worker that must succeed (cutting, evaluating)."""
        name = type(request).__name__
        try:
            return self.reference.call(request, self.timeout)
        except (WorkerDied, WorkerHung) as e:
            raise LabError(f"reference worker failed on {name}: {e}") from None
        except RequestFailed as e:
            raise LabError(f"{name}: {e.error}") from None

    def cut(self, module: str, keep: list[int], params: list[str], outputs: list[str]) -> str:
        return self.ask_reference(Cut(module, keep, params, outputs)).module

    def run_target(self, module: str, inputs: list[np.ndarray], options: dict[str, Any] | None = None,
                   *, want_hlo: bool = False, repeat: bool = False) -> TargetRun:
        """The target's run of the module, or the compiler failure that prevented it."""
        self.compiles[self.stage] += 2 if repeat else 1
        request = Run(module, inputs, self.options if options is None else options,
                      want_hlo=want_hlo, repeat=repeat)
        try:
            if self._warm_first:
                # A worker that a hang killed starts again (imports jax) before the timed
                # probe, so a slow start is not taken for a hang.
                self.target.call(Ping(), self.timeout)
            return TargetRun(Verdict.PASS, ran=self.target.call(request, self.probe_timeout))
        except WorkerHung as e:
            return TargetRun(Verdict.HANG, str(e))
        except WorkerDied as e:
            return TargetRun(Verdict.CRASH, f"{e}\n{e.log_tail[-1500:]}")
        except RequestFailed as e:
            # XLA's refusal is a compile error; an exception of this project's code (the
            # harness, targets.xla_failure) is no failure of the finding's kind.
            return TargetRun(Verdict.COMPILE_ERROR if targets.xla_failure(e.error)
                             else ProgramStatus.HARNESS_ERROR, e.error)

    def check_compile(self, case: Case, verdict: Verdict, options: dict[str, Any] | None = None, *,
                      repeat: bool = False, want_hlo: bool = False) -> Check:
        """Does the target still fail to compile (or run) this case the way `verdict` says?
        A crash cannot be run twice in one request, so a repeat is a second request."""
        first = self.run_target(case.module, case.inputs, options, want_hlo=want_hlo)
        deterministic = None
        if repeat:
            deterministic = first.verdict == self.run_target(case.module, case.inputs, options).verdict
        return Check(first.verdict == verdict, first.verdict, {"error": first.error[:2000]},
                     first.ran.outputs if first.ran else None, deterministic,
                     first.ran.hlo if first.ran else None)

    def check_buffers(self, case: Case, verdict: Verdict, options: dict[str, Any] | None = None, *,
                      repeat: bool = False, want_hlo: bool = False) -> Check:
        """Do the target worker's buffer checks (xla/buffers.py) still report `verdict` on
        this case? Repeated as a second request, as a crash is."""

        def shows(run: TargetRun) -> list[dict[str, Any]]:
            return [p for p in run.ran.buffers if p["verdict"] == verdict] if run.ran else []

        first = self.run_target(case.module, case.inputs, options, want_hlo=want_hlo)
        if first.ran is None:
            return Check(False, first.verdict, {"error": first.error[:2000]})
        found = shows(first)
        deterministic = None
        if repeat:
            deterministic = bool(shows(self.run_target(case.module, case.inputs, options))) == bool(found)
        return Check(bool(found), verdict if found else Verdict.PASS, {"buffers": found},
                     first.ran.outputs, deterministic, first.ran.hlo)

    def legal(self, module: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The case at its own precision under the float64 jit's legal settings, no plugins;
        an SPMD case unsharded (serve.legal), so a partitioner bug that the target shares
        with every configuration of the module is not taken for the right answer. Op by op
        (each op compiled alone, calls inlined) where `legal_by_ops` says so."""
        request: Request[Outputs] = Legal(module, inputs)
        if self.legal_by_ops:
            # eager_module inlines calls first (bisect_handlers.op_by_op).
            request = ModuleReference("eager_module", module, inputs)
        outputs = self.ask_reference(request).outputs
        assert outputs is not None
        return outputs

    def check_invariant(self, case: Case, inv: Invariant, options: dict[str, Any] | None = None, *,
                        repeat: bool = False, want_hlo: bool = False) -> Check:
        """Does the target's result on this case still break invariant `inv` (numbered in
        the case's outputs and parameters)? Judged as the campaign judges it
        (judge_invariant), whatever the numbers."""
        run = self.run_target(case.module, case.inputs, options, want_hlo=want_hlo, repeat=repeat)
        if run.ran is None:
            return Check(False, run.verdict, {"error": run.error[:2000]})
        outputs = run.ran.outputs
        fails, evidence = judge_invariant(inv, case, outputs, self.legal(case.module, case.inputs))
        return Check(fails, Verdict.INVARIANT_VIOLATED if fails else Verdict.PASS, evidence, outputs,
                     run.same, run.ran.hlo)

    def check(self, case: Case, options: dict[str, Any] | None = None, *, repeat: bool = False,
              want_hlo: bool = False) -> Check:
        """Does the target compute wrong numbers on this case?"""
        run = self.run_target(case.module, case.inputs, options, want_hlo=want_hlo, repeat=repeat)
        if run.ran is None:
            return Check(False, run.verdict, {"error": run.error[:2000]})
        outputs = run.ran.outputs
        results = {"target": outputs, "legal": self.legal(case.module, case.inputs)}
        # The legal compile is the literal result for outputs judged bitwise.
        j = oracle.judge("target", results, case.expected, case.infos, lambda: None, case.discrete,
                         exact="legal")
        return Check(j.verdict is not Verdict.PASS, j.verdict, {**j.evidence, "output": j.output}, outputs,
                     run.same, run.ran.hlo)


def own_dtype(value: np.ndarray, dtype: str) -> np.ndarray:
    """A reference value rounded to the type a module parameter declares."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(value).astype(NUMPY[dtype])


def judge_invariant(inv: Invariant, case: Case, outputs: Sequence[np.ndarray],
                    legal: Sequence[np.ndarray]) -> tuple[bool, dict[str, Any]]:
    """Whether `outputs` (the target's, on `case`) break `inv`, with the bound the judge
    gives it (judge/assess.py invariant_violations): from the case's float64 values and
    the output's dtype; the legal compile of the case stands in for the literal evaluation
    (its non-finite elements are excused) and for the noise model's samples (its own miss,
    times invariants.SAFETY, widens the bound), so what legal rounding does on this case
    never counts. The evidence names the invariant either way."""
    i = inv.output
    dtype = case.infos[i].dtype
    v = invariants.check_beside_legal(inv, list(outputs), case.expected, dtype, legal, inputs=case.inputs)
    if v is None:
        return False, {"judged_by": "invariant", "invariant": inv.kind, "declared_by": inv.source,
                       "output": i, "dtype": dtype, "holds": True}
    return True, {**v.evidence(), "judged_by": "invariant", "dtype": dtype}
