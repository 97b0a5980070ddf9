"""Work for agents, handed out with leases so that two agents never take the same task.

A task is one unit an agent role works on: a coverage gap (stress), a failure report
(reproduce), a signature without a reproducer or cure (fix). The queue is a SQLite file
beside the campaign's store (OUT/agents.sqlite), so every agent process of a campaign, on
one machine or a shared volume, takes from the same queue: `lease` picks a task and marks
it leased in one IMMEDIATE transaction (SQLite's write lock), so a second agent cannot
pick it between the read and the write. A lease that runs out (the agent died) makes the
task free again; `finish` by anyone but the holder of the lease is refused.

A task fails an attempt when its agent gives it back (a crash, a budget stop) or dies
holding it; one taken `max_attempts` times and free again is not handed out a further
time but dropped (state `dropped`, its failures as the result): a task that always fails
would otherwise be taken forever, spending tokens each time. What each attempt spent
(`spend.Spend`) is added to the task, so the campaign's spending is the sum over tasks.

In a cluster, the agent pods of a campaign share one queue of the same interface whose
tasks are Leases (`kube_tasks.KubeTaskQueue`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The roles are declared with the schema (spec.agents names them).
from xla_sentinel.agents.spend import Spend
from xla_sentinel.core.errors import UserError
from xla_sentinel.spec.campaign import AGENT_ROLES as ROLES

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  role TEXT NOT NULL,
  key TEXT NOT NULL UNIQUE,
  payload TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'open',
  holder TEXT,
  lease_until REAL,
  result TEXT,
  created REAL NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  spent TEXT
);
"""
# Columns added since the first schema, for a queue file an older version made.
ADDED_COLUMNS = {"attempts": "INTEGER NOT NULL DEFAULT 0", "spent": "TEXT"}
MAX_ATTEMPTS = 3  # spec.agents.taskAttempts' default
FAILURES_KEPT = 5  # the newest failures a task's result keeps


class QueueError(UserError, ValueError):
    """A bad role, or a task finished by an agent that does not hold it."""


@dataclass(frozen=True)
class Task:
    id: int | str  # a row id here, a Lease name in kube_tasks.py
    role: str
    key: str
    payload: dict[str, Any]
    holder: str | None = None
    lease_until: float | None = None


def dropped_result(attempts: int, previous: dict[str, Any] | None) -> dict[str, Any]:
    """A dropped task's result: how many attempts, and their failures as recorded."""
    failures = list((previous or {}).get("failures") or [])
    return {"error": f"dropped after {attempts} failed attempts", "attempts": attempts, "failures": failures}


def failed_result(previous: dict[str, Any] | None, reason: str) -> dict[str, Any]:
    """A task's result after a failed attempt: the newest FAILURES_KEPT reasons."""
    failures = [*list((previous or {}).get("failures") or []), reason or "given back"]
    return {"failures": failures[-FAILURES_KEPT:]}


