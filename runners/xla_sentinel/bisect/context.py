"""What the stages share: the finding, the module's op graph, float64 values of every
value in it, and the cases the stages have narrowed it to. Stages read what earlier
stages left here and add their own; each records its evidence under its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from xla_sentinel.bisect.lab import Case, Check, Lab, own_dtype
from xla_sentinel.core.model import VERDICT_TABLE, StillFails, Verdict
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import Program
from xla_sentinel.judge import oracle
from xla_sentinel.judge.invariants import Invariant, InvariantError
from xla_sentinel.ops import exact

# The verdicts of wrong numbers: one class, whichever way an output is judged (a NaN the
# target drops is nan_mismatch by its error and mismatch bitwise, s34-i1659). A case
# checked for such a finding fails only with one of them.
WRONG_NUMBERS = frozenset({Verdict.MISMATCH, Verdict.NAN_MISMATCH})
# Ops that select pass their operands through one to one, whatever their number.
_SELECTS = frozenset({"selects"})


@dataclass
class Context:
    finding_dir: Path
    record: dict[str, Any]
    program: Program
    lab: Lab
    info: dict[str, Any]  # module.module_info of the finding's module, ops annotated by rules.py
    values: dict[str, np.ndarray]  # float64 reference of every value of @main, by name
    evidence: dict[str, Any] = field(default_factory=dict)  # stage name -> its evidence
    stopped: str | None = None  # why the pipeline ended early (nondeterministic, ...)
    full: Case | None = None  # the whole module as a case (ops tagged with their index)
    culprit: int | None = None  # index in @main of the op that first diverges
    reduced: Case | None = None  # the smallest case that still fails
    fusion_kind: str | None = None
    culprit_pass: str | None = None
    repro: str | None = None  # bundle folder, relative to finding_dir
    # The op inside the culprit's regions that goes wrong (bisect/regions.py): where it
    # sits (`main/while#3/body/add#7`), its canonical form and its text.
    culprit_path: str | None = None
    inner_op: str | None = None
    inner_text: str | None = None
    # An invariant finding's checks per stage: how many judged the invariant, how many the
    # numbers (the case lost the invariant's output), and why the last one lost it.
    judged_by: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Why the float64 values could not be computed (a compiler failure's cuts then get
    # stand-ins: pipeline._stand_ins), and how the module was made from the program where
    # it is not the program's own (a float64 reference's finding: pipeline.in_float64).
    values_unavailable: str | None = None
    promoted: str | None = None
    _types: dict[str, dict[str, Any]] = field(default_factory=dict)
    _defined_at: dict[str, int] = field(default_factory=dict)  # value -> op index (-1: argument)

    @property
    def verdict(self) -> Verdict:
        """The finding's verdict, as its finding.json names it."""
        return Verdict(self.record["verdict"])

    @property
    def still_fails(self) -> StillFails:
        """How this finding's "still fails" is decided (core/model.py VERDICT_TABLE)."""
        return VERDICT_TABLE[self.verdict].still_fails

    @property
    def compiler_failure(self) -> bool:
        """The finding is a crash, hang or compile error: "still fails" means the same
        verdict, not wrong numbers."""
        return VERDICT_TABLE[self.verdict].compiler_failure

    @property
    def invariant(self) -> Invariant | None:
        """The invariant an `invariant_violated` finding broke (its evidence's declaration,
        numbered in the program's outputs and arguments), None for any other finding."""
        ev = self.record.get("evidence", {})
        if self.still_fails is not StillFails.INVARIANT or ev.get("reason") != "invariant":
            return None
        try:
            return Invariant.from_json(dict(ev.get("declaration") or {}), source=str(ev.get("declared_by", "")))
        except InvariantError:
            return None

    def invariant_values(self) -> list[str]:
        """The values of @main the finding's invariant reads: its output (and for
        idempotent the other output); empty for any other finding."""
        inv = self.invariant
        if inv is None:
            return []
        returns = self.info["returns"]
        wanted = [inv.output, *([inv.other] if inv.kind == "idempotent" and inv.other is not None else [])]
        return [returns[k] for k in wanted if k < len(returns)]

    def invariant_on(self, case: Case) -> tuple[Invariant | None, str]:
        """The finding's invariant numbered in `case`'s outputs and parameters, or why the
        case cannot judge it (a cut that no longer returns the invariant's output)."""
        inv = self.invariant
        assert inv is not None
        returns = self.info["returns"]
        vid = returns[inv.output] if inv.output < len(returns) else None
        if vid is None or vid not in case.outputs:
            return None, f"the case does not return output {inv.output} ({vid or 'none'}), which the invariant judges"
        other = inv.other
        if inv.kind == "idempotent" and other is not None:
            again = returns[other] if other < len(returns) else None
            if again not in case.outputs:
                return None, f"the case does not return output {other} ({again}), the idempotent pair"
            other = case.outputs.index(again)
        elif inv.kind == "logsumexp" and other is not None:
            arg = self.info["args"][other]["vid"] if other < len(self.info["args"]) else None
            if arg not in case.params:
                return None, f"the case does not take argument {other} ({arg}), the logsumexp's x"
            other = case.params.index(arg)
        return replace(inv, output=case.outputs.index(vid), other=other), ""

    def check(self, case: Case, options: dict[str, Any] | None = None, *, repeat: bool = False,
              want_hlo: bool = False) -> Check:
        """Does the finding's failure still show on `case` (under `options`)? For an
        invariant finding: does the target still break the invariant; where the case no
        longer returns the invariant's output, wrong numbers, with the reason in the
        evidence (`invariant_lost`) and counted per stage (`judged_by`)."""
        if self.invariant is not None:
            inv, lost = self.invariant_on(case)
            stage = self.judged_by.setdefault(self.lab.stage, {"invariant": 0, "numbers": 0})
            if inv is not None:
                stage["invariant"] += 1
                return self.lab.check_invariant(case, inv, options, repeat=repeat, want_hlo=want_hlo)
            stage["numbers"] += 1
            stage["invariant_lost"] = lost
            check = self.lab.check(case, options, repeat=repeat, want_hlo=want_hlo)
            check.evidence.update(judged_by="numbers", invariant_lost=lost)
            return check
        if self.still_fails is StillFails.SAME_VERDICT:
            return self.lab.check_compile(case, self.verdict, options, repeat=repeat, want_hlo=want_hlo)
        found_by_buffers = self.record.get("evidence", {}).get("reason") == "buffers"
        if self.still_fails is StillFails.BUFFERS or found_by_buffers:
            # Buffer corruption (xla/buffers.py): the worker's buffer checks report the same
            # verdict, whatever the numbers; also a nondeterministic finding that they found
            # (StillFails.REPRODUCE_ONLY: checked as it was found).
            return self.lab.check_buffers(case, self.verdict, options, repeat=repeat, want_hlo=want_hlo)
        check = self.lab.check(case, options, repeat=repeat, want_hlo=want_hlo)
        if check.fails and check.verdict not in WRONG_NUMBERS:
            # Another class of failure than the finding's (wrong numbers): not this one.
            check.fails = False
            check.evidence["other_verdict"] = str(check.verdict)
        return check

    def __post_init__(self) -> None:
        for a in self.info["args"]:
            self._types[a["vid"]] = a
            self._defined_at[a["vid"]] = -1
        for i, op in enumerate(self.ops):
            for r in op["results"]:
                self._types[r["vid"]] = r
                self._defined_at[r["vid"]] = i

    @property
    def ops(self) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = self.info["ops"]
        return ops

    def dtype(self, vid: str) -> str | None:
        dtype: str | None = self._types[vid]["dtype"]
        return dtype

    def valued_dtype(self, vid: str) -> str:
        """The dtype of a value that has float64 values (only typed values have them)."""
        dtype = self.dtype(vid)
        assert dtype is not None, vid
        return dtype

    def shape(self, vid: str) -> list[int] | None:
        shape: list[int] | None = self._types[vid]["shape"]
        return shape

    def defined_at(self, vid: str) -> int:
        return self._defined_at[vid]

    def subgraph(self, keep: list[int], outputs: list[str] | None = None) -> tuple[list[str], list[str]]:
        """(parameters, outputs) of the cut that keeps ops `keep`: parameters are the values
        the kept ops read from outside (an op's "operands" include what its regions
        capture, module.Parsed.info), outputs (unless given) the kept values nothing kept
        reads."""
        kept = set(keep)
        params: list[str] = []
        read: set[str] = set()
        for i in keep:
            for v in self.ops[i]["operands"]:
                read.add(v)
                if self._defined_at[v] not in kept and v not in params:
                    params.append(v)
        if outputs is None:
            outputs = [r["vid"] for i in keep for r in self.ops[i]["results"]
                       if r["vid"] not in read and r["dtype"] is not None]
        return params, outputs

    def tainted(self, vid: str, keep: set[int]) -> bool:
        """Whether a value depends on a float inside the kept ops (the oracle compares such
        integers only where every legal configuration agrees)."""
        stack, seen = [vid], set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if self.dtype(v) in FLOATS:
                return True
            i = self._defined_at[v]
            if i in keep:
                stack.extend(self.ops[i]["operands"])
        return False

    @property
    def bitwise_finding(self) -> bool:
        """The finding broke an output that IEEE 754 fixes bitwise (exact.py)."""
        return bool(self.record.get("evidence", {}).get("reason") == "bitwise")

    def bitwise(self, keep: list[int]) -> dict[str, bool]:
        """Per value computed by the kept ops: is it fixed bitwise by the cut's parameters?"""
        states: dict[str, exact.State] = {}
        for i in sorted(keep):
            op = self.ops[i]
            tags = frozenset(op["tags"])  # rules.annotate_ops, in the worker
            args = [states.get(v, exact.State()) for v in op["operands"]]
            arg_dtypes = [str(self.dtype(v)) for v in op["operands"]]
            # Of the ops with several results only those that select (a barrier) pass
            # their operands through one to one.
            several = len(op["results"]) > 1 and tags != _SELECTS
            for r in op["results"]:
                states[r["vid"]] = exact.NOT_BITWISE if several else exact.node_state(
                    tags, str(r["dtype"]), arg_dtypes, args, convert=op["name"] == "stablehlo.convert")
        return {v: s.ok for v, s in states.items()}

    def case(self, keep: list[int], outputs: list[str] | None = None) -> Case | None:
        """The cut as a checkable case (inputs and expectations from the float64 values);
        None when it returns nothing."""
        params, outs = self.subgraph(keep, outputs)
        kept_values = {r["vid"] for i in keep for r in self.ops[i]["results"]}
        # An invariant finding's cut returns the invariant's output wherever it computes
        # it, even where a kept op reads it too: the invariant is what is checked.
        outs = [*outs, *(v for v in self.invariant_values() if v in kept_values and v not in outs)]
        outs = [o for o in outs if o not in params]
        if not outs or any(v not in self.values for v in [*params, *outs]):
            return None  # nothing returned, or a per-device value of an SPMD module (spmd.py)
        module = self.lab.cut(self.program.module, keep, params, outs)
        kept = set(keep)
        inputs = [own_dtype(self.values[p], self.valued_dtype(p)) for p in params]
        # Judged bitwise only where the finding was, and as the campaign does: not on
        # subnormal inputs.
        bitwise = self.bitwise(keep) if self.bitwise_finding and not oracle.has_subnormals(inputs) \
            else {}
        tainted = {o: self.tainted(o, kept) for o in outs}
        return Case(module=module,
                    inputs=inputs,
                    expected=[self.values[o] for o in outs],
                    # An integer computed without floats is judged exactly against its
                    # float64 value (oracle.integer), not bitwise against the legal compile,
                    # which may share the bug (shift_set_then_reshape: every configuration).
                    infos=[oracle.OutputInfo(self.valued_dtype(o), tainted[o], bitwise.get(o, False) and (
                        self.valued_dtype(o) in FLOATS or tainted[o])) for o in outs],
                    discrete=any(self.ops[i]["discrete"] for i in keep),
                    ops=sorted(keep), params=params, outputs=outs)

    def culprit_name(self) -> str:
        """The culprit in canonical form: the op inside its regions where one was found."""
        assert self.culprit is not None
        return self.inner_op or self.canonical_op(self.culprit)

    def canonical_op(self, i: int) -> str:
        """The op in a form that does not depend on the program: name, comparison
        direction, operand and result element types (`compare GE (f32->bool)`)."""
        op = self.ops[i]
        name = op["name"].removeprefix("stablehlo.")
        direction = ""
        if op["name"] == "stablehlo.compare":
            direction = " " + op["text"].split("stablehlo.compare", 1)[1].split()[0].rstrip(",")
        # Each element type once, in order: variadic ops (concatenate of 2 or 3 arrays)
        # are the same op to a compiler engineer.
        own = op["operands"][:len(op["operands"]) - len(op.get("captures", []))]  # not captures
        ins = ",".join(dict.fromkeys(str(self.dtype(v)) for v in own))
        outs = ",".join(dict.fromkeys(str(r["dtype"]) for r in op["results"]))
        return f"{name}{direction} ({ins}->{outs})"
