"""A queued TPU FuzzCampaign under Kueue's real controller manager (tests/controlplane/kueue.py,
built from its Go module) with the real operator: a GKE-like v6e node pool that kwok runs and
the real kube-scheduler places pods on (tests/controlplane/kwok.py), a ResourceFlavor for the
pool, a ClusterQueue holding some of its chips as quota, a LocalQueue the campaign's
spec.queueName names. Nothing here unsuspends a Job, binds a pod or writes a Workload: Kueue
admits, preempts and readmits, the Job controller makes and removes the pods, kwok runs them.

The worker pods run no container (kwok): what the workers report is the real reporter fed
by the test (workers.py), as a running worker's engine would feed it.

The operator sets no `kueue.x-k8s.io/job-min-parallelism` on its Indexed worker Job, so Kueue
admits a campaign's workers whole or not at all (no partial admission): a campaign wider than
the free quota waits Queued, not running the part that fits.

A campaign has no priority of its own (no spec field, and the operator puts no
`kueue.x-k8s.io/priority-class` label on its Jobs): what preempts it here is a plain Job of a
higher WorkloadPriorityClass in the same queue, not another campaign.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import kwok
from controlplane.cluster import ControlPlane
from controlplane.kit import Api
from controlplane.kueue import API, PRIORITY_LABEL, QUEUE_LABEL, WORKLOADS, KueueController
from controlplane.kwok import Kwok, tpu_pool
from xla_sentinel_operator import desired

from .conftest import campaign, create, eventually
from .kueue_fixture import kueue_controller, skip_unbuilt  # noqa: F401  (the `kueue` fixture)
from .test_kwok import live, running
from .test_lifecycle import FC, jobs, status
from .workers import Worker, finding

pytestmark = skip_unbuilt

V6E_2X2 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x2", "count": 4}
CHIPS = kwok.TPU_RESOURCE
QUEUE = "tpu-queue"
# v6e 2x2 VMs in the pool, 4 chips each: more than the quota (16 chips at most) needs, as
# kwok keeps a deleted pod for its whole grace period (pod/general's pod-delete; the
# workers' is 60 s), where a worker exits on SIGTERM: pods being replaced hold VMs meanwhile.
VMS = 8


@pytest.fixture
def pool(control_plane: ControlPlane, ns: str) -> Iterator[list[str]]:
    """A GKE v6e 2x2 node pool (single-host, 4 chips a VM) run by kwok."""
    with Kwok(control_plane, name=f"kwok-{ns}") as k:
        yield k.add_pool(tpu_pool(f"{ns}-v6e", VMS, "tpu-v6e-slice", "2x2", 4, "ct6e-standard-4t"))


def tpu_quota(flavor: str, chips: int) -> list[dict[str, Any]]:
    return [{"coveredResources": [CHIPS], "flavors": [
        {"name": flavor, "resources": [{"name": CHIPS, "nominalQuota": chips}]}]}]


def queues(kueue: KueueController, ns: str, chips: int) -> tuple[str, str]:
    """The pool's ResourceFlavor (its GKE labels and TPU taint, which Kueue checks the
    workload tolerates), a ClusterQueue of `chips` chips that preempts lower priorities
    within itself, the LocalQueue QUEUE in `ns`, and a WorkloadPriorityClass above the
    campaign's (none: 0). Returns the ClusterQueue's and priority class's names."""
    flavor, cq, urgent = f"{ns}-v6e-2x2", f"{ns}-tpu", f"{ns}-urgent"
    kueue.create({"kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {
        "nodeLabels": {kwok.TPU_ACCELERATOR: "tpu-v6e-slice", kwok.TPU_TOPOLOGY: "2x2"},
        "nodeTaints": [kwok.TPU_TAINT]}})
    kueue.create({"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        "resourceGroups": tpu_quota(flavor, chips),
        "preemption": {"withinClusterQueue": "LowerPriority"}}})
    kueue.create({"kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": ns},
                  "spec": {"clusterQueue": cq}})
    kueue.create({"kind": "WorkloadPriorityClass", "metadata": {"name": urgent}, "value": 1000})
    return cq, urgent