class TaskQueue:
    def __init__(self, path: Path, max_attempts: int = MAX_ATTEMPTS) -> None:
        if max_attempts < 1:
            raise QueueError(f"max_attempts: {max_attempts}; at least 1")
        self.max_attempts = max_attempts
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are ours (BEGIN IMMEDIATE), not sqlite3's.
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        have = {r[1] for r in self.db.execute("PRAGMA table_info(tasks)")}
        for column, kind in ADDED_COLUMNS.items():
            if column not in have:
                self.db.execute(f"ALTER TABLE tasks ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self.db.close()

    def put(self, role: str, key: str, payload: dict[str, Any]) -> bool:
        """Add a task unless one with `key` exists (a gap or a signature is queued once)."""
        if role not in ROLES:
            raise QueueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
        cur = self.db.execute("INSERT OR IGNORE INTO tasks (role, key, payload, created) VALUES (?, ?, ?, ?)",
                              (role, key, json.dumps(payload, sort_keys=True), time.time()))
        return cur.rowcount == 1

    def lease(self, role: str, agent: str, seconds: float) -> Task | None:
        """The oldest free task of `role`, now held by `agent` for `seconds`; None when none.
        A free task already taken `max_attempts` times is dropped on the way."""
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            while True:
                row = self.db.execute(
                    "SELECT id, role, key, payload, attempts, result FROM tasks WHERE role = ? AND "
                    "(state = 'open' OR (state = 'leased' AND lease_until < ?)) ORDER BY id LIMIT 1",
                    (role, now)).fetchone()
                if row is None:
                    self.db.execute("COMMIT")
                    return None
                if row[4] >= self.max_attempts:
                    result = dropped_result(row[4], json.loads(row[5]) if row[5] else None)
                    self.db.execute("UPDATE tasks SET state = 'dropped', holder = NULL, lease_until = NULL, "
                                    "result = ? WHERE id = ?", (json.dumps(result), row[0]))
                    continue
                until = now + seconds
                self.db.execute("UPDATE tasks SET state = 'leased', holder = ?, lease_until = ?, "
                                "attempts = attempts + 1 WHERE id = ?", (agent, until, row[0]))
                self.db.execute("COMMIT")
                break
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return Task(row[0], row[1], row[2], json.loads(row[3]), agent, until)

    def _add_spent(self, task: Task, spent: Spend | None) -> None:
        if spent is None or spent == Spend():
            return
        row = self.db.execute("SELECT spent FROM tasks WHERE id = ?", (task.id,)).fetchone()
        before = Spend.from_json(json.loads(row[0]) if row and row[0] else None)
        self.db.execute("UPDATE tasks SET spent = ? WHERE id = ?", (json.dumps((before + spent).to_json()), task.id))

    def finish(self, task: Task, agent: str, result: dict[str, Any], spent: Spend | None = None) -> None:
        """Mark a held task done with what came of it (and what this attempt spent)."""
        cur = self.db.execute("UPDATE tasks SET state = 'done', result = ? WHERE id = ? AND holder = ? "
                              "AND state = 'leased'", (json.dumps(result, default=str), task.id, agent))
        if cur.rowcount != 1:
            raise QueueError(f"task {task.id} ({task.key}) is not held by {agent}")
        self._add_spent(task, spent)

    def release(self, task: Task, agent: str, reason: str = "", spent: Spend | None = None) -> None:
        """Give a held task back unfinished (a budget stopped the agent, or it crashed): a
        failed attempt, `reason` recorded in its result."""
        row = self.db.execute("SELECT result FROM tasks WHERE id = ? AND holder = ? AND state = 'leased'",
                              (task.id, agent)).fetchone()
        if row is None:
            return
        result = failed_result(json.loads(row[0]) if row[0] else None, reason)
        self.db.execute("UPDATE tasks SET state = 'open', holder = NULL, lease_until = NULL, result = ? "
                        "WHERE id = ? AND holder = ? AND state = 'leased'", (json.dumps(result), task.id, agent))
        self._add_spent(task, spent)

    def spent(self) -> Spend:
        """What every task of the queue spent, summed."""
        out = Spend()
        for (raw,) in self.db.execute("SELECT spent FROM tasks WHERE spent IS NOT NULL"):
            out += Spend.from_json(json.loads(raw))
        return out

    def tasks(self, role: str | None = None) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT id, role, key, payload, state, holder, result, attempts, spent FROM tasks"
                               + (" WHERE role = ?" if role else "") + " ORDER BY id",
                               (role,) if role else ()).fetchall()
        return [{"id": r[0], "role": r[1], "key": r[2], "payload": json.loads(r[3]), "state": r[4],
                 "holder": r[5], "result": json.loads(r[6]) if r[6] else None, "attempts": r[7],
                 "spent": Spend.from_json(json.loads(r[8]) if r[8] else None).to_json()} for r in rows]
