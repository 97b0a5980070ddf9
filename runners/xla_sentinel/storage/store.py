"""The campaign store: one SQLite file in the output folder, written as findings happen.

Every finding is committed before it is reported, so Ctrl-C or a kill loses nothing
already found; the programs table lets a second run into the same folder resume.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from xla_sentinel.core.errors import UserError
from xla_sentinel.core.model import (
    FINDING_FIELDS,
    SIGNATURE_FIELDS,
    VERSION_FIELDS,
    Finding,
    ProgramStatus,
    Signature,
    Verdict,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS programs (
    idx INTEGER PRIMARY KEY, id TEXT NOT NULL, ops INTEGER, status TEXT NOT NULL,
    executions INTEGER NOT NULL, seconds REAL NOT NULL, stats TEXT);
CREATE TABLE IF NOT EXISTS findings (
    id TEXT PRIMARY KEY, program TEXT NOT NULL, target TEXT NOT NULL, verdict TEXT NOT NULL,
    signature TEXT NOT NULL, dtype TEXT, culprit_op TEXT, culprit_pass TEXT, fusion_kind TEXT,
    evidence TEXT NOT NULL, dir TEXT NOT NULL, known_bug TEXT, time TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS signatures (
    id TEXT PRIMARY KEY, verdict TEXT NOT NULL, target TEXT, culprit_op TEXT, culprit_pass TEXT,
    fusion_kind TEXT, dtype TEXT, count INTEGER NOT NULL, first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL, repro TEXT, known_bug TEXT, bisected INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS fixes (
    signature TEXT PRIMARY KEY, cure TEXT NOT NULL, kind TEXT NOT NULL, agent TEXT NOT NULL,
    model TEXT NOT NULL, claim INTEGER NOT NULL, reason TEXT NOT NULL, time TEXT NOT NULL);
"""
# The fixes table: a signature's verified cure (the latest), as the agents' gate verified it
# (agents/gate.py; the claim is the row of OUT/agents.sqlite's claims table). Its columns.
FIX_COLUMNS = ("signature", "cure", "kind", "agent", "model", "claim", "reason", "time")
# Signature columns added after the first schema, each with its type: a store file written
# before them gets them on open (ALTER TABLE), and readers of a file they cannot migrate
# (report.py opens it read-only) take the missing ones as None.
ADDED_SIGNATURE_COLUMNS = {f: "TEXT" for f in VERSION_FIELDS}
# The findings table holds every Finding field but the campaign (one store, one campaign:
# its name is in meta).
FINDING_COLUMNS = tuple(f for f in FINDING_FIELDS if f != "campaign")
_INSERT_FINDING = (f"INSERT OR IGNORE INTO findings ({', '.join(FINDING_COLUMNS)}) "
                   f"VALUES ({', '.join('?' * len(FINDING_COLUMNS))})")


class StoreError(UserError, RuntimeError):
    pass