def workload_of(api: Api, ns: str, job: str) -> dict[str, Any] | None:
    """The Workload Kueue made for the Job named `job` (it owns it)."""
    return next((w for w in api.all(WORKLOADS, ns)
                 if any(o["kind"] == "Job" and o["name"] == job
                        for o in w["metadata"].get("ownerReferences") or [])), None)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or []
                 if c["type"] == kind), {})


def reserved_chips(api: Api, cq: str) -> str | None:
    """The TPU chips of the ClusterQueue's quota that admitted Workloads hold."""
    usage = ((api.get(f"{API}/clusterqueues", None, cq) or {}).get("status") or {}).get("flavorsReservation")
    return next((r["total"] for f in usage or [] for r in f["resources"] if r["name"] == CHIPS), None)


def ready(st: dict[str, Any]) -> dict[str, Any]:
    """The campaign's Ready condition."""
    return next((c for c in st.get("conditions") or [] if c["type"] == "Ready"), {})


def urgent_job(ns: str, priority: str, pods: int) -> dict[str, Any]:
    """A plain Job of higher priority in the same queue: `pods` pods of 4 chips."""
    resources = {"requests": {CHIPS: "4"}, "limits": {CHIPS: "4"}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "urgent", "namespace": ns, "labels": {QUEUE_LABEL: QUEUE, PRIORITY_LABEL: priority}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "nodeSelector": {kwok.TPU_ACCELERATOR: "tpu-v6e-slice", kwok.TPU_TOPOLOGY: "2x2"},
            "tolerations": [{"key": CHIPS, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "urgent:test", "resources": resources}]}}}}


