"""The swarm's task queue on the real API server: tasks as coordination.k8s.io/v1 Leases
(agents/kube_tasks.py), taken by agents that each log in as the chart's agent
ServiceAccount (its Role is all they may use). Agents race in threads with clients of
their own; the API server's optimistic concurrency decides, as between pods."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import kubernetes
import pytest
from controlplane.cluster import ControlPlane
from controlplane.kit import Api, chart_operator_flags
from xla_sentinel.agents.kube_tasks import KubeTaskQueue, lease_name
from xla_sentinel.agents.tasks import QueueError

from .conftest import as_service_account

AGENT_SA = chart_operator_flags()["--agent-service-account"]


@pytest.fixture
def agent_kubeconfig(control_plane: ControlPlane, api: Api, ns: str) -> Path:
    return as_service_account(control_plane, api, ns, AGENT_SA)


def queue(kubeconfig: Path, ns: str, campaign: str = "nightly") -> KubeTaskQueue:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    return KubeTaskQueue(kubernetes.client.CustomObjectsApi(client), ns, campaign)


def test_racing_agents_never_take_one_task_twice(agent_kubeconfig: Path, ns: str) -> None:
    keys = [f"gap:op:op{i}" for i in range(12)]
    agents = [f"stress-{i}" for i in range(4)]
    taken: list[tuple[str, str]] = []
    lock = threading.Lock()
    start = threading.Barrier(len(agents))
    errors: list[BaseException] = []

    def agent(name: str) -> None:
        try:
            q = queue(agent_kubeconfig, ns)
            start.wait()
            for key in keys:  # every agent seeds every task, as every pod does
                q.put("stress", key, {"op": key})
            while (task := q.lease("stress", name, 600)) is not None:
                with lock:
                    taken.append((task.key, name))
                q.finish(task, name, {"by": name})
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=agent, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    counts = Counter(k for k, _ in taken)
    assert sorted(counts) == sorted(keys) and set(counts.values()) == {1}, counts
    rows = queue(agent_kubeconfig, ns).tasks("stress")
    assert len(rows) == len(keys)  # seeded four times, queued once
    for row in rows:
        assert row["state"] == "done" and row["transitions"] == 1
        assert row["result"] == {"by": row["holder"]} and (row["key"], row["holder"]) in taken


def test_only_the_holder_finishes_and_a_dead_agent_s_task_is_taken_again(
        agent_kubeconfig: Path, ns: str) -> None:
    q = queue(agent_kubeconfig, ns)
    assert q.put("fix", "signature:0123456789abcdef", {"signature": "0123456789abcdef"})
    assert not q.put("fix", "signature:0123456789abcdef", {"other": 1})
    with pytest.raises(QueueError):
        q.put("triage", "x", {})
    task = q.lease("fix", "fix-0", 1)
    assert task is not None and task.payload == {"signature": "0123456789abcdef"}
    assert task.id == lease_name("nightly", "signature:0123456789abcdef")
    assert q.lease("fix", "fix-1", 60) is None  # held
    with pytest.raises(QueueError):
        q.finish(task, "fix-1", {"claims": []})
    time.sleep(2.2)  # fix-0 died: its lease runs out
    again = q.lease("fix", "fix-1", 60)
    assert again is not None and again.key == task.key
    with pytest.raises(QueueError):
        q.finish(task, "fix-0", {})  # the old holder lost it
    q.release(again, "fix-1")  # out of budget: back at once
    third = q.lease("fix", "fix-2", 60)
    assert third is not None
    q.finish(third, "fix-2", {"ok": True})
    assert q.lease("fix", "fix-3", 60) is None  # done is done
    (row,) = q.tasks("fix")
    assert row["holder"] == "fix-2" and row["transitions"] == 3 and row["result"] == {"ok": True}
    # Another campaign's queue is its own.
    assert queue(agent_kubeconfig, ns, "other").lease("fix", "fix-0", 60) is None


def test_a_task_that_keeps_failing_is_dropped_and_its_spending_kept(agent_kubeconfig: Path, ns: str) -> None:
    """Each attempt (given back, or its holder died) is a transition of the Lease; a task
    taken its last time and free again is dropped with its failures, not handed out again;
    what every attempt spent stays on the task, and the queue sums it."""
    from xla_sentinel.agents.spend import Spend

    q = queue(agent_kubeconfig, ns)
    q.max_attempts = 3
    q.put("fix", "signature:poison", {"signature": "poison"})
    q.put("fix", "signature:fine", {"signature": "fine"})
    for n in (1, 2):
        task = q.lease("fix", f"fix-{n}", 600)
        assert task is not None and task.key == "signature:poison"
        q.release(task, f"fix-{n}", f"crash: attempt {n}", Spend(1000, 0.5, 0))
    dying = q.lease("fix", "fix-3", 1)  # the third holder dies: its lease runs out
    assert dying is not None and dying.key == "signature:poison"
    time.sleep(2.5)
    fine = q.lease("fix", "fix-4", 600)
    assert fine is not None and fine.key == "signature:fine"  # the poison task is dropped on the way
    q.finish(fine, "fix-4", {"ok": True}, Spend(10, 0.0, 10))
    rows = {r["key"]: r for r in q.tasks("fix")}
    poison = rows["signature:poison"]
    assert poison["state"] == "dropped" and poison["attempts"] == 3 and poison["holder"] is None
    assert poison["result"] == {"error": "dropped after 3 failed attempts", "attempts": 3,
                                "failures": ["crash: attempt 1", "crash: attempt 2"]}
    assert q.lease("fix", "fix-5", 600) is None
    assert q.spent() == Spend(2010, 1.0, 10)
