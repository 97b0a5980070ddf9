"""A freshly started operator (an upgrade, a failover) facing a campaign's many reports, on
the real control plane: kopf lists every WorkerReport at once, and the campaign's own
handling (a spec change rolled up into observedGeneration, its new revision's Job) must not
wait for their ingestion, which goes through a bounded backlog (runtime.Backlog) and loses
nothing.

The ingestion is held up for real, not mocked: the test holds the signatures' locks in the
operator's runtime, as an ingestion of the same signatures still in progress holds them.
Then every report's ingestion is outstanding however fast the machine is, so what is
asserted is an order (the spec change is rolled up while all of them wait), never a speed;
bench/operator_scale.py --restart measures the speed and the memory.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from controlplane.kit import Api
from xla_sentinel.cluster.report import (
    CAMPAIGN_LABEL,
    REPORT_LABEL,
    REVISION_LABEL,
    WORKER_LABEL,
    WorkerReport,
    label_value,
    report_name,
)
from xla_sentinel_operator.config import Config
from xla_sentinel_operator.kube import Kube, path
from xla_sentinel_operator.runtime import INGEST_WORKERS, Backlog

from .conftest import API, RunningOperator, campaign, create, eventually
from .test_lifecycle import jobs, status

REPORTS = 240  # a few hundred: thousands in a cluster (the bench), cheap here
SIGNATURES = [hashlib.sha256(f"restart{i}".encode()).hexdigest()[:16] for i in range(3)]


def report(ns: str, fc: dict[str, Any], revision: str, index: int) -> dict[str, Any]:
    """Worker `index`'s report as its reporter writes it: one finding, of one of SIGNATURES."""
    worker = f"main-{index}"
    body = WorkerReport(
        worker=worker,
        revision=revision,
        attempts=1,
        programs=10,
        executions=40,
        elapsed_s=5.0,
        updated="2026-12-07T06:00:00Z",
    )
    body.add_finding(
        {
            "id": f"f{index}",
            "program": f"p{index}",
            "target": "default",
            "verdict": "mismatch",
            "signature": SIGNATURES[index % len(SIGNATURES)],
            "culprit_op": "add",
            "dtype": "f32",
            "time": "2026-12-07T06:00:00Z",
        }
    )
    meta = fc["metadata"]
    return {
        "apiVersion": API,
        "kind": "WorkerReport",
        "metadata": {
            "name": report_name(meta["name"], worker, revision),
            "namespace": ns,
            "labels": {
                CAMPAIGN_LABEL: label_value(meta["name"]),
                REPORT_LABEL: "true",
                WORKER_LABEL: label_value(worker),
                REVISION_LABEL: label_value(revision),
            },
            "ownerReferences": [
                {
                    "apiVersion": API,
                    "kind": "FuzzCampaign",
                    "name": meta["name"],
                    "uid": meta["uid"],
                }
            ],
        },
        "spec": {
            "campaign": meta["name"],
            "worker": worker,
            "revision": revision,
            "report": body.to_json(),
        },
    }


def hits(api: Api, ns: str) -> dict[str, int]:
    return {
        s["spec"]["signature"]: (s.get("status") or {}).get("count", 0)
        for s in api.all(f"{API}/bugsignatures", ns)
    }


async def test_a_restarted_operator_rolls_up_a_spec_change_while_its_reports_wait(
    api: Api,
    ns: str,
    client: Kube,
    operator_config: Callable[..., Config],
    start_operator: Callable[..., Awaitable[RunningOperator]],
) -> None:
    first = await start_operator()
    fc = await create(client, campaign(ns, workers=2, budget={"continuous": True}))
    rev = await eventually(lambda: status(api, ns).get("revision"))
    (job,) = await eventually(lambda: jobs(api, ns))
    await first.stop()

    # Written while no operator runs: the next one gets them all in its first listing.
    reports = path(API, "workerreports", ns)
    await asyncio.gather(*(client.create(reports, report(ns, fc, rev, i)) for i in range(REPORTS)))

    op = RunningOperator(operator_config())
    rt = op.runtime
    # Past a quarter of the reports the backlog keeps only names: those ingestions read
    # their report from the API at their turn.
    rt.backlog = Backlog(bodies_kept=REPORTS // 4)
    held = [rt.lock(ns, sig) for sig in SIGNATURES]
    for lock in held:
        await lock.acquire()  # not yet bound to a loop: the operator's loop waits on it
    await op.start()
    try:
        # Every report is listed and waits; only INGEST_WORKERS of them are taken up.
        await eventually(lambda: len(rt.backlog) == REPORTS, timeout=120)
        assert len(rt.backlog.running) <= INGEST_WORKERS
        assert rt.backlog.kept == sum(r is not None for _, r in rt.backlog.pending.values())
        assert rt.backlog.kept <= REPORTS // 4
        assert not hits(api, ns)  # nothing ingested yet: every signature is held

        generation = api.patch(f"{API}/fuzzcampaigns", ns, "nightly", {"spec": {"seed": 7}})[
            "metadata"
        ]["generation"]

        def rolled_up() -> str | None:
            st = status(api, ns)
            fresh = st.get("observedGeneration") == generation and st.get("revision") != rev
            return st["revision"] if fresh else None

        new = await eventually(rolled_up, timeout=120)
        await eventually(
            lambda: any(
                j["metadata"]["uid"] != job["metadata"]["uid"] and new in j["metadata"]["name"]
                for j in jobs(api, ns)
            )
        )
        # Rolled up while every report still waited: none was dropped or ingested meanwhile.
        assert len(rt.backlog) == REPORTS
        assert not hits(api, ns)
    finally:
        loop = rt._tasks[0].get_loop()  # the operator's: a lock is released on its own loop
        for lock in held:
            loop.call_soon_threadsafe(lock.release)
    try:
        # Then every report of the old revision is ingested, each counted once.
        await eventually(
            lambda: (
                hits(api, ns) == {sig: REPORTS // len(SIGNATURES) for sig in SIGNATURES}
                and len(rt.backlog) == 0
            ),
            timeout=180,
        )
    finally:
        await op.stop()
