"""Signatures: a stable id per distinct bug, so one bug found many times alerts once.

The id hashes the fields that describe the bug, not the program that found it: verdict,
target, the culprit op in canonical form, dtype, fusion kind, the curing pass or flag,
and for crashes and compile errors the error text with names and numbers stripped.
Fields the bisector has not filled yet are None, which gives a coarser candidate
signature that bisection refines.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

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
    key = {f: fields.get(f) for f in FIELDS}
    if key["verdict"] in ("crash", "compile_error", "hang"):
        key["error"] = canonical_error(fields.get("error"))
    else:
        key["error"] = None
    blob = json.dumps(key, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