class Store:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(SCHEMA)
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a usable xla-sentinel store ({e})") from None
        self.lock = threading.Lock()

    def _migrate(self) -> None:
        have = _columns(self.db, "signatures")
        for column, kind in ADDED_SIGNATURE_COLUMNS.items():
            if column not in have:
                self.db.execute(f"ALTER TABLE signatures ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self.db.close()

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def done_indices(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT idx FROM programs")}

    def record_program(self, idx: int, pid: str, ops: int, status: ProgramStatus, executions: int,
                       seconds: float, stats: dict[str, Any]) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO programs VALUES (?,?,?,?,?,?,?)",
                            # Refused here, not when totals() reads it back.
                            (idx, pid, ops, ProgramStatus(status), executions, seconds,
                             json.dumps(stats)))

    def add_finding(self, f: Finding) -> bool:
        """Insert a finding and bump its signature; False if this finding was already stored."""
        row = {**f.to_json(), "evidence": json.dumps(f.evidence)}
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                cur = self.db.execute(_INSERT_FINDING, [row[c] for c in FINDING_COLUMNS])
                new = cur.rowcount == 1
                if new:
                    self.db.execute(
                        """INSERT INTO signatures (id, verdict, target, culprit_op, culprit_pass,
                           fusion_kind, dtype, count, first_seen, last_seen, repro, known_bug)
                           VALUES (?,?,?,?,?,?,?,1,?,?,?,?)
                           ON CONFLICT(id) DO UPDATE SET count=count+1, last_seen=excluded.last_seen""",
                        (f.signature, f.verdict, f.target, f.culprit_op, f.culprit_pass,
                         f.fusion_kind, f.dtype, f.time, f.time, f.dir, f.known_bug))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return new

    def update_signature(self, sig_id: str, **fields: Any) -> None:
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.lock:
            self.db.execute(f"UPDATE signatures SET {cols} WHERE id=?", (*fields.values(), sig_id))

    # --- bisection (xla_sentinel.bisect.refine) ---------------------------------------

    def claim_bisection(self, candidate: str, limit: int) -> bool:
        """Count one bisection against a candidate signature if fewer than `limit` were made
        (atomic: slots run in threads). Kept in meta, which outlives the signature row."""
        key = f"bisected:{candidate}"
        with self.lock:
            row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            done = int(row[0]) if row else 0
            if done >= limit:
                return False
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(done + 1)))
            return True

    def resign_finding(self, old_sig: str, f: Finding, repro: str | None) -> None:
        """Move a stored finding from its candidate signature `old_sig` to the refined one
        `f` carries (culprit fields filled in; `repro` its bundle); a signature left with no
        findings goes."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute(
                    "UPDATE findings SET signature=?, culprit_op=?, culprit_pass=?, fusion_kind=? "
                    "WHERE id=?", (f.signature, f.culprit_op, f.culprit_pass, f.fusion_kind, f.id))
                self.db.execute("UPDATE signatures SET count=count-1 WHERE id=?", (old_sig,))
                self.db.execute("DELETE FROM signatures WHERE id=? AND count<=0", (old_sig,))
                self.db.execute(
                    """INSERT INTO signatures (id, verdict, target, culprit_op, culprit_pass,
                       fusion_kind, dtype, count, first_seen, last_seen, repro, known_bug, bisected)
                       VALUES (?,?,?,?,?,?,?,1,?,?,?,?,1)
                       ON CONFLICT(id) DO UPDATE SET count=count+1, last_seen=excluded.last_seen,
                       bisected=bisected+1""",
                    (f.signature, f.verdict, f.target, f.culprit_op, f.culprit_pass, f.fusion_kind,
                     f.dtype, f.time, f.time, repro, f.known_bug))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def signature_count(self, sig_id: str) -> int:
        row = self.db.execute("SELECT count FROM signatures WHERE id=?", (sig_id,)).fetchone()
        return row[0] if row else 0

    def findings(self) -> list[Finding]:
        campaign = self.get_meta("name") or ""
        cur = self.db.execute(f"SELECT {', '.join(FINDING_COLUMNS)} FROM findings ORDER BY time")
        return [Finding(**{**dict(zip(FINDING_COLUMNS, row, strict=True)),
                           "evidence": json.loads(row[FINDING_COLUMNS.index("evidence")]),
                           "campaign": campaign}) for row in cur]

    def signatures(self) -> list[Signature]:
        return read_signatures(self.db)

    def record_versions(self, sig_id: str, fields: dict[str, str | None]) -> bool:
        """Set a signature's version fields (model.VERSION_FIELDS) from a version bisection
        or verification; False when the store holds no such signature."""
        unknown = set(fields) - set(VERSION_FIELDS)
        if unknown:
            raise ValueError(f"not version fields of a signature: {sorted(unknown)}")
        if not fields:
            return self.signature_count(sig_id) > 0
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.lock:
            cur = self.db.execute(f"UPDATE signatures SET {cols} WHERE id=?", (*fields.values(), sig_id))
        return cur.rowcount == 1

    def record_fix(self, sig_id: str, *, cure: str, kind: str, agent: str, model: str, claim: int,
                   reason: str) -> None:
        """Keep a verified cure beside its signature (the latest replaces an earlier one)."""
        if self.signature_count(sig_id) == 0:
            raise StoreError(f"{self.path}: no signature {sig_id}")
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self.lock:
            self.db.execute(f"INSERT OR REPLACE INTO fixes ({', '.join(FIX_COLUMNS)}) VALUES (?,?,?,?,?,?,?,?)",
                            (sig_id, cure, kind, agent, model, claim, reason, now))

    def fixes(self) -> dict[str, dict[str, Any]]:
        return read_fixes(self.db)

    def programs_with_status(self, status: ProgramStatus) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT id, stats FROM programs WHERE status=? ORDER BY idx", (status,))
        return [{"program": pid, **json.loads(stats or "{}")} for pid, stats in rows]

    def totals(self) -> dict[str, Any]:
        programs, executions, seconds = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(executions),0), COALESCE(SUM(seconds),0) FROM programs"
        ).fetchone()
        by_status = {ProgramStatus(s): n for s, n in
                     self.db.execute("SELECT status, COUNT(*) FROM programs GROUP BY status")}
        by_verdict = {Verdict(v): n for v, n in
                      self.db.execute("SELECT verdict, COUNT(*) FROM findings GROUP BY verdict")}
        return {"programs": programs, "executions": executions, "program_seconds": seconds,
                "status": by_status, "findings": by_verdict}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def read_signatures(db: sqlite3.Connection) -> list[Signature]:
    """Every signature of an open store file, first seen first; columns a file written
    before them lacks (ADDED_SIGNATURE_COLUMNS) read as None."""
    have = _columns(db, "signatures")
    cols = [f for f in SIGNATURE_FIELDS if f in have]
    cur = db.execute(f"SELECT {', '.join(cols)} FROM signatures ORDER BY first_seen")
    return [Signature(**dict(zip(cols, row, strict=True))) for row in cur]


def read_fixes(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """The verified cure of each signature that has one; none from a file written before
    the fixes table."""
    if not _columns(db, "fixes"):
        return {}
    cur = db.execute(f"SELECT {', '.join(FIX_COLUMNS)} FROM fixes")
    return {row[0]: dict(zip(FIX_COLUMNS[1:], row[1:], strict=True)) for row in cur}
