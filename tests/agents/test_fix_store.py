"""The store's fixes table on its own: a verified cure kept beside its signature, the latest
one kept, none for a signature the store does not hold, none read from a store file
written before the table (the fix agent's end-to-end tests write it through the gate)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from xla_sentinel.core.model import Finding
from xla_sentinel.storage.store import Store, StoreError, read_fixes


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "campaign.sqlite")
    store.add_finding(Finding(id="f1", campaign="c", program="p1", target="default", verdict="mismatch",
                              dir="findings/f1", time="2026-01-01T00:00:00+00:00", signature="sig1"))
    return store


def test_the_latest_verified_cure_is_kept_beside_its_signature(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.record_fix("sig1", cure="--xla_disable_hlo_passes=algsimp", kind="flags", agent="a", model="m",
                     claim=1, reason="cures it")
    store.record_fix("sig1", cure="rewrite (jax) sha256:abc", kind="rewrite", agent="b", model="m",
                     claim=2, reason="cures it too")
    with pytest.raises(StoreError, match="no signature nope"):
        store.record_fix("nope", cure="x", kind="flags", agent="a", model="m", claim=3, reason="")
    fixes = store.fixes()
    store.close()
    assert list(fixes) == ["sig1"]
    assert {k: fixes["sig1"][k] for k in ("cure", "kind", "agent", "claim")} == {
        "cure": "rewrite (jax) sha256:abc", "kind": "rewrite", "agent": "b", "claim": 2}


def test_a_store_written_before_the_fixes_table_reads_as_none(tmp_path: Path) -> None:
    _store(tmp_path).close()
    with sqlite3.connect(tmp_path / "campaign.sqlite") as db:
        db.execute("DROP TABLE fixes")
    con = sqlite3.connect(f"file:{tmp_path / 'campaign.sqlite'}?mode=ro", uri=True)
    try:
        assert read_fixes(con) == {}
    finally:
        con.close()