@pytest.mark.skipif(not kwok.built(), reason="kwok not built: run `make kwok`")  # the node pool
async def test_kueue_admits_preempts_and_readmits_a_queued_campaign_and_suspend_frees_its_quota(
        api, ns, client, kueue, pool, start_operator, worker_kubeconfig):
    cq, urgent = queues(kueue, ns, chips=8)
    await start_operator()
    fc = await create(client, campaign(ns, workers=3, accelerator=V6E_2X2, queueName=QUEUE,
                                       budget={"continuous": True}))

    # Three workers of 4 chips want 12 of the queue's 8: Kueue holds the whole Job (the
    # campaign sets no minWorkers: no partial admission), the Job controller makes no pod.
    (job,) = await eventually(lambda: jobs(api, ns))
    name = job["metadata"]["name"]
    wl = await eventually(lambda: (w := workload_of(api, ns, name))
                          and condition(w, "QuotaReserved").get("status") == "False" and w, timeout=60)
    assert "insufficient" in condition(wl, "QuotaReserved")["message"], wl["status"]
    (podset,) = wl["spec"]["podSets"]
    assert podset["count"] == 3 and "minCount" not in podset
    assert podset["template"]["spec"]["containers"][0]["resources"]["requests"] == {CHIPS: "4"}
    st = await eventually(lambda: ready(s := status(api, ns)).get("reason") == "Queued" and s, timeout=30)
    assert st["phase"] == "Pending" and ready(st)["status"] == "False" and QUEUE in ready(st)["message"]
    assert jobs(api, ns)[0]["spec"]["suspend"] is True and api.all("v1/pods", ns) == []

    # The quota grows to 16 chips: Kueue admits the Job (unsuspends it and puts
    # its flavor's node labels on the pods), kwok runs the three pods on three VMs.
    api.patch(f"{API}/clusterqueues", None, cq, {"spec": {"resourceGroups": tpu_quota(f"{ns}-v6e-2x2", 16)}})
    wl = await eventually(lambda: (w := workload_of(api, ns, name))
                          and condition(w, "Admitted").get("status") == "True" and w, timeout=60)
    assert wl["status"]["admission"]["clusterQueue"] == cq
    run = await eventually(lambda: len(r := running(api, ns)) == 3 and r, timeout=90)
    assert {p["spec"]["nodeName"] for p in run} <= set(pool) and len({p["spec"]["nodeName"] for p in run}) == 3
    workers = [await Worker(worker_kubeconfig, fc, f"main-{i}").start() for i in range(3)]
    await workers[0].find(finding("00000000000000aa", 1))
    for i, w in enumerate(workers):
        await w.progress(10 * (i + 1))
    st = await eventually(lambda: (s := status(api, ns)).get("phase") == "Running"
                          and s.get("programs") == 60 and s, timeout=60)
    assert st["findingsTotal"] == 1 and st["workers"]["active"] == 3
    # The finding's bisector requests a VM's 4 chips, so it goes through the queue too
    # (created suspended, the queue label kept) and takes the last 4 chips of the 16.
    (bisector,) = await eventually(lambda: jobs(api, ns, "bisector"))
    assert bisector["metadata"]["labels"][QUEUE_LABEL] == QUEUE
    bisector_wl = bisector["metadata"]["name"]
    await eventually(lambda: condition(workload_of(api, ns, bisector_wl), "Admitted").get("status") == "True",
                     timeout=60)

    # A Job of higher priority (the campaign's and its bisector's are 0) wants 8 chips of
    # the none left: Kueue preempts the fewest Workloads that free them, the campaign's
    # (12), suspends its Job (the Job controller deletes the pods) and admits the other.
    # The operator leaves the suspended Job to Kueue (neither unsuspends nor deletes it).
    for w in workers:  # their pods end: SIGTERM, the last report
        await w.close(done=False)
    api.create("batch/v1/jobs", ns, urgent_job(ns, urgent, pods=2))
    wl = await eventually(lambda: (w := workload_of(api, ns, name))
                          and condition(w, "Evicted").get("reason") == "Preempted" and w, timeout=60)
    await eventually(lambda: condition(workload_of(api, ns, "urgent"), "Admitted").get("status") == "True",
                     timeout=60)
    assert condition(workload_of(api, ns, bisector_wl), "Admitted")["status"] == "True"
    await eventually(lambda: jobs(api, ns)[0]["spec"]["suspend"] is True
                     and not [p for p in live(api, ns) if p["metadata"]["labels"].get("job-name") == name],
                     timeout=60)
    st = await eventually(lambda: (s := status(api, ns)).get("workers", {}).get("active") == 0 and s,
                          timeout=30)
    assert (st["programs"], st["findingsTotal"]) == (60, 1)  # the reports are kept
    assert st["phase"] != "Stalled" and st["workers"]["failed"] == 0, st  # preemption is no failure
    # The same Job (uid), held by Kueue. Its status does not say Queued at once: see
    # test_a_preempted_campaign_reads_queued_at_once.
    assert [j["metadata"]["uid"] for j in jobs(api, ns)] == [job["metadata"]["uid"]]

    # The urgent Job goes: Kueue readmits the campaign's Job, its workers run again, and
    # the campaign goes on from its reports.
    api.delete("batch/v1/jobs", ns, "urgent")
    await eventually(lambda: condition(workload_of(api, ns, name), "Admitted").get("status") == "True",
                     timeout=60)
    await eventually(lambda: len(running(api, ns)) == 3, timeout=90)
    st = await eventually(lambda: (s := status(api, ns)).get("phase") == "Running"
                          and s["workers"]["active"] == 3 and s, timeout=60)
    assert (st["programs"], st["findingsTotal"]) == (60, 1)
    assert [j["metadata"]["uid"] for j in jobs(api, ns)] == [job["metadata"]["uid"]]

    # spec.suspend with a queue: the operator deletes the worker Job (Job.spec.suspend is
    # Kueue's, the operator never flips it), its Workload goes with it and frees its 12
    # chips. The finding's bisector (a TPU Job, so queued too: 4 chips) is not a worker
    # Job and stays, admitted.
    api.patch(FC, ns, "nightly", {"spec": {"suspend": True}})
    await eventually(lambda: jobs(api, ns) == [] and workload_of(api, ns, name) is None, timeout=60)
    await eventually(lambda: reserved_chips(api, cq) == "4", timeout=30)
    assert condition(workload_of(api, ns, bisector_wl), "Admitted")["status"] == "True"
    st = await eventually(lambda: (s := status(api, ns)).get("phase") == "Suspended" and s, timeout=30)
    assert (st["programs"], st["findingsTotal"]) == (60, 1)
    # Resumed: a new Job (same name: the revision leaves suspend out), created suspended,
    # which Kueue admits into the free quota; its pods run again.
    api.patch(FC, ns, "nightly", {"spec": {"suspend": False}})
    (again,) = await eventually(lambda: [j for j in jobs(api, ns)
                                         if j["metadata"]["uid"] != job["metadata"]["uid"]])
    assert again["metadata"]["name"] == name
    await eventually(lambda: condition(workload_of(api, ns, name), "Admitted").get("status") == "True",
                     timeout=60)
    await eventually(lambda: len(running(api, ns)) == 3, timeout=90)
    st = await eventually(lambda: (s := status(api, ns)).get("phase") == "Running"
                          and s["workers"]["active"] == 3 and s, timeout=60)
    assert (st["programs"], st["findingsTotal"]) == (60, 1)


