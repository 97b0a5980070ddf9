"""bisect_finding: run the stages in order on one finding folder and record what they found.

A stage is a module with NAME and `run(ctx) -> evidence`; it reads what earlier stages
left in the Context and may end the pipeline (ctx.stopped). Adding a stage is adding it
to STAGES.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from xla_sentinel.bisect import bundle, fusion, graph, passes, reduce, regions, reproduce, shrink
from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import Lab, LabError
from xla_sentinel.core.program import Program, ProgramError
from xla_sentinel.worker.protocol import EveryValue, Info

STAGES = (reproduce, graph, reduce, regions, shrink, fusion, passes, bundle)
# A hang's probes: a case that still hangs costs this long, one that finishes (a cut of the
# program) takes a few seconds even on a loaded machine.
HANG_PROBE_S = 30.0
REDUCING = (reduce, shrink)
# Evidence too bulky for finding.json; the bundle keeps these as files.
_BULKY = ("program_hlo", "reduced_hlo")


class BisectError(ValueError):
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
    probe = min(timeout, hang_probe_s) if record.get("verdict") == "hang" else None
    lab = Lab(evidence.get("target_options") or {}, evidence.get("plugins") or [], timeout, logs,
              probe_timeout=probe)
    try:
        info = lab.ask_reference(Info(program.module)).info
        values = lab.ask_reference(EveryValue(program.module, program.inputs)).values
    except LabError as e:
        lab.close()
        raise BisectError(f"{finding_dir / 'program' / 'module.mlir'}: {e}") from None
    return Context(finding_dir, record, program, lab, info, values)


def run_stage(ctx: Context, stage: Any) -> dict[str, Any]:
    """Run one stage and record its evidence, time and target compiles in the context."""
    ctx.lab.stage = stage.NAME
    t0 = time.monotonic()
    ev = stage.run(ctx)
    ev["seconds"] = round(time.monotonic() - t0, 3)
    ev["target_compiles"] = ctx.lab.compiles[stage.NAME]
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
    }
    record.update({k: result[k] for k in ("culprit_op", "fusion_kind", "culprit_pass")})
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
