"""A FuzzCampaign that asks for capacity (spec.provisioning) through Kueue's real
ProvisioningRequest admission check: the path GKE's Dynamic Workload Scheduler takes
(flex-start with queued provisioning), with Kueue's controller manager built from its Go
module (tests/controlplane/kueue.py) and the ProvisioningRequest API from cluster-autoscaler's
API module at the version Kueue pins (build_kueue.sh). The ClusterQueue names an
AdmissionCheck of controller `kueue.x-k8s.io/provisioning-request` whose
ProvisioningRequestConfig asks for the class `queued-provisioning.gke.io`.

Kueue reserves quota for the campaign's worker Job, makes a ProvisioningRequest for it (its
parameters from the Job's `provreq.kueue.x-k8s.io/` annotations, the operator's
spec.provisioning) and holds the Job suspended until the request is provisioned; then it
admits the Job and marks its pods to consume the request.

Mocked, because it cannot exist here: GKE's cluster autoscaler, which provisions the nodes
and sets the request's Provisioned (or Failed) condition. The test sets that condition, as
the autoscaler does through the request's status. No node is made: the pods the admitted Job
gets are read, not run (tests/k8s/test_kueue.py runs admitted workers on kwok nodes).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from controlplane.cluster import ControlPlane, cache_dir
from controlplane.kit import Api, apply
from controlplane.kueue import API, KueueController
from xla_sentinel_operator import desired

from .conftest import campaign, create, eventually
from .kueue_fixture import skip_unbuilt, workload_for
from .test_kueue import CHIPS, QUEUE, V6E_2X2, condition, ready, tpu_quota
from .test_lifecycle import jobs, status

PROVREQ_CRD = "provisioningrequest-crd.yaml"  # build_kueue.sh
PROVREQS = "autoscaling.x-k8s.io/v1/provisioningrequests"
CLASS = "queued-provisioning.gke.io"
# The annotations Kueue puts on the pods of a Job admitted through a ProvisioningRequest
# (cluster-autoscaler's API: the autoscaler and GKE read them).
CONSUMES = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"

pytestmark = [skip_unbuilt, pytest.mark.skipif(
    not (cache_dir() / PROVREQ_CRD).exists(), reason="ProvisioningRequest CRD not fetched: run `make kueue`")]


@pytest.fixture
def provisioning_kueue(control_plane: ControlPlane, api: Api, ns: str) -> Iterator[KueueController]:
    """Kueue for `ns`, started where the ProvisioningRequest API exists (it sets up its
    provisioning admission check only then), with an AdmissionCheck and its
    ProvisioningRequestConfig; removed after the test (the CRD stays, like any CRD)."""
    crd = yaml.safe_load((cache_dir() / PROVREQ_CRD).read_text())
    apply(control_plane, [crd])
    kueue = KueueController(control_plane, [ns])
    kueue.established([crd["metadata"]["name"]], time.monotonic() + 60)
    kueue.start()
    check, config = f"{ns}-dws", f"{ns}-dws-config"
    made = [(f"{API}/provisioningrequestconfigs", config), (f"{API}/admissionchecks", check)]
    api.create(made[0][0], None, {"apiVersion": API, "kind": "ProvisioningRequestConfig",
                                  "metadata": {"name": config},
                                  "spec": {"provisioningClassName": CLASS, "managedResources": [CHIPS],
                                           # A failed request is retried after 1 s, not 60.
                                           "retryStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 1,
                                                             "backoffMaxSeconds": 2}}})
    api.create(made[1][0], None, {"apiVersion": API, "kind": "AdmissionCheck", "metadata": {"name": check},
                                  "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                                           "parameters": {"apiGroup": "kueue.x-k8s.io",
                                                          "kind": "ProvisioningRequestConfig",
                                                          "name": config}}})
    try:
        yield kueue
    finally:
        kueue.stop()
        for resource, name in made:
            api.delete(resource, None, name)


def dws_queue(kueue: KueueController, ns: str) -> str:
    """A ResourceFlavor for a v6e 2x2 pool, a ClusterQueue of 8 chips whose admission waits
    for the AdmissionCheck `<ns>-dws`, and the LocalQueue QUEUE. Returns the ClusterQueue."""
    flavor, cq = f"{ns}-v6e-2x2-dws", f"{ns}-dws-queue"
    kueue.create({"kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {
        "nodeLabels": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                       "cloud.google.com/gke-tpu-topology": "2x2"}}})
    kueue.create({"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        "resourceGroups": tpu_quota(flavor, 8), "admissionChecks": [f"{ns}-dws"]}})
    kueue.create({"kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": ns},
                  "spec": {"clusterQueue": cq}})
    return cq


def check_state(wl: dict[str, Any] | None) -> dict[str, Any]:
    return next(iter(((wl or {}).get("status") or {}).get("admissionChecks") or []), {})


def provisioned(api: Api, ns: str, name: str, status: str, reason: str) -> None:
    """What GKE's autoscaler writes when it has (or has not) got the capacity."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kind = "Provisioned" if status == "True" else "Failed"
    api.patch(PROVREQS, ns, name, {"status": {"conditions": [
        {"type": kind, "status": "True", "reason": reason, "message": reason,
         "lastTransitionTime": now}]}}, sub="status")


