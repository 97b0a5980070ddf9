"""Assess one program: run it under every target and reference, and judge each target.

Shared by the campaign loop and `xla-sentinel check`. A Slot is one lane of worker
processes: a program worker (generation and references, never injected passes) and one
worker per target under test (injected passes registered there only).
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from xla_sentinel.core import stablehlo
from xla_sentinel.core.anomalies import AnomalyLine, anomaly_evidence
from xla_sentinel.core.cpu_account import stage
from xla_sentinel.core.dtypes import UNIT_ROUNDOFF
from xla_sentinel.core.model import (
    BUFFER_VERDICTS,
    XLA_F64_REFERENCES,
    ProgramStatus,
    Reference,
    Verdict,
)
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import Program, result_dtypes
from xla_sentinel.core.versions import current_jaxlib
from xla_sentinel.judge import invariants, oracle, targets
from xla_sentinel.judge.invariant_patterns import recognized
from xla_sentinel.judge.noise import NoiseDraw, NoiseModel, Samples
from xla_sentinel.judge.targets import Target
from xla_sentinel.ops import exact
from xla_sentinel.ops.rules import DISCRETE_OPS
from xla_sentinel.spec.campaign import SpecError
from xla_sentinel.spec.options import REFERENCE_OPTIONS
from xla_sentinel.worker import devices
from xla_sentinel.worker.client import DeviceOwner, Worker, WorkerDied, WorkerHung, distinct
from xla_sentinel.worker.protocol import (
    ClassifyModule,
    GraphReference,
    Info,
    ModuleReference,
    Noise,
    NoiseSamples,
    NumpyReference,
    Outputs,
    Ran,
    Region,
    Reply,
    Request,
    RequestFailed,
    Run,
    ToPortable,
    VersionInfo,
    WhichVersions,
)

# References evaluated at the program's own precision: they count among "the other
# configurations" of the oracle, unlike the float64 references, which are the truth.
OWN_PRECISION_REFERENCES = ("eager", "eager_module", "interpreter", "unsharded")


# The float64 references that go through XLA (model.XLA_F64_REFERENCES). With `f64_numpy`
# in the campaign they are cross-checks of numpy, run only where needed
# (docs/architecture.md, "References"); a replayed module's f64_jit is its promoted module
# (f64_text).
XLA_F64_OPTIONS = {"f64_eager": {}, "f64_jit": REFERENCE_OPTIONS, "f64_text": REFERENCE_OPTIONS}


def cross_check_reason(program_id: str, suspects: int, fallbacks: dict[str, int], every: int) -> str:
    """Why the XLA float64 references must check numpy's answer on this program, or "".

    A suspect (a target the oracle flags against numpy) is never recorded on numpy's word
    alone; an op numpy evaluated through XLA is what the XLA references see too; and a
    fixed sample of programs (by id, so a resumed campaign samples the same ones) keeps
    watching for a disagreement no target shows (every XLA configuration wrong alike)."""
    if suspects:
        return "suspect"
    if fallbacks:
        return "fallback"
    if every and zlib.crc32(program_id.encode()) % every == 0:
        return "sample"
    return ""


# The XLA float64 reference a sampled program (no suspect, no fallback) is cross-checked
# with: the program compiled whole, the one that shares a bug every XLA configuration has
# (what the sample watches for) and costs one compile. f64_eager, one compile per op and
# shape, on the sample was 5% of a 300-program campaign's CPU (bench/throughput.py); suspects
# and fallbacks, where a verdict rides on the check, still get every deferred reference.
SAMPLE_REFERENCES = ("f64_jit",)


# An XLA float64 reference further from numpy than this many times the spread of the noise
# model's samples differs by more than any rounding the program can amplify: the reference
# is wrong, not the program ill-conditioned. The samples perturb every op by its own
# precision's rounding, 5e8 (f32) to 3.5e13 (bf16) times a float64 one, in both directions
# (antithetic and directed), so a comparison or rounding step near a tie flips in them too;
# two float64 evaluations, whose roundings are that much smaller, move the output less than
# the samples do. The factor is margin for four samples underestimating the spread.
BEYOND_NOISE = 10.0


def reference_disagreement(expected: list[np.ndarray], actual: list[np.ndarray],
                           infos: list[oracle.OutputInfo],
                           spread: Callable[[int], float | None] | None = None,
                           overflow: Callable[[], list[bool] | None] | None = None,
                           ) -> tuple[tuple[Verdict, int, dict[str, Any]] | None, frozenset[int]]:
    """How an XLA float64 reference's outputs differ from numpy's float64 ones.

    Returns (verdict, ill_conditioned outputs). The verdict, (name, output, evidence), is for a
    difference float64 leaves no room for: another NaN/inf pattern (nan_mismatch; a real
    XLA:CPU bug drops NaN in long max reductions), an integer that depends on no float,
    another shape (mismatch). A normwise difference beyond oracle.REFERENCE_AGREEMENT, or
    a float-dependent integer that differs, says the program is ill-conditioned in float64
    (two correct evaluations in another order disagree), as f64_eager against f64_jit did
    on 1% of programs: no verdict on that output then. Unless `spread(i)`, the noise model's
    normwise spread on float output i, says the program cannot amplify rounding that far
    (BEYOND_NOISE): then it is a mismatch of the reference (s24-i282: f64_jit shared the
    dynamic_slice-of-dynamic_slice bug on a float output, and the program went undecided).
    Another NaN/inf pattern is ill-conditioning too where `overflow()` (the noise model's,
    evaluate.overflow_prone) marks the output: terms that add up beyond float64's range
    overflow in one order and not in another, in float64 as in any dtype (s41-i31, an f64
    conv: numpy NaN, f64_eager -inf)."""
    ill: set[int] = set()
    for i, (x, y, info) in enumerate(zip(expected, actual, infos, strict=True)):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return (Verdict.MISMATCH, i, {"reason": "reference", "actual_shape": list(y.shape),
                                            "expected_shape": list(x.shape)}), frozenset(ill)
        if info.dtype not in FLOATS:
            if np.array_equal(x, y):
                continue
            if info.tainted:
                ill.add(i)
                continue
            where = tuple(int(k) for k in np.argwhere(x != y)[0])
            return (Verdict.MISMATCH, i, {"reason": "reference", "dtype": info.dtype,
                                          "elements": int((x != y).sum()), "where": list(where),
                                          "expected": x[where].item(), "actual": y[where].item()}), frozenset(ill)
        cx, cy = oracle.nan_classes(x), oracle.nan_classes(y)
        if not np.array_equal(cx, cy):
            if overflow is not None and (prone := overflow()) and prone[i]:
                ill.add(i)
                continue
            where = tuple(int(k) for k in np.argwhere(cx != cy)[0])
            return (Verdict.NAN_MISMATCH, i, {"reason": "reference", "dtype": info.dtype,
                                              "elements": int((cx != cy).sum()), "where": list(where),
                                              "expected": float(x[where]), "actual": float(y[where])}), frozenset(ill)
        err = oracle.normwise_error(y, x, "f64")
        if err > oracle.REFERENCE_AGREEMENT:
            s = spread(i) if spread is not None else None
            if s is not None and err > BEYOND_NOISE * s:
                return (Verdict.MISMATCH, i, {"reason": "reference", "dtype": info.dtype, "normwise_error": err,
                                              "noise_spread": s}), frozenset(ill)
            ill.add(i)
    return None, frozenset(ill)


def _noise_spread(noise: NoiseModel, truth: list[np.ndarray], undetermined: list[np.ndarray] | None,
                  i: int) -> float | None:
    """The noise model's normwise spread on float output i around `truth`, as
    reference_disagreement's `spread`: asked only of an output an XLA reference is off on
    (the noise model is drawn then, once); None where a sample's NaN/inf pattern differs
    (overflow), or there are no samples."""
    samples = noise.samples()
    if not samples:
        return None
    outs = [np.asarray(oracle.without_undetermined(s, undetermined)[i]) for s in samples]
    if any(not np.array_equal(oracle.nan_classes(y), oracle.nan_classes(np.asarray(truth[i]))) for y in outs):
        return None
    return max(oracle.normwise_error(y, truth[i], "f64") for y in outs)


def literal_spread(literal: list[np.ndarray], truth: list[np.ndarray], infos: list[oracle.OutputInfo],
                   undetermined: list[np.ndarray] | None, i: int) -> float | None:
    """The spread reference_disagreement is given where there is no noise model (a
    replayed module: no graph to perturb): the normwise error on float output i of the
    op-by-op evaluation at the program's own precision (`literal`: each op compiled alone,
    calls inlined), never less than one rounding of that precision. It is one evaluation
    with every op rounded to its own dtype, 5e8 (f32) to 3.5e13 (bf16) times a float64
    rounding: a program that amplifies float64 rounding past BEYOND_NOISE times this has
    amplified its own, far larger rounding less than that, which no conditioning does
    (docs/detection.md, "A reference that shares the bug"). An op-by-op evaluation that
    shares the bug is far off too, and the spread it gives excuses the reference (no
    verdict, as before). None where its NaN/inf pattern differs from the truth's."""
    y = np.asarray(oracle.without_undetermined(literal, undetermined)[i])
    x = np.asarray(truth[i])
    if y.shape != x.shape or not np.array_equal(oracle.nan_classes(y), oracle.nan_classes(x)):
        return None
    return max(oracle.normwise_error(y, x, "f64"), UNIT_ROUNDOFF[infos[i].dtype])


