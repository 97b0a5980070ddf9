"""Two peered replicas as the chart runs them (no --priority): the one that started first
leads and keeps leading when the other restarts, and the standby answers /healthz with
200 however long it has done nothing. The real kopf peering object on the real API server."""

from __future__ import annotations

import time

import aiohttp

from .conftest import API, campaign, create, eventually
from .workers import Worker, finding

PEERING = "kopf.dev/v1/kopfpeerings"
SIGS = f"{API}/bugsignatures"
PEERED = {"standalone": False}  # priority by default, as in the chart's Deployment


def peers(api, ns: str) -> dict:
    return (api.get(PEERING, ns, "xla-sentinel") or {}).get("status") or {}


def ingested(op) -> float:
    return op.runtime.metrics.reports_ingested._value.get()


async def healthz(op) -> int:
    async with aiohttp.ClientSession() as http:
        return (await http.get(f"http://127.0.0.1:{op.runtime.metrics_port}/healthz")).status


async def test_the_leader_keeps_leading_across_a_restart_of_the_other(
        api, ns, client, start_operator, worker_kubeconfig):
    first = await start_operator(peering=PEERED)
    await eventually(lambda: len(peers(api, ns)) == 1)
    second = await start_operator(peering=PEERED)
    await eventually(lambda: len(peers(api, ns)) == 2)
    fc = await create(client, campaign(ns, workers=1))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding("00000000000000aa", 1))
    await eventually(lambda: api.get(SIGS, ns, "sig-00000000000000aa"))
    assert ingested(first) >= 1 and ingested(second) == 0  # the first started leads

    await second.stop()  # a rollout, an eviction, a crash of the standby
    third = await start_operator(peering=PEERED)
    await eventually(lambda: len(peers(api, ns)) == 2 and all(
        p in peers(api, ns) for p in (first.runtime.identity, third.runtime.identity)))
    await w.find(finding("00000000000000bb", 2))
    await eventually(lambda: api.get(SIGS, ns, "sig-00000000000000bb"))
    assert ingested(third) == 0  # the newcomer did not take over
    await eventually(lambda: (api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status") or {})
                     .get("findingsTotal") == 2)
    assert first.runtime.liveness.acting and not third.runtime.liveness.acting
    assert third.runtime.liveness.last_rollup is None


async def test_a_standby_replica_stays_healthy(api, ns, client, start_operator):
    low = await start_operator(peering={"standalone": False, "priority": 10})
    await create(client, campaign(ns, workers=1))
    await eventually(lambda: low.runtime.liveness.last_rollup is not None, timeout=60)
    # A replica of a higher priority comes (or the old leader comes back): low pauses.
    high = await start_operator(peering={"standalone": False, "priority": 100})
    await eventually(lambda: high.runtime.liveness.last_rollup is not None, timeout=60)
    # Past /healthz's limit for roll-ups (5 intervals, at least 30 s) since low's last one:
    limit = max(low.config.rollup_interval * 5, 30.0)
    await eventually(lambda: time.monotonic() - low.runtime.liveness.last_rollup > limit + 1,
                     timeout=limit + 60, interval=1)
    assert await healthz(low) == 200  # a standby is not a dead operator: no restart
    assert await healthz(high) == 200
