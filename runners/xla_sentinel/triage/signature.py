"""Signatures: a stable id per distinct bug, so one bug found many times alerts once.

The id hashes the fields that describe the bug, not the program that found it: verdict,
target, the culprit op in canonical form, dtype, fusion kind, the curing pass or flag,
and for crashes, compile errors and compile anomalies the error text with names and numbers
stripped.
Fields the bisector has not filled yet are None, which gives a coarser candidate
signature that bisection refines. A finding matched to a known bug is signed by that bug
alone: one bug found by fuzzing (a generated program, its dtype, its fusion, the cure
found on it) and by replaying a user's trace (another dtype, the op inside a call, another
cure) is one signature (issue 36).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from xla_sentinel.core.model import ERROR_SIGNED, Finding

# Finding fields (and the error text) that tell one bug from another.
FIELDS = ("verdict", "target", "culprit_op", "dtype", "fusion_kind", "culprit_pass", "error")


def canonical_error(text: str | None) -> str | None:
    """Crash/compile error text without the parts that vary between programs."""
    if not text:
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"%[\w.\-]+", "%_", first)
    first = re.sub(r"0x[0-9a-fA-F]+|\d+", "N", first)
    first = re.sub(r"\b[a-z]+N(?:xN)*x?[a-zN]*\b", "T", first)
    return first[:200]


def signature_id(fields: dict[str, Any]) -> str:
    """The signature of a finding given as its fields (`error` the evidence's error text);
    for a finding matched to a known bug (`known_bug`), the bug's."""
    if fields.get("known_bug"):
        return hashlib.sha256(json.dumps({"known_bug": fields["known_bug"]}).encode()).hexdigest()[:16]
    key = {f: fields.get(f) for f in FIELDS}
    if key["verdict"] in ERROR_SIGNED:
        key["error"] = canonical_error(fields.get("error"))
    else:
        key["error"] = None
    blob = json.dumps(key, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def signature_of(finding: Finding) -> str:
    """The finding's signature from its current fields: the candidate signature until
    bisection fills in the culprit, the refined one after; match the known bugs first
    (`known_bug` decides it)."""
    return signature_id({**finding.to_json(), "error": finding.error})


def configurations(findings: list[Finding]) -> dict[str, list[str]]:
    """Per signature, the configurations (targets, XLA float64 references) its findings
    show in, in the order the findings were stored: one bug that several configurations
    show is one signature (campaign/recording.py group_key), and this names them."""
    out: dict[str, dict[str, None]] = {}
    for f in findings:
        out.setdefault(f.signature, {})[f.target] = None
    return {sig: list(targets) for sig, targets in out.items()}