def cross_check_spread(noise: NoiseModel, truth: list[np.ndarray], infos: list[oracle.OutputInfo],
                       undetermined: list[np.ndarray] | None, literal: list[np.ndarray] | None,
                       ) -> Callable[[int], float | None]:
    """reference_disagreement's `spread`: the noise model's where it has samples, else
    (no graph) the op-by-op evaluation's, `literal`, where one is given (literal_spread)."""
    def spread(i: int) -> float | None:
        if noise.samples():
            return _noise_spread(noise, truth, undetermined, i)
        return None if literal is None else literal_spread(literal, truth, infos, undetermined, i)
    return spread


# A reduce jax prints in its short form, `applies stablehlo.add`: its region is that one op.
_APPLIES = re.compile(r"\bapplies (\S+)")


def _hides_ops(op: dict[str, Any]) -> bool:
    """Whether an op of a module's info (@main) may run ops its info does not show: a call,
    a custom call, an op with regions, except a reduce whose region is one op that is not
    discrete (a sum, a max: softmax's and a norm's reduces, which flip no tie)."""
    if op["name"] in stablehlo.OPAQUE:
        return True
    if not op.get("regions"):
        return False
    body = _APPLIES.search(op.get("text", "")) if op["name"] == "stablehlo.reduce" else None
    return body is None or body.group(1) in DISCRETE_OPS


def _deciding(op: dict[str, Any]) -> list[str]:
    """The operands of a discrete op whose values may flip its choice: a select's predicate
    only (it moves its other operands unchanged; a causal mask over float scores chooses
    by integer positions), every operand of any other."""
    operands: list[str] = op["operands"]
    return operands[:1] if op["name"] == "stablehlo.select" else operands


def _xla_references_disagree(ran: dict[str, list[np.ndarray]], infos: list[oracle.OutputInfo]) -> bool:
    """Whether f64_eager and f64_jit, where both ran, disagree (oracle.references_agree)."""
    eager, jit = ran.get(Reference.F64_EAGER), ran.get(Reference.F64_JIT)
    return eager is not None and jit is not None and not oracle.references_agree(eager, jit, infos)


def _undetermined(program: Program, truth: Outcome) -> list[np.ndarray] | None:
    """The elements no rule judges: those a NaN's open sign decides (npref), and the rows
    of a template whose choice is within rounding of a tie (docs/detection.md, s31-i184)."""
    near_ties = oracle.near_tie_undetermined(program.graph, program.inputs) if program.graph is not None else None
    return oracle.either_undetermined(truth.undetermined, near_ties)


def _with_outputs_undetermined(truth: list[np.ndarray], undetermined: list[np.ndarray] | None,
                               outputs: set[int]) -> list[np.ndarray]:
    """`undetermined` with every element of `outputs` added (they are left without a truth)."""
    return [np.ones(np.shape(x), bool) if i in outputs
            else (undetermined[i] if undetermined else np.zeros(np.shape(x), bool))
            for i, x in enumerate(truth)]


