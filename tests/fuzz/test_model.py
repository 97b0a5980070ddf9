"""The domain model: one Finding record that finding.json and the store both round-trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xla_sentinel.core.model import Finding, Verdict
from xla_sentinel.storage.store import Store


def _finding() -> Finding:
    return Finding(id="f1", campaign="c", program="s1-i2", target="O0", verdict="crash", dtype="f32",
                   evidence={"error": "worker exited with code -6 (SIGABRT)", "plugins": []},
                   dir="findings/f1", time="2026-01-01T00:00:00+00:00", signature="abc")


def test_finding_json_round_trips_and_the_verdict_is_the_enum() -> None:
    f = _finding()
    again = Finding.from_json(json.loads(json.dumps(f.to_json())))
    assert again == f and again.verdict is Verdict.CRASH


def test_the_store_gives_back_the_finding_it_was_given(tmp_path: Path) -> None:
    store = Store(tmp_path / "campaign.sqlite")
    store.set_meta("name", "c")
    try:
        assert store.add_finding(_finding())
        assert not store.add_finding(_finding())  # the same id twice is one finding
        assert store.findings() == [_finding()]
        [sig] = store.signatures()
        assert (sig.id, sig.verdict, sig.count, sig.repro) == ("abc", Verdict.CRASH, 1, "findings/f1")
    finally:
        store.close()


def test_an_unknown_verdict_is_refused() -> None:
    with pytest.raises(ValueError, match="plugin_error"):
        Finding.from_json({**_finding().to_json(), "verdict": "plugin_error"})
