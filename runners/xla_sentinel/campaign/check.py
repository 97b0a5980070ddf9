"""`xla-sentinel check PROGRAM`: re-run one program folder under a campaign's targets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from xla_sentinel.campaign.multihost import MultiHost
from xla_sentinel.core.model import UNJUDGED, ProgramStatus, Verdict
from xla_sentinel.core.program import Program
from xla_sentinel.judge.assess import Assessor, Slot
from xla_sentinel.judge.targets import resolve
from xla_sentinel.spec.campaign import CampaignSpec, load_campaign
from xla_sentinel.spec.plugins import check_ref, split_ref
from xla_sentinel.worker.client import wait_ready


def check_program(folder: Path, campaign: Path | None = None,
                  inject_passes: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One verdict per target (`pass` included, UNJUDGED where the program was not judged),
    with the program's status and the oracle's evidence."""
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
    return out
