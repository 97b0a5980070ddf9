"""Kueue and JobSet together, for real: the kopf operator makes a multi-host TPU campaign's
slice JobSet with the queue label, and Kueue's real controller manager (tests/controlplane/
kueue.py, its `jobset.x-k8s.io/jobset` integration on) admits it beside JobSet's real
controller (tests/controlplane/jobset.py), on the two kwok v6e 4x4 node pools of
conftest.py's `slice_pools` with the real kube-scheduler placing the hosts.

Nothing here unsuspends a JobSet, binds a pod or writes a Workload or a pod's status: Kueue
admits and releases quota, JobSet makes the slice's Job, the scheduler places its pods, kwok
runs them and finishes the hosts the test labels (`kwok.complete_pod`, exit 0).
test_jobset_operator.py keeps the operator's side of the same flow as a fast unit, where
the test stands in for Kueue.

The ResourceFlavor names one of the two pools by its `cloud.google.com/gke-nodepool` label,
beside the TPU labels the operator's pods already select: where the slice lands is then
Kueue's doing (the nodeSelector it merges into the JobSet's pod template on admission), not
the scheduler's choice between two equal pools. The ClusterQueue holds the chips of one
slice (4 hosts x 4 chips), so a second campaign on the same queue waits for the first.
"""

from __future__ import annotations

from typing import Any

import pytest
from controlplane import jobset as jobset_cp
from controlplane import kwok
from controlplane.kit import Api
from controlplane.kueue import PRIORITY_LABEL, QUEUE_LABEL, KueueController
from controlplane.kwok import complete_pod
from xla_sentinel_operator import desired, jobsets

from .conftest import campaign, create, eventually
from .kueue_fixture import kueue_controller, skip_unbuilt, workload_for  # noqa: F401  (`kueue`)
from .test_jobset import JOBSETS, NODEPOOL, placed
from .test_jobset_operator import HOSTS, V6E_4X4
from .test_lifecycle import status

pytestmark = [skip_unbuilt,
              pytest.mark.skipif(not jobset_cp.built(), reason="JobSet not built: run `make control-plane`")]

QUEUE = "tpu-queue"
CHIPS = kwok.TPU_RESOURCE
SLICE_CHIPS = HOSTS * 4  # one v6e 4x4 slice: 4 hosts (ct6e-standard-4t) of 4 chips (V6E_4X4 count)


def slice_queue(kueue: KueueController, ns: str, pool: str) -> str:
    """A ResourceFlavor for the v6e 4x4 node pool `pool` (its GKE labels and TPU taint), a
    ClusterQueue of one slice's chips in it, and the LocalQueue QUEUE in `ns`. Returns the
    flavor's name."""
    flavor, cq = f"{ns}-v6e-4x4", f"{ns}-slices"
    kueue.create({"kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {
        "nodeLabels": {kwok.TPU_ACCELERATOR: "tpu-v6e-slice", kwok.TPU_TOPOLOGY: "4x4", NODEPOOL: pool},
        "nodeTaints": [kwok.TPU_TAINT]}})
    kueue.create({"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        "resourceGroups": [{"coveredResources": [CHIPS], "flavors": [
            {"name": flavor, "resources": [{"name": CHIPS, "nominalQuota": SLICE_CHIPS}]}]}]}})
    kueue.create({"kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": ns},
                  "spec": {"clusterQueue": cq}})
    return flavor


def slice_of(api: Api, ns: str, fc: str) -> dict[str, Any] | None:
    """The one worker JobSet of campaign `fc`."""
    found = api.all(JOBSETS, ns, {**desired.campaign_selector(fc), desired.ROLE_LABEL: "worker"})
    return found[0] if len(found) == 1 else None


def cond(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or []
                 if c["type"] == kind), {})


def ready(api: Api, ns: str, fc: str) -> dict[str, Any]:
    """The campaign's Ready condition."""
    return next((c for c in status(api, ns, fc).get("conditions") or [] if c["type"] == "Ready"), {})