def module_output_infos(info: dict[str, Any], floats_inside: bool, bitwise: bool = True) -> list[oracle.OutputInfo]:
    """Per output of a module without a graph (module info with op tags: the program
    worker's Info reply), what the generator's graph says of a generated one: its dtype,
    whether it depends on a float (core/stablehlo.float_dependent), and whether IEEE 754
    fixes it bitwise (ops/exact.node_state over @main's ops, as the bisector applies it to
    a cut). An op with regions or a call is bitwise only in a module that holds no float:
    its body is not in the info. `bitwise` False (subnormal inputs) marks none bitwise."""
    tainted = stablehlo.float_dependent(info, floats_inside)
    dtypes = {a["vid"]: a["dtype"] for a in info["args"]}
    states: dict[str, exact.State] = {}
    for op in info["ops"]:
        tags = frozenset(op.get("tags", ()))
        args = [states.get(v, exact.State()) for v in op["operands"]]
        arg_dtypes = [str(dtypes.get(v)) for v in op["operands"]]
        opaque = bool(op.get("regions")) or op["name"] in stablehlo.OPAQUE
        # Of the ops with several results only those that select (a barrier) pass their
        # operands through one to one.
        several = len(op["results"]) > 1 and tags != frozenset({"selects"})
        for r in op["results"]:
            dtypes[r["vid"]] = r["dtype"]
            unknown = r["dtype"] is None or (opaque and floats_inside) or several
            states[r["vid"]] = exact.NOT_BITWISE if unknown else exact.node_state(
                tags, str(r["dtype"]), arg_dtypes, args, convert=op["name"] == "stablehlo.convert")
    return [oracle.OutputInfo(str(dtypes[v]), tainted.get(v, True),
                              bitwise and dtypes[v] is not None and states.get(v, exact.State()).ok)
            for v in info["returns"]]


def _xla_f64_request(kind: str, program: Program) -> Request[Outputs]:
    """The request for a deferred XLA float64 reference (f64_text for a replayed module)."""
    if kind == "f64_text":
        return ModuleReference("f64_text", program.module, program.inputs)
    assert program.graph is not None
    return GraphReference(kind, program.graph, program.inputs)  # type: ignore[arg-type]


def program_invariants(program: Program, info: dict[str, Any] | None) -> list[invariants.Invariant]:
    """What a program's outputs must satisfy (docs/detection.md, "Invariants"): a generated
    program's templates declare it, a replayed module's dataflow shows it, and a trace may
    declare more in meta.json. A malformed declaration never gets here: the trace is refused
    where it is read (campaign/sources.py, invariants.for_module); InvariantError if one does."""
    if program.graph is not None:
        found = invariants.declared(program.graph)
    else:
        found = recognized(info) if info is not None else []
    return found + invariants.from_provenance(program.provenance)


@dataclass(frozen=True)
class _InvariantCheck:
    """What each configuration's invariants are checked with (invariant_violations' arguments)."""

    results: dict[str, list[np.ndarray]]
    ref64: list[np.ndarray]
    infos: list[oracle.OutputInfo]
    inputs: Sequence[np.ndarray]
    literal: str
    noise: Callable[[], Samples | None]
    overflow: Callable[[], list[bool] | None]
    undetermined: list[np.ndarray] | None

    def _beside_literal(self) -> Samples | None:
        """The noise model's samples and the literal evaluation's outputs beside them."""
        lit = self.results.get(self.literal)
        return [*(self.noise() or []), lit] if lit is not None else self.noise()

    def _excused(self, name: str, i: int, shape: tuple[int, ...]) -> np.ndarray:
        """The elements of output i that no invariant judges in configuration `name`."""
        excused = np.zeros(shape, bool)
        if self.undetermined is not None and np.shape(self.undetermined[i]) == shape:
            excused |= self.undetermined[i]
        lit = self.results.get(self.literal)
        if lit is not None and name != self.literal and np.shape(lit[i]) == shape:
            excused |= ~np.isfinite(np.asarray(lit[i], np.float64))
        return excused

    def miss(self, name: str, inv: invariants.Invariant) -> invariants.Violation | None:
        """How configuration `name` misses `inv`, or None."""
        outs, i, is_literal = self.results[name], inv.output, name == self.literal
        if i >= len(self.infos) or i >= len(outs) or self.infos[i].dtype not in FLOATS:
            return None
        if inv.kind == "finite" and is_literal:
            return None
        v = invariants.check(inv, outs, self.ref64, self.infos[i].dtype, inputs=self.inputs,
                             noise=self.noise if is_literal else self._beside_literal,
                             excused=self._excused(name, i, np.shape(outs[i])))
        if v is None or (inv.kind == "finite" and (prone := self.overflow()) and prone[i]):
            return None
        return None if is_literal and self.noise() is None else v


def invariant_violations(declared: Sequence[invariants.Invariant], results: dict[str, list[np.ndarray]],
                         ref64: list[np.ndarray], infos: list[oracle.OutputInfo], inputs: Sequence[np.ndarray],
                         literal: str, noise: Callable[[], Samples | None],
                         overflow: Callable[[], list[bool] | None],
                         undetermined: list[np.ndarray] | None = None) -> dict[str, tuple[int, dict[str, Any]]]:
    """Per configuration (targets and own-precision references) that misses an invariant,
    (output, evidence) of the first one it misses, the others it misses in `also_missed`. Non-finite values that the literal
    evaluation also gives, or in an output that may overflow legally (evaluate.overflow_prone),
    are what the program's own precision says: the `finite` rule passes over them, and
    over the literal evaluation itself. So is a miss the literal evaluation makes too: its
    outputs widen the other configurations' bounds as a noise sample does (a layer norm of
    rows whose mean is large against their spread misses `normalized` by the rounding of
    the mean, which no bound on the outputs alone sees). The literal evaluation itself is
    judged against the noise model's samples; a program without them (a replayed module)
    has nothing to judge it by."""
    check = _InvariantCheck(results, ref64, infos, inputs, literal, noise, overflow, undetermined)
    broken: dict[str, tuple[int, dict[str, Any]]] = {}
    for name in results:
        for inv in declared:
            v = check.miss(name, inv)
            if v is None:
                continue
            if name in broken:
                # The first one missed is the verdict's; the others are named beside it.
                broken[name][1]["also_missed"].append({"invariant": inv.kind, "output": inv.output, "count": v.count})
            else:
                broken[name] = (inv.output, {**v.evidence(), "dtype": infos[inv.output].dtype, "also_missed": []})
    return broken


