"""The campaign's hook: bisect the first findings of each candidate signature and move
them to the refined signature (culprit op, fusion kind and curing pass filled in), so
the same bug found from different programs is one signature and different bugs are not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import structlog

from .. import known_bugs
from ..campaign import BisectSpec
from ..signature import signature_id
from ..store import Store
from .lab import LabError
from .pipeline import BisectError, bisect_finding

log = structlog.get_logger("xla_sentinel.bisect")
# Hangs are not bisected: every probe would wait out the timeout.
BISECTABLE = frozenset({"mismatch", "nan_mismatch", "nondeterministic", "crash", "compile_error"})


def refined_signature(record: dict[str, Any]) -> str:
    return signature_id({**record, "error": record.get("evidence", {}).get("error")})


def refine_finding(store: Store, out_dir: Path, record: dict[str, Any], spec: BisectSpec,
                   timeout: float = 120.0) -> dict[str, Any]:
    """Bisect a stored finding if its candidate signature still has bisections left; returns
    the record, re-signed when the bisector localized it."""
    if not spec.enabled or record["verdict"] not in BISECTABLE \
            or not store.claim_bisection(record["signature"], spec.perSignature):
        return record
    folder = Path(out_dir) / record["dir"]
    try:
        result = bisect_finding(folder, timeout=timeout, reduce_case=spec.reduce)
    except (BisectError, LabError) as e:
        log.warning("bisection failed", finding=record["id"], error=str(e))
        return record
    if result["status"] != "localized":
        log.info("bisected", finding=record["id"], status=result["status"])
        return record
    refined = {**record, **{k: result[k] for k in ("culprit_op", "fusion_kind", "culprit_pass")}}
    refined["signature"] = refined_signature(refined)
    refined["known_bug"] = known_bugs.match(refined) or record.get("known_bug")
    refined["repro"] = str(Path(record["dir"]) / result["repro"])
    store.resign_finding(record["id"], record["signature"], refined)
    on_disk = json.loads((folder / "finding.json").read_text())
    on_disk.update(signature=refined["signature"], candidate_signature=record["signature"])
    (folder / "finding.json").write_text(json.dumps(on_disk, indent=1))
    log.info("bisected", finding=record["id"], culprit_op=refined["culprit_op"],
             fusion_kind=refined["fusion_kind"], culprit_pass=refined["culprit_pass"],
             signature=refined["signature"])
    return refined
