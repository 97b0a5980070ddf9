"""A TPU FuzzCampaign on GKE-like node pools that kwok runs (tests/controlplane/kwok.py: kwok
built from its Go module, its own stages) with the real kube-scheduler placing the worker
pods: nothing here binds a pod or writes a pod's status.

The scheduler must put each worker on the campaign's pool (TPU accelerator and topology
labels, GKE's google.com/tpu taint tolerated) and count chips: a v6e 2x2 worker takes all 4
chips of a VM, so the pool's three VMs run three workers and the fourth waits Unschedulable.
kwok turns the bound pods Running and Ready, the campaign's roll-up sees them; a worker that
kwok's chaos stage fails with exit 1 counts against its retries, while one a drain evicts
(the Eviction API: DisruptionTarget) is ignored by the failure policy and counted in
status.disruptions instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import kwok
from controlplane.kwok import Kwok, cpu_pool, evict, fail_pod, tpu_pool

from .conftest import campaign, create, eventually
from .test_lifecycle import jobs, status, worker_pods

pytestmark = pytest.mark.skipif(not kwok.built(), reason="kwok not built: run `make kwok`")

V6E_2X2 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x2", "count": 4}


@pytest.fixture
def pools(control_plane, ns) -> Iterator[dict[str, list[str]]]:
    """Three GKE pools run by kwok: the campaign's (v6e 2x2, three VMs), a v5e 2x2 pool of
    the same chip count and a CPU pool, which it must not land on."""
    with Kwok(control_plane, name=f"kwok-{ns}") as k:
        yield {"v6e": k.add_pool(tpu_pool(f"{ns}-v6e", 3, "tpu-v6e-slice", "2x2", 4, "ct6e-standard-4t")),
               "v5e": k.add_pool(tpu_pool(f"{ns}-v5e", 2, "tpu-v5-lite-podslice", "2x2", 4,
                                          "ct5lp-hightpu-4t")),
               "cpu": k.add_pool(cpu_pool(f"{ns}-cpu", 2))}


def live(api, ns: str) -> list[dict[str, Any]]:
    return [p for p in worker_pods(api, ns) if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") not in ("Succeeded", "Failed")]


def running(api, ns: str) -> list[dict[str, Any]]:
    return [p for p in live(api, ns) if p["status"].get("phase") == "Running"
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])]


def unschedulable(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
               for c in pod["status"].get("conditions") or [])


def placed_on_pool(api, ns: str, pool: list[str]) -> list[dict[str, Any]] | None:
    """The running workers, once three run, each alone on a VM of `pool`, and the rest
    wait Unschedulable (the pool's chips are taken)."""
    run, pods = running(api, ns), live(api, ns)
    if len(run) != 3 or len(pods) != 4:
        return None
    nodes = [p["spec"]["nodeName"] for p in run]
    assert sorted(nodes) == sorted(pool), nodes  # one worker per VM: 4 chips each
    (waiting,) = [p for p in pods if p not in run]
    return run if unschedulable(waiting) and not waiting["spec"].get("nodeName") else None


async def test_tpu_workers_are_scheduled_onto_their_pool_run_fail_and_are_evicted(
        api, ns, client, start_operator, pools):
    await start_operator()
    await create(client, campaign(ns, workers=4, accelerator=V6E_2X2, budget={"continuous": True}))
    (job,) = await eventually(lambda: jobs(api, ns))

    run = await eventually(lambda: placed_on_pool(api, ns, pools["v6e"]), timeout=60)
    for pod in run:
        assert pod["status"]["containerStatuses"][0]["state"]["running"]
        assert pod["status"]["podIP"]  # kwok's pod-ready stage, as a kubelet reports it
    st = await eventually(lambda: (s := status(api, ns)).get("phase") == "Running"
                          and s["workers"]["active"] == 4 and s, timeout=30)
    assert st["workers"]["failed"] == 0 and st["disruptions"]["total"] == 0

    # kwok's chaos stage ends one worker with exit 1: the Job counts it against the index's
    # retries, the freed VM takes a waiting pod, and three run again.
    failed = run[0]["metadata"]["name"]
    fail_pod(api, ns, failed, exit_code=1)
    pod = await eventually(lambda: (p := api.get("v1/pods", ns, failed))
                           and p["status"].get("phase") == "Failed" and p, timeout=30)
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    st = await eventually(lambda: (s := status(api, ns))["workers"]["failed"] == 1 and s, timeout=30)
    assert st["disruptions"]["total"] == 0
    run = await eventually(lambda: placed_on_pool(api, ns, pools["v6e"]), timeout=60)

    # A drain evicts another: DisruptionTarget from kube-apiserver, Failed with 143 from
    # kwok; the failure policy ignores it (failed stays 1) and the roll-up counts it.
    evicted = run[0]["metadata"]["name"]
    evict(api, ns, evicted)
    st = await eventually(lambda: (s := status(api, ns))["disruptions"]["total"] == 1 and s,
                          timeout=30)
    assert st["disruptions"]["byReason"] == {"EvictionByEvictionAPI": 1}
    assert st["disruptions"]["last"]["pod"] == evicted
    await eventually(lambda: placed_on_pool(api, ns, pools["v6e"]), timeout=60)
    job = api.get("batch/v1/jobs", ns, job["metadata"]["name"])
    assert job["status"].get("failed") == 1, job["status"]  # the eviction is not counted
    assert status(api, ns)["workers"]["failed"] == 1
    for p in worker_pods(api, ns):
        assert p["spec"].get("nodeName") in (None, *pools["v6e"])  # never the v5e or CPU pool