R = TypeVar("R", bound=Reply)


def _outcome(reply: Reply) -> Outcome:
    """What one configuration's reply says, as an Outcome."""
    match reply:
        case Ran():
            return Outcome(outputs=reply.outputs, compile_s=reply.compile_s, hlo=reply.hlo,
                           busy_s=reply.busy_s, buffers=reply.buffers, anomalies=reply.anomalies)
        case NoiseSamples():
            return Outcome(outputs=reply.outputs, samples=reply.samples, overflow=reply.overflow,
                           busy_s=reply.busy_s)
        case Outputs():
            return Outcome(outputs=reply.outputs, skipped=reply.skipped, busy_s=reply.busy_s,
                           fallbacks=reply.fallbacks, undetermined=reply.undetermined)
    raise TypeError(f"no outcome in a {type(reply).__name__} reply")


def buffer_verdict(t: Target, o: Outcome) -> TargetVerdict:
    """The verdict of a run whose buffer checks found problems: the first of
    model.BUFFER_VERDICTS among them, with every problem as evidence."""
    found = {p["verdict"] for p in o.buffers}
    verdict = next(v for v in BUFFER_VERDICTS if v.value in found)
    first = next(p for p in o.buffers if p["verdict"] == verdict.value)
    return TargetVerdict(t, verdict, {"reason": "buffers", "buffer": first.get("buffer"),
                                      "buffers": o.buffers}, actual=o.outputs)


def add_compile_anomalies(targets: Sequence[Target], outcomes: dict[str, Outcome], result: Assessment) -> None:
    """A target whose compile logged an anomaly (core/anomalies.py) gets compile_anomaly
    when it has no other verdict; any other verdict of it wins and carries the anomaly in
    its evidence. Only targets: no reference's run reports what XLA logged."""
    for t in targets:
        found = outcomes[t.name].anomalies
        if not found:
            continue
        evidence = anomaly_evidence(found)
        own = [v for v in result.verdicts if v.target.name == t.name]
        for v in own:
            v.evidence.update(anomaly=evidence["anomaly"], anomaly_log=evidence["log"])
        if not own:
            result.verdicts.append(TargetVerdict(t, Verdict.COMPILE_ANOMALY, evidence,
                                                 actual=outcomes[t.name].outputs))


class HarnessError(RuntimeError):
    """A target's run failed in this project's code, not in XLA's."""


class Stopped(Exception):
    """The campaign is stopping: abandon the program in flight (it is redone on resume)."""


@dataclass
class Outcome:
    """What happened to one program under one configuration."""

    outputs: list[np.ndarray] | None = None
    verdict: Verdict | None = None  # crash, hang, compile_error when outputs is None
    error: str = ""
    # An injected plugin raised (plugins.PluginError): no verdict on XLA, and the program's
    # status is plugin_error.
    plugin_failed: bool = False
    compile_s: float = 0.0
    hlo: str | None = None
    skipped: str = ""  # a reference that does not apply to this program
    busy_s: float = 0.0
    samples: list[list[np.ndarray]] | None = None  # the noise model's samples
    overflow: list[bool] | None = None  # per output: may overflow legally (noise request)
    fallbacks: dict[str, int] = field(default_factory=dict)  # f64_numpy: ops evaluated by XLA
    undetermined: list[np.ndarray] | None = None  # f64_numpy: elements no rule judges (oracle.without_undetermined)
    buffers: list[dict[str, Any]] = field(default_factory=list)  # a target's buffer problems (xla/buffers.py)
    anomalies: list[AnomalyLine] = field(default_factory=list)  # what XLA logged in a target's compile


@dataclass
class TargetVerdict:
    """One target's judged outcome on a program, with the evidence and the output it concerns."""

    target: Target
    verdict: Verdict
    evidence: dict[str, Any]
    output: int | None = None
    actual: list[np.ndarray] | None = None


@dataclass
class Assessment:
    status: ProgramStatus
    executions: int
    verdicts: list[TargetVerdict] = field(default_factory=list)
    expected: list[np.ndarray] | None = None
    compile_s: dict[str, float] = field(default_factory=dict)
    worker_s: float = 0.0  # time the worker processes spent on this program
    # The first target's optimized HLO (coverage), and each passing target's largest
    # error/threshold ratio (near misses steer guided generation).
    hlo: str | None = None
    margins: dict[str, float] = field(default_factory=dict)
    # The numpy reference's ops evaluated by XLA, and why the XLA float64 references ran
    # as its cross-check ("" when they did not; numpy_failed when they stood in for it).
    reference_fallbacks: dict[str, int] = field(default_factory=dict)
    cross_check: str = ""
    eager_xla_ops: dict[str, int] = field(default_factory=dict)  # `eager`'s ops not in numpy
    # Outputs the references disagree on (ill-conditioned in float64): judged in no target.
    undecided_outputs: list[int] = field(default_factory=list)


# The float64 references that can be the truth, the first present taken: numpy's, else an
# XLA one (f64_text: a replayed module's promoted module).
TRUTHS = (Reference.F64_NUMPY, Reference.F64_EAGER, Reference.F64_JIT, "f64_text")


@dataclass
class Judging:
    """One program being judged once its float64 truth is in: what Assessor.assess's steps
    share. `results` holds every configuration with numbers to judge (targets and
    own-precision references); `noise` is the program's one noise model, which every
    invariant, judgement and cross-check draws from."""

    slot: Slot
    program: Program
    result: Assessment
    info: dict[str, Any] | None  # a replayed module's info, calls inlined (Assessor._dataflow)
    infos: list[oracle.OutputInfo]
    truth: list[np.ndarray]
    numpy: Outcome | None  # f64_numpy's outcome, which the XLA float64 references cross-check
    results: dict[str, list[np.ndarray]]
    literal: str  # the op-by-op evaluation at the program's own precision
    discrete: bool
    noise: NoiseModel
    k_overrides: dict[str, float]
    # Elements no rule judges (oracle.without_undetermined); the cross-check adds the
    # outputs it leaves without a truth.
    undetermined: list[np.ndarray] | None = None

    def case(self, target: str) -> oracle.Case:
        """What the oracle judges configuration `target` with."""
        return oracle.Case(target, self.results, self.truth, self.infos, self.noise, self.discrete,
                           self.k_overrides, self.literal, undetermined=self.undetermined)


