"""Work for agents, handed out with leases so that two agents never take the same task.

A task is one unit an agent role works on: a coverage gap (stress), a failure report
(reproduce), a signature without a reproducer or cure (fix). The queue is a SQLite file
beside the campaign's store (OUT/agents.sqlite), so every agent process of a campaign, on
one machine or a shared volume, takes from the same queue: `lease` picks a task and marks
it leased in one IMMEDIATE transaction (SQLite's write lock), so a second agent cannot
pick it between the read and the write. A lease that runs out (the agent died) makes the
task free again; `finish` by anyone but the holder of the lease is refused.

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
  created REAL NOT NULL
);
"""


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


class TaskQueue:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are ours (BEGIN IMMEDIATE), not sqlite3's.
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

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
        """The oldest free task of `role`, now held by `agent` for `seconds`; None when none."""
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute(
                "SELECT id, role, key, payload FROM tasks WHERE role = ? AND "
                "(state = 'open' OR (state = 'leased' AND lease_until < ?)) ORDER BY id LIMIT 1",
                (role, now)).fetchone()
            if row is None:
                self.db.execute("COMMIT")
                return None
            until = now + seconds
            self.db.execute("UPDATE tasks SET state = 'leased', holder = ?, lease_until = ? WHERE id = ?",
                            (agent, until, row[0]))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return Task(row[0], row[1], row[2], json.loads(row[3]), agent, until)

    def finish(self, task: Task, agent: str, result: dict[str, Any]) -> None:
        """Mark a held task done with what came of it."""
        cur = self.db.execute("UPDATE tasks SET state = 'done', result = ? WHERE id = ? AND holder = ? "
                              "AND state = 'leased'", (json.dumps(result, default=str), task.id, agent))
        if cur.rowcount != 1:
            raise QueueError(f"task {task.id} ({task.key}) is not held by {agent}")

    def release(self, task: Task, agent: str) -> None:
        """Give a held task back unfinished (the agent ran out of budget)."""
        self.db.execute("UPDATE tasks SET state = 'open', holder = NULL, lease_until = NULL "
                        "WHERE id = ? AND holder = ? AND state = 'leased'", (task.id, agent))

    def tasks(self, role: str | None = None) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT id, role, key, payload, state, holder, result FROM tasks"
                               + (" WHERE role = ?" if role else "") + " ORDER BY id",
                               (role,) if role else ()).fetchall()
        return [{"id": r[0], "role": r[1], "key": r[2], "payload": json.loads(r[3]), "state": r[4],
                 "holder": r[5], "result": json.loads(r[6]) if r[6] else None} for r in rows]
