"""bisect_finding: run the stages in order on one finding folder and record what they found.

A stage is a module with NAME and `run(ctx) -> evidence`; it reads what earlier stages
left in the Context and may end the pipeline (ctx.stopped). Adding a stage is adding it
to STAGES.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from xla_sentinel.bisect import bundle, fusion, graph, passes, reduce, regions, reproduce, shrink
from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import Lab, LabError
from xla_sentinel.core.elements import NUMPY
from xla_sentinel.core.errors import UserError
from xla_sentinel.core.model import COMPILER_FAILURES, Finding, Reference, Verdict
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import Program, ProgramError, promote_floats
from xla_sentinel.spec.options import REFERENCE_OPTIONS
from xla_sentinel.triage import known_bugs
from xla_sentinel.worker.hosts import Layout
from xla_sentinel.worker.protocol import EveryValue, Info, NumpyReference

STAGES = (reproduce, graph, reduce, regions, shrink, fusion, passes, bundle)
# A hang's probes: a case that still hangs costs this long, one that finishes (a cut of the
# program) takes a few seconds even on a loaded machine.
HANG_PROBE_S = 30.0
REDUCING = (reduce, shrink)
# Evidence too bulky for finding.json; the bundle keeps these as files.
_BULKY = ("program_hlo", "reduced_hlo")
# The XLA float64 reference compiled whole, with its options (judge/assess.py): a finding
# against it (evidence reason "reference": the reference itself is wrong) is bisected as it
# computes, the program promoted to float64 under these options, against the float64
# values of each op alone (which keep what it drops). f64_eager runs op by op: no module.
F64_REFERENCES = {Reference.F64_JIT.value: REFERENCE_OPTIONS}


class BisectError(UserError, ValueError):
    """The finding folder cannot be bisected as it is; the message names the file."""


def _load(finding_dir: Path) -> tuple[dict[str, Any], Program]:
    path = finding_dir / "finding.json"
    if not path.is_file():
        raise BisectError(f"{finding_dir}: not a finding folder (no finding.json)")
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as e:  # ValueError: bad JSON or bad UTF-8
        raise BisectError(f"{path}: unreadable JSON ({e})") from None
    if not isinstance(record, dict) or not isinstance(record.get("evidence"), dict):
        raise BisectError(f"{path}: no evidence object (not written by xla-sentinel)")
    if record.get("verdict") not in tuple(Verdict):
        raise BisectError(f"{path}: verdict {record.get('verdict')!r} is none of {', '.join(Verdict)}")
    try:
        program = Program.load(finding_dir / "program")
    except ProgramError as e:
        raise BisectError(str(e)) from None
    for ref in record["evidence"].get("plugins") or []:
        plugin = Path(ref.partition(":")[0])
        if not plugin.is_file():
            raise BisectError(f"{path}: the finding's plugin {plugin} does not exist")
    return record, program


def open_context(finding_dir: Path, timeout: float = 120.0,
                 hang_probe_s: float = HANG_PROBE_S) -> Context:
    """Load a finding, start its workers and compute the float64 value of every value in its
    module: what every stage starts from. The caller closes ctx.lab."""
    finding_dir = Path(finding_dir)
    record, program = _load(finding_dir)
    evidence = record["evidence"]
    logs = finding_dir / "logs"
    logs.mkdir(exist_ok=True)
    probe = min(timeout, hang_probe_s) if record["verdict"] == Verdict.HANG else None
    options = evidence.get("target_options") or {}
    promoted, own = None, program
    if record.get("target") in F64_REFERENCES:
        program, promoted = in_float64(program, finding_dir)
        options = evidence.get("target_options") or F64_REFERENCES[record["target"]]
    lab = Lab(options, evidence.get("plugins") or [], timeout, logs, probe_timeout=probe,
              layout=_lockstep_layout(record))
    unavailable = None
    try:
        info = lab.ask_reference(Info(program.module)).info
        try:
            values = lab.ask_reference(EveryValue(program.module, program.inputs)).values
        except LabError as e:
            if record["verdict"] not in COMPILER_FAILURES:
                raise
            # A compiler failure is followed by "does it still fail?", never by numbers: where
            # XLA cannot compute the values (an op the reference's options cannot compile:
            # clamp of PRED without fusion emitters, s33-i348), the cuts get stand-ins.
            unavailable = str(e)[:2000]
            values = _stand_ins(info, program)
        if promoted:
            promoted += "; " + _numpy_outputs(lab, own, info, values)
    except LabError as e:
        lab.close()
        raise BisectError(f"{finding_dir / 'program' / 'module.mlir'}: {e}") from None
    return Context(finding_dir, record, program, lab, info, values, values_unavailable=unavailable,
                   promoted=promoted)


def _lockstep_layout(record: dict[str, Any]) -> Layout | None:
    """The process layout a finding's cuts run on: its target's (a `hosts2x2` finding is
    bisected on 2 host processes in lockstep, where a bug of that layout alone shows), None
    for one process. A TPU slice's hosts are its VMs, not processes of this machine: such a
    finding is bisected on one process, where it may not reproduce (`bisected_on` says so)."""
    lay = Layout.from_name(str(record.get("target") or ""))
    return lay if lay is not None and lay.platform == "cpu" else None


def bisected_on(record: dict[str, Any], lab: Lab) -> str:
    """Where the cuts ran, as the bisect evidence says it."""
    if lab.layout is not None:
        return f"{lab.layout.describe()}, in lockstep ({lab.layout.name})"
    lay = Layout.from_name(str(record.get("target") or ""))
    if lay is not None:
        return f"one process: the {lay.name} finding's hosts are a TPU slice's, not processes here"
    return "one process"


def in_float64(program: Program, finding_dir: Path) -> tuple[Program, str]:
    """The program as the float64 reference compiles it: every float promoted to f64
    (core/program.promote_floats, the one promoter), its float inputs widened. Also what
    bisect/versions.py probes releases with for such a finding."""
    module = promote_floats(program.module)
    if module is None:
        raise BisectError(f"{finding_dir / 'program' / 'module.mlir'}: it bit-casts floats, so it has "
                          "no float64 module to bisect the float64 reference's finding on")
    inputs = [np.asarray(x).astype(np.float64) if d in FLOATS else x
              for x, d in zip(program.inputs, program.input_dtypes, strict=True)]
    why = "the finding is against the float64 reference itself: its module promoted to float64"
    return replace(program, module=module, inputs=inputs), why


def _numpy_outputs(lab: Lab, program: Program, info: dict[str, Any],
                   values: dict[str, np.ndarray]) -> str:
    """Put numpy's float64 outputs (npref, the reference the finding was judged against)
    in place of @main's results in `values` (`program`: the program at its own precision,
    which NumpyReference promotes as the campaign's does); says where the float64 values of
    each op alone differed from them."""
    outputs = lab.ask_reference(NumpyReference(program.module, program.inputs, program.graph)).outputs
    if outputs is None:
        return "no numpy float64 outputs: judged against each op alone in float64"
    args = {a["vid"] for a in info["args"]}
    differ = []
    for k, (vid, out) in enumerate(zip(info["returns"], outputs, strict=True)):
        if vid in args:
            continue  # an argument returned as it is
        wide = np.asarray(out, np.float64) if np.asarray(out).dtype.kind == "f" else np.asarray(out)
        # Beyond float64 rounding (a NaN one of them drops, an op evaluated otherwise).
        if vid in values and not (np.shape(values[vid]) == wide.shape and np.allclose(
                np.asarray(values[vid], np.float64), np.asarray(wide, np.float64), rtol=1e-9, atol=0,
                equal_nan=True)):
            differ.append(k)
        values[vid] = wide
    return ("outputs judged against numpy's float64 values (npref)"
            + (f", which each op alone in float64 gave otherwise for outputs {differ}" if differ else ""))


def _stand_ins(info: dict[str, Any], program: Program) -> dict[str, np.ndarray]:
    """The program's inputs and zeros for every other value: the inputs of cuts whose only
    question is whether the target still crashes or fails to compile."""
    values = {a["vid"]: np.asarray(x) for a, x in zip(info["args"], program.inputs, strict=True)}
    for op in info["ops"]:
        for r in op["results"]:
            if r["dtype"] is not None and r["shape"] is not None:
                values[r["vid"]] = np.zeros(r["shape"], NUMPY[r["dtype"]])
    return values


def run_stage(ctx: Context, stage: Any) -> dict[str, Any]:
    """Run one stage and record its evidence, time and target compiles in the context."""
    ctx.lab.stage = stage.NAME
    t0 = time.monotonic()
    ev: dict[str, Any] = stage.run(ctx)
    ev["seconds"] = round(time.monotonic() - t0, 3)
    ev["target_compiles"] = ctx.lab.compiles[stage.NAME]
    if stage.NAME in ctx.judged_by:
        # An invariant finding: how this stage's checks judged it (invariant or numbers).
        ev["invariant_checks"] = ctx.judged_by[stage.NAME]
    ctx.evidence[stage.NAME] = ev
    return ev


def bisect_finding(finding_dir: Path, *, timeout: float = 120.0, reduce_case: bool = True,
                   hang_probe_s: float = HANG_PROBE_S) -> dict[str, Any]:
    """Localize, reduce (unless `reduce_case` is False) and bundle one finding; updates its
    finding.json and returns {"status", "reproduces", "culprit_op", "fusion_kind",
    "culprit_pass", "culprit_path", "repro", "stages"}: `culprit_op` is the op inside the
    culprit's regions where bisect/regions.py found one, `culprit_path` where it sits. A
    hang's target probes time out after `hang_probe_s` each."""
    ctx = open_context(finding_dir, timeout, hang_probe_s)
    try:
        for stage in STAGES:
            if not reduce_case and stage in REDUCING:
                continue
            if ctx.stopped:
                break
            try:
                run_stage(ctx, stage)
            except LabError as e:  # a worker request the stage relies on failed
                ctx.stopped = "error"
                ctx.evidence[stage.NAME] = {"error": str(e)[:2000]}
    finally:
        ctx.lab.close()
    return _record(Path(finding_dir), ctx.record, ctx)


