"""Known XLA bugs: findings that match one are counted as known, not new.

Each entry in known_bugs.yaml names the fields a finding must match (any of verdict,
target, culprit_op, dtype, signature), a reproducer, and the evidence that XLA is wrong.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from .model import FINDING_FIELDS, Finding

KNOWN_BUGS_FILE = Path(__file__).with_name("known_bugs.yaml")
# The Finding fields a rule may name: what describes the bug, not the program or the time.
MATCH_FIELDS = tuple(f for f in FINDING_FIELDS
                     if f in ("verdict", "target", "culprit_op", "dtype", "signature", "fusion_kind"))


@cache
def entries(path: Path = KNOWN_BUGS_FILE) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text()) or {}
    bugs = data.get("bugs", [])
    for b in bugs:
        unknown = set(b.get("match", {})) - set(MATCH_FIELDS)
        if unknown or not b.get("match"):
            raise ValueError(f"{path}: bug {b.get('id')!r} has a bad match rule {sorted(unknown)}")
    return bugs


def match(finding: Finding, path: Path = KNOWN_BUGS_FILE) -> str | None:
    """The id of the known bug this finding is, or None if it is new."""
    for bug in entries(path):
        if all(getattr(finding, k) == v for k, v in bug["match"].items()):
            return str(bug["id"])
    return None
