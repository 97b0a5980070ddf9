"""The campaign's hook: bisect the first findings of each candidate signature and move
them to the refined signature (culprit op, fusion kind and curing pass filled in), so
the same bug found from different programs is one signature and different bugs are not.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import structlog

from xla_sentinel.bisect.lab import LabError
from xla_sentinel.bisect.pipeline import BisectError, bisect_finding
from xla_sentinel.core.model import BISECTABLE, COMPILER_FAILURES, CULPRIT_FIELDS, Finding, Verdict
from xla_sentinel.spec.campaign import BisectSpec
from xla_sentinel.storage.store import Store
from xla_sentinel.triage import known_bugs
from xla_sentinel.triage.signature import signature_of

log = structlog.get_logger("xla_sentinel.bisect")


def refine_finding(store: Store, out_dir: Path, finding: Finding, spec: BisectSpec,
                   timeout: float = 120.0) -> Finding:
    """Bisect a stored finding if its candidate signature still has bisections left; returns
    the finding, re-signed when the bisector localized it.

    A crash or compile error's candidate signature already holds its canonical error text,
    so once one of its findings is localized the later ones take the same refined
    signature without a bisection. A wrong result's candidate (verdict, target, dtype)
    covers many bugs: its unbisected findings keep the candidate."""
    if not spec.enabled or finding.verdict not in BISECTABLE:
        return finding
    candidate = finding.signature
    alias_key = f"refined:{candidate}"
    if not store.claim_bisection(candidate, spec.perSignature):
        alias = store.get_meta(alias_key)
        if alias is None or finding.verdict not in COMPILER_FAILURES:
            return finding
        return _resign(store, Path(out_dir), finding, json.loads(alias))
    try:
        result = bisect_finding(Path(out_dir) / finding.dir, timeout=timeout,
                                reduce_case=spec.reduce)
    except (BisectError, LabError) as e:
        log.warning("bisection failed", finding=finding.id, error=str(e))
        return finding
    if result["status"] != "localized":
        log.info("bisected", finding=finding.id, status=result["status"])
        return _over_releases(store, Path(out_dir), finding, spec, timeout)
    culprit = {k: result[k] for k in CULPRIT_FIELDS}
    # No repro bundle where its repro.py did not show the failure (bundle.py's gate: a
    # buffer finding's repro checks numbers only); the culprit stands without one.
    culprit["repro"] = str(Path(finding.dir) / result["repro"]) if result.get("repro") else None
    if finding.verdict in COMPILER_FAILURES and store.get_meta(alias_key) is None:
        store.set_meta(alias_key, json.dumps(culprit))
    refined = _resign(store, Path(out_dir), finding, culprit)
    return _over_releases(store, Path(out_dir), refined, spec, timeout)


def _over_releases(store: Store, out_dir: Path, finding: Finding, spec: BisectSpec,
                   timeout: float) -> Finding:
    """With `bisect.versions`, the bisected finding over jaxlib releases too: the result
    in its finding.json and its (refined) signature's version fields (docs/versions.md).
    A range that cannot be searched is logged; the campaign goes on."""
    if not spec.versions or finding.verdict is Verdict.HANG:
        return finding
    from xla_sentinel.bisect.versions import VersionBisectError, bisect_versions

    try:
        result = bisect_versions(out_dir / finding.dir, spec.versions, timeout, store=store)
    except VersionBisectError as e:
        log.warning("version bisection failed", finding=finding.id, error=str(e))
        return finding
    log.info("bisected over releases", finding=finding.id, status=result["status"],
             introduced_in=result.get("introducedIn"), last_good=result.get("lastGood"))
    return finding


def _resign(store: Store, out_dir: Path, finding: Finding, culprit: dict[str, Any]) -> Finding:
    """`culprit`: the CULPRIT_FIELDS and the repro bundle's folder."""
    refined = dataclasses.replace(finding, **{k: culprit[k] for k in CULPRIT_FIELDS})
    path = out_dir / finding.dir / "finding.json"
    on_disk = json.loads(path.read_text())
    # The bisector matched the known bugs with the program at hand (pipeline._record), which
    # rules that read the program need; an alias's finding was not bisected. Matched first:
    # a known bug is its own signature (signature_id).
    refined.known_bug = known_bugs.match(refined) or on_disk.get("known_bug") or finding.known_bug
    refined.signature = signature_of(refined)
    store.resign_finding(finding.signature, refined, culprit["repro"])
    on_disk.update({**culprit, "signature": refined.signature,
                    "candidate_signature": finding.signature})
    path.write_text(json.dumps(on_disk, indent=1))
    log.info("signed", finding=finding.id, signature=refined.signature,
             **{k: getattr(refined, k) for k in CULPRIT_FIELDS})
    return refined