async def test_a_preempted_campaign_reads_queued_at_once(api, ns, client, kueue, start_operator,
                                                          worker_kubeconfig):
    """What preemption looks like in the campaign's status right after it. No node here: the
    pods need not run for Kueue to admit and preempt, and the workers' reports (the real
    reporter, as a worker's engine feeds it) are what makes the campaign Running."""
    _, urgent = queues(kueue, ns, chips=12)
    await start_operator()
    fc = await create(client, campaign(ns, workers=3, accelerator=V6E_2X2, queueName=QUEUE,
                                       budget={"continuous": True}))
    (job,) = await eventually(lambda: jobs(api, ns))
    name = job["metadata"]["name"]
    await eventually(lambda: condition(workload_of(api, ns, name), "Admitted").get("status") == "True",
                     timeout=60)
    workers = [await Worker(worker_kubeconfig, fc, f"main-{i}").start() for i in range(3)]
    for w in workers:
        await w.progress(5)
    await eventually(lambda: ready(status(api, ns)).get("status") == "True", timeout=60)

    # Preempted: every worker pod gets SIGTERM and writes its last report.
    for w in workers:
        await w.close(done=False)
    api.create("batch/v1/jobs", ns, urgent_job(ns, urgent, pods=1))
    await eventually(lambda: condition(workload_of(api, ns, name), "Evicted").get("reason") == "Preempted"
                     and jobs(api, ns)[0]["spec"]["suspend"] is True, timeout=60)
    # Nothing of the campaign runs now, and it waits for Kueue to admit it again: Queued,
    # not Ready (Argo CD and Flux would otherwise take it as healthy and running).
    # (The operator rolls up every 0.3 s here: 10 s is many roll-ups, and far less than the
    # 2 minutes a last report stays fresh.)
    st = await eventually(lambda: ready(s := status(api, ns)).get("reason") == "Queued" and s, timeout=10)
    assert st["phase"] == "Pending" and ready(st)["status"] == "False"
    assert st["programs"] == 15  # the reports are kept