def _record(finding_dir: Path, record: dict[str, Any], ctx: Context) -> dict[str, Any]:
    stages = {name: {k: v for k, v in ev.items() if k not in _BULKY}
              for name, ev in ctx.evidence.items()}
    located = ctx.stopped is None and ctx.culprit is not None
    result = {
        "status": ctx.stopped or "localized",
        "reproduces": bool(ctx.evidence.get("reproduce", {}).get("fails")),
        "culprit_op": ctx.culprit_name() if located and ctx.culprit is not None else None,
        "culprit_path": ctx.culprit_path if located else None,
        "fusion_kind": ctx.fusion_kind if located else None,
        "culprit_pass": ctx.culprit_pass if located else None,
        "repro": ctx.repro if located else None,
        "stages": stages,
        "bisected_on": bisected_on(record, ctx.lab),
    }
    record.update({k: result[k] for k in ("culprit_op", "fusion_kind", "culprit_pass")})
    if located:
        # Known bugs whose rule names the culprit (a fusion kind) can only match now.
        program = ctx.program
        record["known_bug"] = known_bugs.match(
            Finding.from_json(record), graph=program.graph,
            module=program.module if program.graph is None else None) or record.get("known_bug")
    if ctx.values_unavailable:
        result["values"] = f"unavailable: {ctx.values_unavailable}"
    if ctx.promoted:
        result["module"] = ctx.promoted
    record["evidence"]["bisect"] = {k: v for k, v in result.items()
                                    if k not in ("culprit_op", "fusion_kind", "culprit_pass")}
    record["repro"] = result["repro"]
    (finding_dir / "finding.json").write_text(json.dumps(record, indent=1, default=_plain))
    return result


def _plain(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")