def device_owners(targets: Sequence[Target], plugins: Sequence[str], logs: Path | None,
                  exclusive: frozenset[str] | None = None) -> dict[str, DeviceOwner]:
    """One worker per accelerator platform of `targets`, to be shared by every slot
    (worker/devices.py: one process per host owns each accelerator); none for the CPU.
    SpecError when two targets of one platform need different interpreters: both would
    have to open the device."""
    owners: dict[str, DeviceOwner] = {}
    pythons: dict[str, Target] = {}
    for t in targets:
        if devices.process_kind(t.platform, exclusive) != "device_owner":
            continue
        first = pythons.setdefault(t.platform, t)
        if first.python != t.python:
            raise SpecError(f"targets {first.name!r} and {t.name!r}: one process per host owns the "
                            f"{t.platform} devices, and they need different interpreters "
                            f"({first.python or 'this one'}, {t.python or 'this one'}); run them in "
                            "separate campaigns")
        if t.platform not in owners:
            owners[t.platform] = DeviceOwner(f"owner-{t.platform}", tuple(plugins),
                                             logs / f"owner-{t.platform}.log" if logs else None,
                                             t.python, t.platform)
    return owners


class Slot:
    """One lane of the campaign: a program worker (generation and references), the
    interpreter's if asked, and each target's worker: its own for a CPU target, the
    platform's shared DeviceOwner for an accelerator's (`owners`, device_owners; a slot
    given none makes its own, as `check` does with its one slot)."""

    def __init__(self, n: int | str, targets: Sequence[Target], plugins: Sequence[str],
                 logs: Path | None, interpreter: bool = False,
                 owners: dict[str, DeviceOwner] | None = None) -> None:
        def log(name: str) -> Path | None:
            return logs / f"slot{n}-{name}.log" if logs else None
        self.programs = Worker(f"slot{n}-programs", (), log("programs"))
        # The reference interpreter can abort its process: it gets one of its own.
        self.interpreter = Worker(f"slot{n}-interpreter", (), log("interpreter")) if interpreter else None
        self.owners = device_owners(targets, plugins, logs) if owners is None else owners
        # A target of another jaxlib runs under its environment's interpreter.
        self.targets: dict[str, Worker] = {
            t.name: self.owners[t.platform] if t.platform in self.owners
            else Worker(f"slot{n}-{t.name}", tuple(plugins), log(t.name), t.python, t.platform)
            for t in targets}
        # What each such worker runs (WhichVersions), asked once: the StableHLO version its
        # programs are serialized at, the jaxlib its verdicts are judged across.
        self.versions: dict[str, VersionInfo] = {}

    def workers(self) -> list[Worker]:
        """This slot's workers, each once (a device owner serves several targets)."""
        return distinct([self.programs, *([self.interpreter] if self.interpreter else []),
                         *self.targets.values()])

    def close(self) -> None:
        for w in self.workers():
            w.close()


