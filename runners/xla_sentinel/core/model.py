"""The domain records every part shares: a Verdict, a Finding and a Signature, each once.

The store's columns, finding.json, the summary's signature list and `triage` derive their
field lists from these classes (docs/architecture.md). The bottom layer: no imports from
the rest of xla_sentinel, no jax.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal


class Verdict(StrEnum):
    """The oracle's judgement of one target on one program. A StrEnum: it is stored, sent
    to the operator and written to JSON as its plain value."""

    PASS = "pass"
    MISMATCH = "mismatch"
    NAN_MISMATCH = "nan_mismatch"
    CRASH = "crash"
    HANG = "hang"
    COMPILE_ERROR = "compile_error"
    NONDETERMINISTIC = "nondeterministic"
    # An older jaxlib target right against float64 where the current one is wrong
    # (docs/versions.md): judged across Target.jaxlib versions, bisected over releases.
    VERSION_REGRESSION = "version_regression"
    # Buffer corruption (docs/detection.md, "Buffer corruption"), seen by the target's worker
    # around the execution itself (xla/buffers.py), whatever the numbers: a non-donated
    # input that is not bit-identical after the run, a live result of an earlier execution
    # in the same process that changed, donated inputs that give other outputs than the
    # same module without donation or that were not consumed.
    INPUT_CLOBBERED = "input_clobbered"
    RESULT_CLOBBERED = "result_clobbered"
    DONATION_MISMATCH = "donation_mismatch"
    # A declared or recognized invariant of an output (docs/detection.md, "Invariants") missed
    # by more than legal rounding allows: a softmax row that does not sum to one, NaN from
    # finite logits, a probability outside [0, 1]; judged before the numbers are compared.
    INVARIANT_VIOLATED = "invariant_violated"
    # XLA compiled the program (its numbers may be right) but logged, during that compile,
    # that it went wrong inside (docs/detection.md, "Compile anomalies"): a line of
    # core/anomalies.py's table, such as the algebraic simplifier stuck in a circular loop.
    COMPILE_ANOMALY = "compile_anomaly"


# A target's row in a check of one program (campaign/check.py) when the program was not
# judged: deliberately no Verdict, since the target was judged neither right nor wrong.
UNJUDGED: Literal["unjudged"] = "unjudged"


class ProgramStatus(StrEnum):
    """What became of one program as a whole, stored beside its verdicts: whether its
    targets were judged at all, and if not, why. A StrEnum: the store's `status` column."""

    JUDGED = "judged"
    # No float64 truth: the references failed, or disagree beyond their noise (the program
    # is ill-conditioned in float64, or a reference is hit by a bug).
    REFERENCE_FAILED = "reference_failed"
    REFERENCES_DISAGREE = "references_disagree"
    PLUGIN_ERROR = "plugin_error"  # an injected HLO pass plugin raised
    HARNESS_ERROR = "harness_error"  # the engine itself failed on the program
    # The program never existed: a trace or corpus file that cannot be read, a generator
    # that could not draw a valid program for this index.
    TRACE_ERROR = "trace_error"
    CORPUS_ERROR = "corpus_error"
    GENERATOR_ERROR = "generator_error"

    @property
    def judged(self) -> bool:
        return self is ProgramStatus.JUDGED

    @property
    def unloadable(self) -> bool:
        """The program could not be loaded: it is not counted as replayed or generated."""
        return self in (ProgramStatus.TRACE_ERROR, ProgramStatus.CORPUS_ERROR,
                        ProgramStatus.GENERATOR_ERROR)


class Reference(StrEnum):
    """A reference a campaign can ask for: what the targets are judged against."""

    F64_NUMPY = "f64_numpy"  # numpy float64 evaluation of the module; shares no code with XLA
    F64_EAGER = "f64_eager"  # the program op by op in float64 through jax (XLA kernels)
    F64_JIT = "f64_jit"  # the float64 program compiled under a setting other than default
    EAGER = "eager"  # op by op at the program's own precision: what it literally says
    INTERPRETER = "interpreter"  # the StableHLO reference interpreter shipped in jaxlib


# The float64 references that go through XLA, and so can share a bug with the targets.
XLA_F64_REFERENCES = (Reference.F64_EAGER, Reference.F64_JIT)