async def test_a_provisioning_campaign_waits_for_its_provisioning_request_then_runs_on_it(
        api, ns, client, provisioning_kueue, start_operator):
    dws_queue(provisioning_kueue, ns)
    await start_operator()
    await create(client, campaign(ns, workers=2, accelerator=V6E_2X2, queueName=QUEUE,
                                  budget={"continuous": True},
                                  provisioning={"maxRunDurationSeconds": 3600}))

    # Quota is there (8 chips for 2 x 4), so Kueue reserves it and makes the request, with
    # the campaign's parameter and the Job's pod template; the Job stays suspended, no pod.
    (job,) = await eventually(lambda: jobs(api, ns))
    name = job["metadata"]["name"]
    assert job["metadata"]["annotations"][f"{desired.PROVREQ_PREFIX}maxRunDurationSeconds"] == "3600"
    (pr,) = await eventually(lambda: api.all(PROVREQS, ns), timeout=60)
    assert pr["spec"]["provisioningClassName"] == CLASS
    assert pr["spec"]["parameters"] == {"maxRunDurationSeconds": "3600"}
    (podset,) = pr["spec"]["podSets"]
    assert podset["count"] == 2
    template = api.get("v1/podtemplates", ns, podset["podTemplateRef"]["name"])
    assert template is not None
    resources = template["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"][CHIPS] == "4"
    wl = workload_for(api, ns, "Job", name)
    assert condition(wl, "QuotaReserved")["status"] == "True"
    assert condition(wl, "Admitted").get("status") != "True" and check_state(wl)["state"] == "Pending"
    st = await eventually(lambda: ready(s := status(api, ns)).get("reason") == "Queued" and s, timeout=30)
    assert "ProvisioningRequest" in ready(st)["message"], st
    assert jobs(api, ns)[0]["spec"]["suspend"] is True and api.all("v1/pods", ns) == []

    # No capacity this time (the autoscaler fails the request): Kueue gives the quota back
    # and asks again with a new request; the campaign keeps waiting, its Job the same.
    provisioned(api, ns, pr["metadata"]["name"], "False", "CapacityUnavailable")
    (pr,) = await eventually(lambda: [r for r in api.all(PROVREQS, ns)
                                      if r["metadata"]["name"] != pr["metadata"]["name"]], timeout=60)
    assert pr["spec"]["parameters"] == {"maxRunDurationSeconds": "3600"}
    assert ready(status(api, ns)).get("reason") == "Queued" and api.all("v1/pods", ns) == []
    assert [j["metadata"]["uid"] for j in jobs(api, ns)] == [job["metadata"]["uid"]]

    # The autoscaler got the nodes: Kueue admits the Job, whose pods consume the request.
    provisioned(api, ns, pr["metadata"]["name"], "True", "Provisioned")
    await eventually(lambda: condition(workload_for(api, ns, "Job", name), "Admitted").get("status") == "True",
                     timeout=60)
    pods = await eventually(lambda: len(p := api.all("v1/pods", ns)) == 2 and p, timeout=60)
    for pod in pods:
        annotations = pod["metadata"].get("annotations") or {}
        assert annotations[CONSUMES] == pr["metadata"]["name"] and annotations[CLASS_ANNOTATION] == CLASS
        assert pod["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "2x2"
    assert jobs(api, ns)[0]["metadata"]["uid"] == job["metadata"]["uid"]
    st = await eventually(lambda: ready(s := status(api, ns)).get("reason") != "Queued" and s, timeout=30)
    assert "ProvisioningRequest" not in ready(st).get("message", ""), st
