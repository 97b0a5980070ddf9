"""Known XLA bugs: a finding that matches an entry is counted as known, not new."""

from __future__ import annotations

from pathlib import Path

import pytest
from xla_sentinel.core.model import Finding
from xla_sentinel.triage import known_bugs

REPO_ROOT = Path(__file__).resolve().parents[2]


def _finding(**fields: object) -> Finding:
    return Finding(**{"id": "f1", "campaign": "c", "program": "s1-i3", "target": "default",
                      "verdict": "mismatch", "dir": "findings/f1", "time": "t", **fields})


def test_shipped_list_is_well_formed() -> None:
    for bug in known_bugs.entries():
        assert bug["id"] and bug["title"] and bug["reproducer"] and bug["evidence"]
        assert (REPO_ROOT / bug["reproducer"]).exists(), bug["id"]


def test_match_needs_every_field_of_the_rule(tmp_path: Path) -> None:
    f = tmp_path / "bugs.yaml"
    f.write_text("bugs:\n- id: xla-1\n  match: {verdict: nan_mismatch, target: O0, dtype: f32}\n")
    record = {"verdict": "nan_mismatch", "target": "O0", "dtype": "f32", "signature": "abc"}
    assert known_bugs.match(_finding(**record), f) == "xla-1"
    assert known_bugs.match(_finding(**{**record, "target": "default"}), f) is None


def test_a_rule_on_an_unknown_field_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "bugs.yaml"
    f.write_text("bugs:\n- id: xla-2\n  match: {program: s1-i3}\n")
    with pytest.raises(ValueError, match="bad match rule"):
        known_bugs.match(_finding(), f)
