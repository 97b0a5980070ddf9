"""A store file written before the signature's version fields still opens, and takes them.

tests/storage/data/store-before-versions.sqlite was written by runners/xla_sentinel/storage/store.py and
runners/xla_sentinel/core/model.py of commit d69cbd5 (before `introduced_in`, `last_good`, `verification`,
`verification_jaxlib`): one program, one mismatch finding of signature 0123456789abcdef,
campaign "old-campaign".
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from xla_sentinel.cli import main as cli
from xla_sentinel.core.model import VERSION_FIELDS
from xla_sentinel.storage.store import Store, read_signatures

OLD = Path(__file__).parent / "data" / "store-before-versions.sqlite"
SIG = "0123456789abcdef"


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    out = tmp_path / "campaign"
    out.mkdir()
    shutil.copy(OLD, out / "campaign.sqlite")
    return out / "campaign.sqlite"


def _columns(db: Path) -> set[str]:
    con = sqlite3.connect(db)
    try:
        return {row[1] for row in con.execute("PRAGMA table_info(signatures)")}
    finally:
        con.close()


def test_an_old_store_is_migrated_on_open_and_records_a_version_bisection(old_store: Path) -> None:
    assert not set(VERSION_FIELDS) & _columns(old_store)  # the file really is of the old schema
    store = Store(old_store)
    try:
        (sig,) = store.signatures()
        assert (sig.id, sig.count, sig.introduced_in, sig.verification) == (SIG, 1, None, None)
        assert store.record_versions(SIG, {"introduced_in": "0.10.2", "last_good": "0.10.1"})
        assert not store.record_versions("ffffffffffffffff", {"verification": "verified"})
        with pytest.raises(ValueError, match="count"):
            store.record_versions(SIG, {"count": "7"})  # only version fields go this way
        assert [f.id for f in store.findings()] == ["f0"]  # the old rows are all there
    finally:
        store.close()
    assert set(VERSION_FIELDS) <= _columns(old_store)
    store = Store(old_store)  # a second open finds nothing left to migrate
    try:
        (sig,) = store.signatures()
        assert (sig.introduced_in, sig.last_good, sig.verification_jaxlib) == ("0.10.2", "0.10.1", None)
    finally:
        store.close()


def test_a_reader_that_cannot_migrate_reads_the_old_file(old_store: Path) -> None:
    """report.py opens the store read-only: the missing columns read as None."""
    con = sqlite3.connect(f"file:{old_store}?mode=ro", uri=True)
    try:
        (sig,) = read_signatures(con)
    finally:
        con.close()
    assert (sig.id, sig.verdict, sig.last_good) == (SIG, "mismatch", None)
    assert not set(VERSION_FIELDS) & _columns(old_store)


def test_triage_lists_an_old_store_and_its_recorded_versions(
        old_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["triage", str(old_store.parent)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "introduced_in" not in header  # nothing recorded: no empty columns
    store = Store(old_store)
    store.record_versions(SIG, {"verification": "verified", "verification_jaxlib": "0.10.3"})
    store.close()
    assert cli.main(["triage", str(old_store.parent)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[-1] == "verification" and row.endswith("verified on 0.10.3")


def test_the_triage_page_rows_carry_the_recorded_versions(old_store: Path) -> None:
    from xla_sentinel.report.tables import signature_rows

    store = Store(old_store)
    store.record_versions(SIG, {"introduced_in": "<=0.5.3", "last_good": None})
    (row,) = signature_rows(old_store.parent, store.signatures(), old_store.parent)
    store.close()
    assert row.versions == "introduced in jaxlib <=0.5.3"