class Assessor:
    def __init__(self, targets: Sequence[Target], references: Sequence[str], timeout: float,
                 k_overrides: dict[str, float] | None = None,
                 stop: threading.Event | None = None, cross_check_every: int = 20) -> None:
        self.targets = list(targets)
        self.references = list(references)
        self.cross_check_every = cross_check_every
        # With numpy as the float64 truth, the XLA float64 references wait for a reason.
        self.deferred = [k for k in XLA_F64_REFERENCES if k in self.references] \
            if Reference.F64_NUMPY in self.references else []
        self.timeout = timeout
        self.k_overrides = k_overrides or {}
        self.stop = stop or threading.Event()

    def call(self, worker: Worker, request: Request[Any]) -> Outcome:
        if self.stop.is_set():
            # Stopping: the slot's workers are being closed, and a call would start a new
            # one that nothing closes.
            raise Stopped
        started = time.perf_counter()
        try:
            reply = worker.call(request, self.timeout)
        except (WorkerDied, WorkerHung) as e:
            if self.stop.is_set():
                raise Stopped from None  # we killed it ourselves: not a finding
            spent = time.perf_counter() - started
            if isinstance(e, WorkerHung):
                return Outcome(verdict=Verdict.HANG, error=str(e), busy_s=spent)
            return Outcome(verdict=Verdict.CRASH, error=f"{e}\n{e.log_tail[-2000:]}", busy_s=spent)
        except RequestFailed as e:
            if e.error.startswith("NotPortable:"):
                # The module does not cross to that jaxlib (portable.py): no verdict on it.
                return Outcome(skipped=e.error, busy_s=e.busy_s)
            if e.error.startswith("PluginError:"):
                return Outcome(error=e.error, busy_s=e.busy_s, plugin_failed=True)
            return Outcome(verdict=Verdict.COMPILE_ERROR, error=e.error, busy_s=e.busy_s)
        return _outcome(reply)

    def _references(self, slot: Slot, program: Program) -> dict[str, Outcome]:
        refs = {}
        # An SPMD program is also run unsharded on one device: the pair tells a
        # partitioning bug from one the program shows anyway (runners/xla_sentinel/programs/spmd.py).
        sharded = program.graph is not None and program.graph.sharding is not None
        for kind in [*self.references, *(["unsharded"] if sharded else [])]:
            if kind == "interpreter":
                assert slot.interpreter is not None
                o = self.call(slot.interpreter, ModuleReference("interpreter", program.module,
                                                                program.inputs))
                # The interpreter is an extra opinion: a module it cannot take (or that
                # kills it) is judged by the other references alone.
                if o.outputs is not None:
                    refs[kind] = o
                continue
            if kind == Reference.F64_NUMPY:
                refs[kind] = self.call(slot.programs, NumpyReference(program.module, program.inputs,
                                                                     program.graph))
                continue
            if kind in self.deferred:
                continue
            if program.graph is None:
                # A replayed module has no graph: its float64 reference is the module with
                # float types promoted, and its op-by-op reference the module's ops each
                # compiled alone (worker/bisect_handlers.op_by_op), both in the reference process.
                # f64_eager is the promoted module too: without a graph there are no ops to
                # run one by one in float64, and a campaign naming only f64_eager of the
                # float64 references still has one (it was reference_failed, no evidence).
                text_kind = {"f64_jit": "f64_text", "f64_eager": "f64_text",
                             "eager": "eager_module"}.get(kind)
                if text_kind and text_kind not in refs:
                    refs[text_kind] = self.call(slot.programs, ModuleReference(
                        text_kind, program.module, program.inputs))  # type: ignore[arg-type]
                continue
            refs[kind] = self.call(slot.programs, GraphReference(
                kind, program.graph, program.inputs))  # type: ignore[arg-type]
        return refs

    def _xla_f64(self, slot: Slot, program: Program, sample: bool = False) -> dict[str, Outcome]:
        """The deferred XLA float64 references of a program, run now; for the sample,
        SAMPLE_REFERENCES of them."""
        if program.graph is None:
            kinds = ["f64_text"] if "f64_jit" in self.deferred else []
        else:
            kinds = list(self.deferred)
            if sample:
                kinds = [k for k in kinds if k in SAMPLE_REFERENCES] or kinds[:1]
        return {k: self.call(slot.programs, _xla_f64_request(k, program)) for k in kinds}

    def _cross_check(self, judging: Judging, sample: bool = False) -> set[int]:
        """Compare numpy's float64 answer with the XLA float64 references. A reference
        that disagrees where float64 leaves no room is a finding against that reference
        (XLA's own path, evidence `reason: reference`); returns the outputs that are
        ill-conditioned in float64, which leave no truth to judge the targets by there. A
        reference that fails to run checks nothing."""
        ill_outputs: set[int] = set()
        result, undetermined = judging.result, judging.undetermined
        truth = oracle.without_undetermined(judging.truth, undetermined)
        # Only a replayed module (no graph, so no noise samples) gets the op-by-op spread; a
        # discrete one does not: its op-by-op evaluation may flip a tie the float64 ones do
        # not, and one evaluation shows no spread there, the noise model's samples do.
        replayed = judging.program.graph is None and not judging.discrete
        literal = judging.results.get(judging.literal) if replayed else None
        spread = cross_check_spread(judging.noise, truth, judging.infos, undetermined, literal)
        for kind, o in self._xla_f64(judging.slot, judging.program, sample).items():
            result.executions += 1
            result.worker_s += o.busy_s
            if o.outputs is None:
                continue
            verdict, ill = reference_disagreement(truth, oracle.without_undetermined(o.outputs, undetermined),
                                                  judging.infos, spread, judging.noise.overflow)
            ill_outputs |= ill
            if verdict is not None:
                name, output, ev = verdict
                ev["against"] = Reference.F64_NUMPY.value
                result.verdicts.append(TargetVerdict(Target(kind, dict(XLA_F64_OPTIONS[kind])), name, ev,
                                               output, o.outputs))
        return ill_outputs

    def _module_info(self, slot: Slot, program: Program) -> dict[str, Any] | None:
        """A replayed module's info (@main's ops with their tags, parsed by MLIR in the
        program worker), None for a generated program or a module MLIR cannot take."""
        if program.graph is not None:
            return None
        try:
            return self.ask(slot.programs, Info(program.module)).info
        except RequestFailed:
            return None

    def _infos(self, program: Program, info: dict[str, Any] | None) -> list[oracle.OutputInfo]:
        bitwise = not oracle.has_subnormals(program.inputs)
        if program.graph is not None:
            vals = program.graph.values
            return [oracle.OutputInfo(vals[i].dtype, vals[i].tainted, bitwise and bool(vals[i].bitwise))
                    for i in program.graph.outputs]
        # A replayed module has no graph: its own dataflow (StableHLO) says which outputs
        # depend on a float. Taken as all tainted, a wrong integer that every configuration
        # shares passed (an all-s32 dynamic_slice of a dynamic_slice, judged pass, margin 0).
        if info is None:
            return [oracle.OutputInfo(d, True) for d in result_dtypes(program.module)]
        return module_output_infos(info, stablehlo.holds_floats(program.module), bitwise)

    def _discrete(self, slot: Slot, program: Program, info: dict[str, Any] | None) -> bool:
        """A generated program is discrete by its graph's ops, a replayed module by the
        StableHLO ops it holds (rules.py, in the program worker): by those of @main that
        read a float-dependent value where its info has no region or call (an integer
        compare flips no tie; the clamps of a dynamic_slice's start are such compares),
        else by any op anywhere in its text. `info` has its calls inlined (_dataflow: a
        jitted helper is a func.call in @main; judged by its text, its integer clamps made
        the module discrete, and the cross-check's op-by-op spread was refused)."""
        if program.graph is not None:
            return any(n.discrete for n in program.graph.nodes)
        if info is not None and not any(_hides_ops(op) for op in info["ops"]):
            tainted = stablehlo.float_dependent(info, stablehlo.holds_floats(program.module))
            return any(op.get("discrete") and any(tainted.get(v, True) for v in _deciding(op))
                       for op in info["ops"])
        return self.ask(slot.programs, ClassifyModule(program.module)).discrete

    def _dataflow(self, slot: Slot, program: Program, info: dict[str, Any] | None) -> dict[str, Any] | None:
        """A replayed module's info with every call of @main inlined (the program worker's
        Region at @main, then Info): what its discreteness and its recognized invariants
        are read from. jax puts a jitted helper behind a func.call, and a softmax there was
        no invariant of the module (a corpus trace's finding was a nan_mismatch, bisected
        to the wrong op). `info` itself where @main calls nothing or MLIR cannot inline."""
        if info is None or not any(op["name"] == "func.call" for op in info["ops"]):
            return info
        try:
            text = self.ask(slot.programs, Region(program.module, [], [])).info["module"]
            inlined: dict[str, Any] = self.ask(slot.programs, Info(text)).info
            return inlined
        except RequestFailed:
            return info

    def ask(self, worker: Worker, request: Request[R]) -> R:
        """A request that must succeed (no verdict rides on it)."""
        if self.stop.is_set():
            raise Stopped
        try:
            return worker.call(request, self.timeout)
        except (WorkerDied, WorkerHung):
            if self.stop.is_set():
                raise Stopped from None
            raise

    def _draw_noise(self, slot: Slot, program: Program, result: Assessment) -> NoiseDraw:
        """The noise model's one draw for a program (NoiseModel), counted as an execution."""
        if program.graph is None:
            o = Outcome(skipped="no graph to perturb")
        else:
            o = self.call(slot.programs, Noise(program.graph, program.inputs, seed=7))
        result.executions += 1
        result.worker_s += o.busy_s
        return NoiseDraw(o.samples or None, o.overflow)

    def _screen(self, judging: Judging, t: Target, j: oracle.Judgement) -> TargetVerdict:
        """Re-run a failing target: if a fresh compile disagrees bitwise, it is nondeterministic."""
        # The worker compiles twice (repeat), as a bisection check does; the fresh compile
        # is judged against the first run's outputs.
        o = self._run(judging.slot, t, judging.program, repeat=True)
        judging.result.executions += 1
        judging.result.worker_s += o.busy_s
        first = judging.results[t.name]
        verdict, ev = j.verdict, dict(j.evidence)
        if o.outputs is None:
            ev["recheck_error"] = o.error
        elif not all(np.array_equal(a, b, equal_nan=True) for a, b in zip(first, o.outputs, strict=True)):
            ev["judged_as"] = j.verdict
            verdict = Verdict.NONDETERMINISTIC
        return TargetVerdict(t, verdict, ev, j.output, first)

    def version_of(self, slot: Slot, t: Target) -> VersionInfo:
        """What the worker of a target of another jaxlib runs (asked once per slot)."""
        if t.name not in slot.versions:
            slot.versions[t.name] = self.ask(slot.targets[t.name], WhichVersions())
        return slot.versions[t.name]

    def _module(self, slot: Slot, t: Target, program: Program) -> str | bytes | Outcome:
        """The module as target t takes it: the text, or for a target of another jaxlib a
        portable artifact at the StableHLO version that jaxlib reads (docs/versions.md),
        made by the program worker. A module that does not cross is an Outcome skipped
        there (no verdict); a worker that cannot start under its interpreter, a crash."""
        if t.python is None:
            return program.module
        try:
            info = self.version_of(slot, t)
        except (WorkerDied, WorkerHung) as e:
            return Outcome(verdict=Verdict.CRASH, error=f"{t.python}: the worker did not start: {e}")
        try:
            return self.ask(slot.programs, ToPortable(program.module, info.stablehlo_current)).data
        except RequestFailed as e:
            return Outcome(skipped=e.error, busy_s=e.busy_s)

    def _run(self, slot: Slot, t: Target, program: Program, want_hlo: bool = False,
             repeat: bool = False) -> Outcome:
        module = self._module(slot, t, program)
        if isinstance(module, Outcome):
            return module
        # The optimized HLO (coverage, bisection) is the current jaxlib's alone.
        outcome = self.call(slot.targets[t.name], Run(module, program.inputs, t.options,
                                                      want_hlo=want_hlo and t.python is None,
                                                      repeat=repeat, platform=t.platform))
        if outcome.verdict is Verdict.COMPILE_ERROR and not targets.xla_failure(outcome.error):
            # Our code raised, not XLA (s31-i61: numpy could not place a shard): no
            # verdict on XLA; the program is a harness error (scheduling.py).
            raise HarnessError(f"target {t.name}: {outcome.error}")
        return outcome

    def _version_peers(self, slot: Slot, t: Target, passed: set[str]) -> list[oracle.VersionPeer]:
        """The targets of other jaxlibs in t's configuration, and whether each passed."""
        return [oracle.VersionPeer(u.name, u.jaxlib or self.version_of(slot, u).jaxlib, u.name in passed)
                for u in self.targets
                if u.python is not None and u.options == t.options and u.platform == t.platform]

    def assess(self, slot: Slot, program: Program) -> Assessment:
        """Run `program` under every target and reference and judge each target, in named
        steps; then the compile anomalies XLA logged, whatever the judging found."""
        with stage("targets"):
            outcomes = self._run_targets(slot, program)
        if any(o.plugin_failed for o in outcomes.values()):
            return Assessment(ProgramStatus.PLUGIN_ERROR, len(outcomes),
                              worker_s=sum(o.busy_s for o in outcomes.values()))
        with stage("references"):
            refs = self._references(slot, program)
        result = self._assessment(outcomes, refs)
        self._judge(slot, program, outcomes, refs, result)
        add_compile_anomalies(self.targets, outcomes, result)
        return result

    def _judge(self, slot: Slot, program: Program, outcomes: dict[str, Outcome], refs: dict[str, Outcome],
               result: Assessment) -> None:
        """The judging steps; a step that leaves nothing to judge ends them with the
        assessment's status."""
        with stage("truth"):
            judging = self._judging(slot, program, outcomes, refs, result)
        if judging is None:
            return
        with stage("invariants"):
            broken = self._invariants(judging)
        with stage("oracle"):
            judged = self._judge_targets(judging, broken)
        with stage("cross_check"):
            suspects = self._cross_checked(judging, judged)
        if suspects is None:
            return
        with stage("suspects"):
            self._record_suspects(judging, suspects, set(broken))
        # The targets first, in the campaign's order, then the XLA float64 references: one
        # bug that several configurations show is recorded as one signature, signed by the
        # first of them (campaign/recording.py), the same one in every program.
        order = {t.name: n for n, t in enumerate(self.targets)}
        result.verdicts.sort(key=lambda v: order.get(v.target.name, len(order)))

    def _run_targets(self, slot: Slot, program: Program) -> dict[str, Outcome]:
        """Each target's outcome; the first target's comes with its optimized HLO (coverage)."""
        return {t.name: self._run(slot, t, program, want_hlo=i == 0) for i, t in enumerate(self.targets)}

    def _assessment(self, outcomes: dict[str, Outcome], refs: dict[str, Outcome]) -> Assessment:
        """The assessment of a program that ran, with the verdicts of the targets whose run
        itself is one: a crash, hang or compile error, or buffer corruption, whatever the
        numbers (docs/detection.md, "Buffer corruption"): such a run is judged no further."""
        result = Assessment(ProgramStatus.JUDGED, len(outcomes) + len(refs),
                            compile_s={n: o.compile_s for n, o in outcomes.items()},
                            hlo=outcomes[self.targets[0].name].hlo,
                            worker_s=sum(o.busy_s for o in [*outcomes.values(), *refs.values()]))
        for t in self.targets:
            o = outcomes[t.name]
            if o.verdict is not None:
                result.verdicts.append(TargetVerdict(t, o.verdict, {"error": o.error}))
            elif o.buffers:
                result.verdicts.append(buffer_verdict(t, o))
        result.eager_xla_ops = dict(refs["eager"].fallbacks) if "eager" in refs else {}
        return result

    def _truth(self, slot: Slot, program: Program, refs: dict[str, Outcome], result: Assessment) -> Outcome | None:
        """The float64 truth (TRUTHS). A module numpy cannot take at all has the XLA float64
        references, run now in its place, as the truth again."""
        numpy_ref = refs.get(Reference.F64_NUMPY)
        if numpy_ref is not None:
            result.reference_fallbacks = dict(numpy_ref.fallbacks)
            if numpy_ref.outputs is None:
                result.cross_check = "numpy_failed"
                del refs[Reference.F64_NUMPY]
                for kind, o in self._xla_f64(slot, program).items():
                    refs[kind] = o
                    result.executions += 1
                    result.worker_s += o.busy_s
        return next((refs[k] for k in TRUTHS if k in refs), None)

    def _judging(self, slot: Slot, program: Program, outcomes: dict[str, Outcome], refs: dict[str, Outcome],
                 result: Assessment) -> Judging | None:
        """What the targets are judged with; None where the references leave no truth
        (reference_failed, references_disagree: the assessment's status)."""
        truth = self._truth(slot, program, refs, result)
        info = self._module_info(slot, program)
        infos = self._infos(program, info)
        ran = {k: o.outputs for k, o in refs.items() if o.outputs is not None}
        if truth is None or truth.outputs is None or len(ran) < len(refs):
            result.status = ProgramStatus.REFERENCE_FAILED
            return None
        if _xla_references_disagree(ran, infos):
            result.status = ProgramStatus.REFERENCES_DISAGREE
            return None
        result.expected = truth.outputs
        results = {n: o.outputs for n, o in outcomes.items() if o.outputs is not None and not o.buffers}
        results.update({k: ran[k] for k in OWN_PRECISION_REFERENCES if k in ran})
        flow = self._dataflow(slot, program, info)
        return Judging(slot, program, result, flow, infos, truth.outputs, refs.get(Reference.F64_NUMPY), results,
                       # A replayed module's op-by-op evaluation is its ops each compiled alone.
                       literal="eager" if program.graph is not None else "eager_module",
                       discrete=self._discrete(slot, program, flow),
                       noise=NoiseModel(partial(self._draw_noise, slot, program, result)),
                       k_overrides=self.k_overrides, undetermined=_undetermined(program, truth))

    def _invariants(self, judging: Judging) -> dict[str, tuple[int, dict[str, Any]]]:
        """Invariants first (docs/detection.md, "Invariants"), on every configuration's
        outputs: the configurations that miss one, with (output, evidence). An own-precision
        reference that does is a finding against it, recorded here."""
        broken = invariant_violations(
            program_invariants(judging.program, judging.info), judging.results, judging.truth, judging.infos,
            judging.program.inputs, judging.literal, judging.noise.samples, judging.noise.overflow,
            judging.undetermined)
        for name, (i, ev) in broken.items():
            if name in OWN_PRECISION_REFERENCES:
                judging.result.verdicts.append(TargetVerdict(Target(name, {}), Verdict.INVARIANT_VIOLATED, ev, i,
                                                             judging.results[name]))
        return broken

    def _judge_targets(self, judging: Judging, broken: dict[str, tuple[int, dict[str, Any]]],
                       ) -> list[tuple[Target, oracle.Judgement]]:
        """The targets with numbers to judge, through the oracle: the suspects (those it does
        not pass), each with its judgement. A target that missed an invariant is judged no
        further: its screened verdict is recorded here."""
        suspects = []
        for t in self.targets:
            if t.name not in judging.results:
                continue
            if t.name in broken:
                i, ev = broken[t.name]
                judging.result.verdicts.append(
                    self._screen(judging, t, oracle.Judgement(Verdict.INVARIANT_VIOLATED, i, ev)))
                continue
            j = oracle.judge_case(judging.case(t.name))
            if j.verdict == Verdict.PASS:
                judging.result.margins[t.name] = j.evidence.get("margin", 0.0)
            else:
                suspects.append((t, j))
        return suspects

    def _cross_checked(self, judging: Judging, suspects: list[tuple[Target, oracle.Judgement]],
                       ) -> list[tuple[Target, oracle.Judgement]] | None:
        """The suspects that stand once the XLA float64 references have checked numpy's
        answer where they must (cross_check_reason); None where they leave no output with
        a truth (references_disagree)."""
        numpy_ref, result = judging.numpy, judging.result
        if numpy_ref is None or not self.deferred:
            return suspects
        result.cross_check = cross_check_reason(judging.program.id, len(suspects), numpy_ref.fallbacks,
                                                self.cross_check_every)
        ill = self._cross_check(judging, sample=result.cross_check == "sample") if result.cross_check else set()
        if not ill:
            return suspects
        if len(ill) == len(judging.infos):
            result.status = ProgramStatus.REFERENCES_DISAGREE
            return None
        # Only these outputs are left without a truth: the others are still judged. One
        # output's subnormal inputs (read as zero by f64_eager, kept by numpy) sent whole
        # programs undecided, with another output's real bug in them.
        result.undecided_outputs = sorted(ill)
        judging.undetermined = _with_outputs_undetermined(judging.truth, judging.undetermined, ill)
        return [(t, j) for t, _ in suspects
                if (j := oracle.judge_case(judging.case(t.name))).verdict != Verdict.PASS]

    def _record_suspects(self, judging: Judging, suspects: list[tuple[Target, oracle.Judgement]],
                         broken: set[str]) -> None:
        """Each suspect's verdict, screened for nondeterminism and, for a current-jaxlib
        target, seen across versions (oracle.version_regression)."""
        flagged = broken | {t.name for t, _ in suspects}
        passed = {n for n in judging.results if n not in flagged}
        for t, j in suspects:
            v = self._screen(judging, t, j)
            if t.python is None:
                v.verdict, v.evidence = oracle.version_regression(
                    v.verdict, v.evidence, current_jaxlib(), self._version_peers(judging.slot, t, passed))
            judging.result.verdicts.append(v)