class StillFails(StrEnum):
    """How a bisection decides that a cut of a finding's program still fails the way the
    finding did (bisect/context.py Context.check; over releases, bisect/versions.py)."""

    NOT_BISECTED = "not_bisected"  # nothing failed
    # The oracle judges the target's numbers wrong against the cut's float64 values, beside a
    # legal compile of the cut (bisect/lab.py Lab.check).
    NUMBERS = "numbers"
    # The target fails on the cut with the same verdict (Lab.check_compile): it never produced
    # numbers, and its canonical error text is part of the signature instead.
    SAME_VERDICT = "same_verdict"
    # The worker's buffer checks report the same verdict on the cut, whatever the numbers
    # (Lab.check_buffers).
    BUFFERS = "buffers"
    # The target's result breaks the finding's invariant again (Lab.check_invariant); a cut
    # that no longer returns the invariant's output is judged by its numbers.
    INVARIANT = "invariant"
    # Checked once as it was found (by the buffer checks where they found it, else by the
    # numbers) and never reduced: the reproduce stage stops the bisection, since a failure
    # whose bits change between compiles would reduce to a wrong reproducer.
    REPRODUCE_ONLY = "reproduce_only"


@dataclass(frozen=True)
class VerdictInfo:
    """What every part knows about one verdict, in one place (VERDICT_TABLE)."""

    doc: str  # one line: the agents' verdicts doc (agents/mcp_server.py) and docs/
    colour: str  # on the triage page (report/html.py), the same in every table and plot
    still_fails: StillFails
    # Given by the worker's buffer checks (xla/buffers.py); when a run shows several, the
    # lowest rank is the verdict.
    buffer_rank: int | None = None

    @property
    def compiler_failure(self) -> bool:
        """The target never produced numbers: a crash, hang or compile error."""
        return self.still_fails is StillFails.SAME_VERDICT


# One entry per Verdict, in the enum's order (tests/fuzz/test_verdict_table.py). The CRD's
# verdict enum (crds/bugsignature.yaml) lists the same values in the same order.
VERDICT_TABLE: dict[Verdict, VerdictInfo] = {
    Verdict.PASS: VerdictInfo(
        "the target's numbers are within the oracle's tolerance of the float64 reference",
        "#196f3d", StillFails.NOT_BISECTED),
    Verdict.MISMATCH: VerdictInfo(
        "numbers beyond the oracle's tolerance against the float64 reference",
        "#c0392b", StillFails.NUMBERS),
    Verdict.NAN_MISMATCH: VerdictInfo(
        "another NaN/inf pattern than the float64 reference's", "#2471a3", StillFails.NUMBERS),
    Verdict.CRASH: VerdictInfo(
        "the compiler or the program killed its worker", "#b9770e", StillFails.SAME_VERDICT),
    Verdict.HANG: VerdictInfo(
        "no answer in the campaign's programSeconds", "#138d75", StillFails.SAME_VERDICT),
    Verdict.COMPILE_ERROR: VerdictInfo(
        "XLA refused a module that another configuration compiles", "#7d3c98",
        StillFails.SAME_VERDICT),
    Verdict.NONDETERMINISTIC: VerdictInfo(
        "the same executable gave other bits on a second run, or a fresh compile other bits "
        "than the first", "#5d6d7e", StillFails.REPRODUCE_ONLY, buffer_rank=3),
    # Judged as the mismatch or nan_mismatch its evidence keeps (`judged_as`).
    Verdict.VERSION_REGRESSION: VerdictInfo(
        "an older jaxlib is right where this one is wrong", "#a04000", StillFails.NUMBERS),
    Verdict.INPUT_CLOBBERED: VerdictInfo(
        "a non-donated input changed during the run", "#c2185b", StillFails.BUFFERS, buffer_rank=0),
    Verdict.RESULT_CLOBBERED: VerdictInfo(
        "a live result of an earlier run changed", "#827717", StillFails.BUFFERS, buffer_rank=1),
    Verdict.DONATION_MISMATCH: VerdictInfo(
        "donating inputs changed the outputs, or a donated input was not consumed", "#4e342e",
        StillFails.BUFFERS, buffer_rank=2),
    Verdict.INVARIANT_VIOLATED: VerdictInfo(
        "a declared or recognized invariant, such as a softmax row summing to one, missed by "
        "more than legal rounding allows", "#283593", StillFails.INVARIANT),
    # Not bisected: the lab could see the anomaly on a cut (Ran.anomalies), but the stages
    # after the check (shrink, bundle's repro.py and issue.md) know only wrong numbers and
    # failed compiles.
    Verdict.COMPILE_ANOMALY: VerdictInfo(
        "XLA compiled the program but logged an internal anomaly during the compile, such as "
        "the algebraic simplifier stuck in a circular loop (not bisected)", "#00838f",
        StillFails.NOT_BISECTED),
}

