"""`xla-sentinel check PROGRAM`: re-run one program folder under a campaign's targets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from xla_sentinel.campaign import coverage
from xla_sentinel.campaign.multihost import MultiHost
from xla_sentinel.core.model import UNJUDGED, ProgramStatus, Verdict
from xla_sentinel.core.program import Program
from xla_sentinel.judge.assess import Assessor, Slot
from xla_sentinel.judge.targets import resolve
from xla_sentinel.spec.campaign import CampaignSpec, load_campaign
from xla_sentinel.spec.plugins import check_ref, split_ref
from xla_sentinel.worker.client import WorkerDied, WorkerHung, wait_ready
from xla_sentinel.worker.protocol import PassEffects, RequestFailed

HLO_EXCERPT_CHARS = 4000  # of the optimized HLO a reach carries (an agent's prompt is finite)


def program_reach(slot: Slot, program: Program, hlo_text: str | None, seconds: float) -> dict[str, Any]:
    """What a program reached in the compiler (an agent aims its next test with it): the
    kernel decisions and fusion kinds of the first target's optimized HLO, the opcodes fused
    by kind, the watched passes that changed its module (each compiled with the pass
    disabled, as the campaign samples them; None when such a compile killed the worker), and
    the optimized HLO's first HLO_EXCERPT_CHARS characters."""
    out: dict[str, Any] = {"kernel_decisions": [], "fusion_kinds": {}, "fused": [], "optimized_hlo": None}
    if hlo_text:
        cov = coverage.hlo_coverage(hlo_text)
        out.update(kernel_decisions=cov["kernel_decisions"], fusion_kinds=cov["fusion_kinds"],
                   fused=cov["fused"], optimized_hlo=hlo_text[:HLO_EXCERPT_CHARS],
                   optimized_hlo_chars=len(hlo_text))
    try:
        out["passes_changed"] = sorted(slot.programs.call(
            PassEffects(program.module, list(coverage.PASSES)), seconds * (len(coverage.PASSES) + 1)).changed)
    except (WorkerDied, WorkerHung, RequestFailed):
        out["passes_changed"] = None
    return out


def check_program(folder: Path, campaign: Path | None = None,
                  inject_passes: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One verdict per target (`pass` included, UNJUDGED where the program was not judged),
    with the program's status and the oracle's evidence."""
    return check_reach(folder, campaign, inject_passes, reach=False)[0]


def check_reach(folder: Path, campaign: Path | None = None, inject_passes: Sequence[str] = (),
                reach: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """check_program's verdicts, and with `reach` what the program reached (program_reach)."""
    program = Program.load(folder)
    spec = load_campaign(campaign).spec if campaign else CampaignSpec()
    refs = [*spec.injectPasses, *inject_passes]
    for ref in refs:
        check_ref(ref, "--inject-pass")
    plugins = [f"{split_ref(r)[0].resolve()}:{split_ref(r)[1]}" for r in refs]
    targets = [resolve(t) for t in spec.targets]
    slot = Slot("check", targets, plugins, None, "interpreter" in spec.references)
    # accelerator.hosts > 1: the layout's target too, on a host group of its own (multihost.py).
    multihost = MultiHost.of(spec, plugins)
    try:
        if multihost is not None:
            multihost.attach([slot], None)
        wait_ready(slot.workers())
        assessor = Assessor(targets, spec.references, spec.timeouts.programSeconds,
                            {d: t.k for d, t in spec.tolerances.items()})
        if multihost is not None:
            assessor = multihost.assessor(assessor)
            targets = list(assessor.targets)
        result = assessor.assess(slot, program)
        reached = program_reach(slot, program, result.hlo, spec.timeouts.programSeconds) if reach else {}
    finally:
        slot.close()
    failing = {v.target.name: v for v in result.verdicts}
    out = []
    for t in targets:
        v = failing.get(t.name)
        verdict: Verdict | Literal["unjudged"] = v.verdict if v else (
            Verdict.PASS if result.status == ProgramStatus.JUDGED else UNJUDGED)
        out.append({"target": t.name, "verdict": verdict, "status": result.status,
                    "evidence": v.evidence if v else {}})
    return out, reached
