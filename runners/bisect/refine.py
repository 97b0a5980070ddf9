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
from .lab import COMPILER_FAILURES, LabError
from .pipeline import BisectError, bisect_finding

log = structlog.get_logger("xla_sentinel.bisect")
# Hangs are not bisected: every probe would wait out the timeout.
BISECTABLE = frozenset({"mismatch", "nan_mismatch", "nondeterministic", "crash", "compile_error"})


def refined_signature(record: dict[str, Any]) -> str:
    return signature_id({**record, "error": record.get("evidence", {}).get("error")})


_CULPRIT = ("culprit_op", "fusion_kind", "culprit_pass")


def refine_finding(store: Store, out_dir: Path, record: dict[str, Any], spec: BisectSpec,
                   timeout: float = 120.0) -> dict[str, Any]:
    """Bisect a stored finding if its candidate signature still has bisections left; returns
    the record, re-signed when the bisector localized it.

    A crash or compile error's candidate signature already holds its canonical error text,
    so once one of its findings is localized the later ones take the same refined
    signature without a bisection. A wrong result's candidate (verdict, target, dtype)
    covers many bugs: its unbisected findings keep the candidate."""
    if not spec.enabled or record["verdict"] not in BISECTABLE:
        return record
    candidate = record["signature"]
    alias_key = f"refined:{candidate}"
    if not store.claim_bisection(candidate, spec.perSignature):
        alias = store.get_meta(alias_key)
        if alias is None or record["verdict"] not in COMPILER_FAILURES:
            return record
        return _resign(store, Path(out_dir), record, json.loads(alias))
    try:
        result = bisect_finding(Path(out_dir) / record["dir"], timeout=timeout,
                                reduce_case=spec.reduce)
    except (BisectError, LabError) as e:
        log.warning("bisection failed", finding=record["id"], error=str(e))
        return record
    if result["status"] != "localized":
        log.info("bisected", finding=record["id"], status=result["status"])
        return record
    culprit = {k: result[k] for k in _CULPRIT}
    culprit["repro"] = str(Path(record["dir"]) / result["repro"])
    if record["verdict"] in COMPILER_FAILURES and store.get_meta(alias_key) is None:
        store.set_meta(alias_key, json.dumps(culprit))
    return _resign(store, Path(out_dir), record, culprit)


def _resign(store: Store, out_dir: Path, record: dict[str, Any], culprit: dict[str, Any]
            ) -> dict[str, Any]:
    refined = {**record, **culprit}
    refined["signature"] = refined_signature(refined)
    refined["known_bug"] = known_bugs.match(refined) or record.get("known_bug")
    store.resign_finding(record["id"], record["signature"], refined)
    path = out_dir / record["dir"] / "finding.json"
    on_disk = json.loads(path.read_text())
    on_disk.update({**culprit, "signature": refined["signature"],
                    "candidate_signature": record["signature"]})
    path.write_text(json.dumps(on_disk, indent=1))
    log.info("signed", finding=record["id"], signature=refined["signature"],
             **{k: refined[k] for k in _CULPRIT})
    return refined