async def test_a_campaign_of_higher_priority_preempts_a_running_one(api, ns, client, kueue,
                                                                    start_operator):
    """Two campaigns in one queue of 12 chips, the second labelled with a higher Kueue
    WorkloadPriorityClass: Kueue preempts the first, admits the second, and readmits the
    first when the second goes. No node: admission and preemption need none."""
    _, urgent = queues(kueue, ns, chips=12)
    await start_operator()
    await create(client, campaign(ns, "nightly", workers=3, accelerator=V6E_2X2, queueName=QUEUE,
                                  budget={"continuous": True}))
    (low,) = await eventually(lambda: jobs(api, ns))
    low_name = low["metadata"]["name"]
    await eventually(lambda: condition(workload_of(api, ns, low_name), "Admitted").get("status") == "True",
                     timeout=60)
    high = campaign(ns, "release", workers=2, accelerator=V6E_2X2, queueName=QUEUE,
                    budget={"continuous": True})
    high["metadata"]["labels"] = {PRIORITY_LABEL: urgent}
    await create(client, high)
    (job,) = await eventually(lambda: [j for j in jobs(api, ns) if j["metadata"]["name"] != low_name])
    high_name = job["metadata"]["name"]
    assert job["metadata"]["labels"].get(PRIORITY_LABEL) == urgent, job["metadata"]["labels"]
    wl = await eventually(lambda: workload_of(api, ns, high_name), timeout=30)
    assert wl["spec"]["priority"] == 1000 and wl["spec"]["priorityClassName"] == urgent

    await eventually(lambda: condition(workload_of(api, ns, low_name), "Evicted").get("reason") == "Preempted",
                     timeout=60)
    await eventually(lambda: condition(workload_of(api, ns, high_name), "Admitted").get("status") == "True",
                     timeout=60)
    await eventually(lambda: api.get("batch/v1/jobs", ns, low_name)["spec"]["suspend"] is True, timeout=30)
    # Admitted, its pods pending (no node): waiting for workers, no longer queued; the
    # preempted campaign (no worker reported) waits in the queue again.
    await eventually(lambda: ready(status(api, ns, "release")).get("reason") == "WaitingForWorkers",
                     timeout=30)
    await eventually(lambda: ready(status(api, ns)).get("reason") == "Queued", timeout=30)

    # The higher campaign goes: Kueue admits the first again.
    api.delete(FC, ns, "release")
    await eventually(lambda: condition(workload_of(api, ns, low_name), "Admitted").get("status") == "True",
                     timeout=60)
    # Kueue writes the Workload's Admitted condition first and unsuspends the Job after it
    # (its Job reconciler, a moment later): asserted at once, the gap failed 2 loaded runs.
    await eventually(lambda: api.get("batch/v1/jobs", ns, low_name)["spec"]["suspend"] is False, timeout=30)


async def test_min_workers_lets_kueue_admit_the_shards_that_fit(api, ns, client, kueue, start_operator):
    """spec.minWorkers 1: three workers of 4 chips want 12 of the queue's 8, and Kueue
    admits two (partial admission: the Job's parallelism lowered to 2, its completions
    kept), so two shards run now and the third as one of them finishes. The operator
    leaves the admitted Job as Kueue set it. No node: the Job controller's pods need none."""
    cq, _ = queues(kueue, ns, chips=8)
    await start_operator()
    await create(client, campaign(ns, workers=3, minWorkers=1, accelerator=V6E_2X2, queueName=QUEUE,
                                  budget={"continuous": True}))
    (job,) = await eventually(lambda: jobs(api, ns))
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    assert job["metadata"]["annotations"][desired.MIN_PARALLELISM_ANNOTATION] == "1"
    wl = await eventually(lambda: (w := workload_of(api, ns, name))
                          and condition(w, "Admitted").get("status") == "True" and w, timeout=60)
    (podset,) = wl["spec"]["podSets"]
    assert (podset["count"], podset["minCount"]) == (3, 1)
    (assigned,) = wl["status"]["admission"]["podSetAssignments"]
    assert assigned["count"] == 2, assigned
    admitted = await eventually(lambda: (j := api.get("batch/v1/jobs", ns, name))
                                and j["spec"]["suspend"] is False and j, timeout=30)
    assert (admitted["spec"]["parallelism"], admitted["spec"]["completions"]) == (2, 3)
    await eventually(lambda: reserved_chips(api, cq) == "8", timeout=30)  # two workers of 4 chips
    await eventually(lambda: len(api.all("v1/pods", ns)) == 2, timeout=30)
    # Many roll-ups later (every 0.3 s here) the same Job, as Kueue left it.
    await asyncio.sleep(3)
    again = api.get("batch/v1/jobs", ns, name)
    assert (again["metadata"]["uid"], again["spec"]["parallelism"]) == (uid, 2)
    assert len(api.all("v1/pods", ns)) == 2