async def test_kueue_admits_a_campaigns_slice_jobset_and_queues_the_next_until_it_finishes(
        api, ns, client, jobset, kueue, slice_pools, start_operator):
    pool = f"{ns}-pool-b"
    flavor = slice_queue(kueue, ns, pool)
    await start_operator()
    await create(client, campaign(ns, "first", workers=1, accelerator=V6E_4X4, queueName=QUEUE))

    # The operator creates the slice suspended, with the queue label; Kueue's Workload
    # for it is admitted into the flavor and Kueue (not the test) unsuspends the JobSet.
    first = await eventually(lambda: slice_of(api, ns, "first"))
    name, uid = first["metadata"]["name"], first["metadata"]["uid"]
    assert first["spec"]["suspend"] is True and first["metadata"]["labels"][QUEUE_LABEL] == QUEUE
    wl = await eventually(lambda: (w := workload_for(api, ns, "JobSet", name))
                          and cond(w, "Admitted").get("status") == "True" and w, timeout=60)
    (podset,) = wl["status"]["admission"]["podSetAssignments"]
    assert podset["count"] == HOSTS and podset["flavors"] == {CHIPS: flavor}
    assert podset["resourceUsage"][CHIPS] == str(SLICE_CHIPS)
    admitted = await eventually(lambda: (j := api.get(JOBSETS, ns, name))["spec"]["suspend"] is False and j,
                                timeout=30)
    template = admitted["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert template["nodeSelector"][NODEPOOL] == pool  # the flavor's label: the operator sets no pool

    # The hosts land on the flavor's pool, by the nodeSelector Kueue merged into the
    # JobSet's pod template (the other pool fits the slice as well).
    where, hosts = await eventually(lambda: placed(api, ns, jobsets.job_name(name), slice_pools), timeout=90)
    assert where == pool
    assert all(p["spec"]["nodeSelector"][NODEPOOL] == pool for p in hosts)
    assert api.get(JOBSETS, ns, name)["metadata"]["uid"] == uid  # the operator kept Kueue's edit
    await eventually(lambda: (s := status(api, ns, "first")).get("phase") == "Running"
                     and s["workers"]["active"] == HOSTS, timeout=60)
    assert ready(api, ns, "first")["status"] == "True"

    # A second campaign on the same queue, of a higher Kueue priority (its label goes on
    # its JobSet): the queue preempts nothing, so its slice waits, suspended, its Workload
    # pending for quota (the first holds all of it), the campaign Queued; no pod of it.
    kueue.create({"kind": "WorkloadPriorityClass", "metadata": {"name": f"{ns}-urgent"}, "value": 100})
    queued_fc = campaign(ns, "second", workers=1, accelerator=V6E_4X4, queueName=QUEUE)
    queued_fc["metadata"]["labels"] = {PRIORITY_LABEL: f"{ns}-urgent"}
    await create(client, queued_fc)
    second = (await eventually(lambda: slice_of(api, ns, "second")))["metadata"]["name"]
    wl = await eventually(lambda: (w := workload_for(api, ns, "JobSet", second))
                          and cond(w, "QuotaReserved").get("status") == "False" and w, timeout=60)
    assert "insufficient" in cond(wl, "QuotaReserved")["message"], wl["status"]
    assert (wl["spec"]["priorityClassName"], wl["spec"]["priority"]) == (f"{ns}-urgent", 100)
    queued = await eventually(lambda: (r := ready(api, ns, "second")).get("reason") == "Queued" and r,
                              timeout=30)
    assert queued["status"] == "False" and QUEUE in queued["message"]
    assert status(api, ns, "second")["phase"] == "Pending"
    assert api.get(JOBSETS, ns, second)["spec"]["suspend"] is True
    assert api.all("v1/pods", ns, {"batch.kubernetes.io/job-name": jobsets.job_name(second)}) == []

    # The first slice finishes (every host's budget spent: kwok's gated pod-complete,
    # exit 0): the JobSet completes, so does the campaign, its Workload is finished and the
    # quota goes to the second, which Kueue admits and unsuspends onto the same pool.
    for pod in hosts:
        complete_pod(api, ns, pod["metadata"]["name"])
    st = await eventually(lambda: (s := status(api, ns, "first")).get("phase") == "Completed" and s, timeout=60)
    assert st["workers"]["succeeded"] == HOSTS
    await eventually(lambda: cond(workload_for(api, ns, "JobSet", name), "Finished").get("status") == "True",
                     timeout=30)
    await eventually(lambda: cond(workload_for(api, ns, "JobSet", second), "Admitted").get("status") == "True",
                     timeout=60)
    where, _ = await eventually(lambda: placed(api, ns, jobsets.job_name(second), slice_pools), timeout=90)
    assert where == pool
    await eventually(lambda: status(api, ns, "second").get("phase") == "Running", timeout=60)