# The target never produced numbers: "still fails" means the same verdict, and the error
# text (canonicalized) is part of the signature.
COMPILER_FAILURES = frozenset(v for v, i in VERDICT_TABLE.items() if i.compiler_failure)
# The verdicts whose canonical error line is part of the signature and of a program's
# grouping of findings (campaign/recording.py): the compiler failures, and a compile anomaly,
# whose log line tells one anomaly from another.
ERROR_SIGNED = COMPILER_FAILURES | {Verdict.COMPILE_ANOMALY}
# The verdicts the worker's buffer checks give (xla/buffers.py), in the order one is chosen
# when a run shows several; NONDETERMINISTIC there is a rerun of the same executable (or a
# run beside another one) that gave other bits.
BUFFER_VERDICTS = tuple(v for _, v in sorted((i.buffer_rank, v) for v, i in VERDICT_TABLE.items()
                                              if i.buffer_rank is not None))
# Hangs are bisected too, each probe with a short timeout of its own (bisect/pipeline.py).
BISECTABLE = frozenset(v for v, i in VERDICT_TABLE.items()
                       if i.still_fails is not StillFails.NOT_BISECTED)
# What bisection fills in; None until then (the candidate signature).
CULPRIT_FIELDS = ("culprit_op", "fusion_kind", "culprit_pass")


@dataclass(kw_only=True)
class Finding:
    """One target judged wrong on one program; finding.json is `to_json()`."""

    id: str
    campaign: str
    program: str
    target: str
    verdict: Verdict
    culprit_op: str | None = None
    culprit_pass: str | None = None
    fusion_kind: str | None = None
    dtype: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    dir: str
    time: str
    signature: str = ""
    known_bug: str | None = None

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)

    @property
    def error(self) -> str | None:
        """The error text a crash, hang or compile error left in the evidence (a compile
        anomaly's: its canonical line)."""
        return self.evidence.get("error")

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in FINDING_FIELDS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        """A Finding from finding.json or a store row; keys it does not know (the bisector's
        repro, candidate_signature) are left out."""
        return cls(**{k: v for k, v in data.items() if k in FINDING_FIELDS})


FINDING_FIELDS = tuple(f.name for f in dataclasses.fields(Finding))


@dataclass(kw_only=True)
class Signature:
    """A distinct bug: the findings that share a signature id, counted."""

    id: str
    verdict: Verdict
    target: str | None = None
    culprit_op: str | None = None
    culprit_pass: str | None = None
    fusion_kind: str | None = None
    dtype: str | None = None
    count: int
    first_seen: str
    last_seen: str
    repro: str | None = None
    known_bug: str | None = None
    bisected: int = 0
    # What `bisect --versions` found (docs/versions.md), released jaxlib versions: the first
    # that shows the bug and the newest before it that does not ("<=A" with no last_good
    # when the oldest release searched, A, shows it already).
    introduced_in: str | None = None
    last_good: str | None = None
    # A fix verification on one release: "verified" (the bug does not show there) or
    # "still_failing", and that release.
    verification: str | None = None
    verification_jaxlib: str | None = None

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)

    def to_summary(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in SUMMARY_SIGNATURE_FIELDS}


SIGNATURE_FIELDS = tuple(f.name for f in dataclasses.fields(Signature))
# The fields a version bisection or verification fills in, after the campaign.
VERSION_FIELDS = ("introduced_in", "last_good", "verification", "verification_jaxlib")
# summary.json lists a signature without its dtype (part of its id), bisection count and
# version fields (set later, by `bisect --versions`, which does not rewrite the summary).
SUMMARY_SIGNATURE_FIELDS = tuple(f for f in SIGNATURE_FIELDS
                                 if f not in ("dtype", "bisected", *VERSION_FIELDS))
