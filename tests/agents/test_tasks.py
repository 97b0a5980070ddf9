"""The task queue: leases in a SQLite file, so that two agents never take the same task."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from xla_sentinel.agents.tasks import QueueError, TaskQueue


def _take_all(db: str, agent: str, results: multiprocessing.Queue[list[str]]) -> None:
    queue = TaskQueue(Path(db))
    taken = []
    while (task := queue.lease("stress", agent, 600)) is not None:
        taken.append(task.key)
        queue.finish(task, agent, {"by": agent})
    results.put(taken)


def test_two_agent_processes_never_take_the_same_task(tmp_path: Path) -> None:
    queue = TaskQueue(tmp_path / "agents.sqlite")
    for i in range(200):
        assert queue.put("stress", f"gap:{i}", {"i": i})
    assert not queue.put("stress", "gap:0", {"i": 0}), "a task key is queued once"
    ctx = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[list[str]] = ctx.Queue()
    procs = [ctx.Process(target=_take_all, args=(str(tmp_path / "agents.sqlite"), f"a{n}", results))
             for n in range(3)]
    for p in procs:
        p.start()
    taken = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    every = [k for t in taken for k in t]
    assert len(every) == len(set(every)) == 200, "a task was taken twice, or one never"
    done = queue.tasks("stress")
    assert all(t["state"] == "done" for t in done)
    assert {t["holder"] for t in done} == {t["result"]["by"] for t in done}


def test_an_expired_lease_frees_the_task_and_only_the_holder_finishes(tmp_path: Path) -> None:
    queue = TaskQueue(tmp_path / "agents.sqlite")
    queue.put("fix", "signature:abc", {"signature": "abc"})
    first = queue.lease("fix", "a", 0.2)
    assert first is not None and queue.lease("fix", "b", 60) is None
    with pytest.raises(QueueError, match="not held by b"):
        queue.finish(first, "b", {})
    time.sleep(0.3)
    second = queue.lease("fix", "b", 60)
    assert second is not None and second.id == first.id
    with pytest.raises(QueueError, match="not held by a"):
        queue.finish(first, "a", {})  # a's lease ran out; b holds it now
    queue.finish(second, "b", {"ok": True})
    with pytest.raises(QueueError, match="unknown role"):
        queue.put("review", "x", {})
