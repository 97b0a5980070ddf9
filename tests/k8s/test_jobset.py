"""JobSet for multi-host TPU slices, on the real control plane with JobSet's real controller
and webhooks (tests/controlplane/jobset.py) beside the real Job controller: one JobSet per
slice with exclusive placement per GKE node pool and a failurePolicy that restarts the whole
slice. A hand-written JobSet of the shape the operator creates (jobsets.py); the
operator's own JobSets are test_jobset_operator.py's.

No scheduler or kubelet runs: the test binds the slice's leader pod to a Node object of a
node pool, as the scheduler would, and fails a host's pod through the status subresource, as
a kubelet would."""

from __future__ import annotations

import time
from typing import Any

import pytest
from controlplane.jobset import built

pytestmark = pytest.mark.skipif(not built(), reason="JobSet not built: run `make control-plane`")

JOBSETS = "jobset.x-k8s.io/v1alpha2/jobsets"
NODEPOOL = "cloud.google.com/gke-nodepool"
HOSTS = 4


def slice_jobset(name: str) -> dict[str, Any]:
    """One 4-host TPU slice (v6e 4x4) as a JobSet: one Indexed Job of a pod per host."""
    pod = {"restartPolicy": "Never",
           "nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                            "cloud.google.com/gke-tpu-topology": "4x4"},
           "containers": [{"name": "runner", "image": "runner:test",
                           "resources": {"limits": {"google.com/tpu": "4"}}}]}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "annotations": {
                "alpha.jobset.sigs.k8s.io/exclusive-topology": NODEPOOL}},
            "spec": {"failurePolicy": {"maxRestarts": 3},
                     "replicatedJobs": [{"name": "hosts", "replicas": 1, "template": {"spec": {
                         "completionMode": "Indexed", "completions": HOSTS, "parallelism": HOSTS,
                         "backoffLimit": 0, "template": {"spec": pod}}}}]}}


def wait(check, timeout: float = 60, what: Any = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what() if callable(what) else what}"
        time.sleep(0.3)


def pods(api, ns: str, job: str) -> list[dict[str, Any]]:
    return api.all("v1/pods", ns, {"batch.kubernetes.io/job-name": job})


def terminated(api, ns: str) -> None:
    """What a kubelet does for pods being deleted: confirm they stopped (grace period 0).
    A Job is Failed only once its pods are gone, and a pod bound to a node with no kubelet
    would stay terminating for ever."""
    for p in api.all("v1/pods", ns):
        if p["metadata"].get("deletionTimestamp"):
            api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}",
                        {"gracePeriodSeconds": 0})


def test_a_slice_jobset_places_its_hosts_in_one_node_pool_and_restarts_whole(api, ns, jobset):
    for pool in ("pool-a", "pool-b"):
        api.create("v1/nodes", None, {"apiVersion": "v1", "kind": "Node",
                                      "metadata": {"name": f"{ns}-{pool}-0", "labels": {NODEPOOL: pool}}})
    api.create(JOBSETS, ns, slice_jobset("slice-0"))
    (job,) = wait(lambda: api.all("batch/v1/jobs", ns), what="the JobSet controller makes the Job")
    name = job["metadata"]["name"]
    assert name == "slice-0-hosts-0"
    assert job["spec"]["completions"] == HOSTS

    # The leader (host 0) is created first; the scheduler would put it in a node pool.
    (leader,) = wait(lambda: pods(api, ns, name), what="the leader pod")
    assert leader["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    api.request("POST", f"/api/v1/namespaces/{ns}/pods/{leader['metadata']['name']}/binding",
                {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": leader["metadata"]["name"]},
                 "target": {"apiVersion": "v1", "kind": "Node", "name": f"{ns}-pool-b-0"}})
    # The other hosts follow it into that node pool, never the other one.
    hosts = wait(lambda: (p := pods(api, ns, name)) and len(p) == HOSTS and p, what="all hosts")
    for p in hosts:
        if p["metadata"]["name"] != leader["metadata"]["name"]:
            assert p["spec"]["nodeSelector"][NODEPOOL] == "pool-b", p["spec"]["nodeSelector"]

    # One host fails: the whole slice restarts (every Job recreated, restart attempt 1).
    victim = next(p for p in hosts if p["metadata"]["name"] != leader["metadata"]["name"])
    api.patch("v1/pods", ns, victim["metadata"]["name"], {"status": {
        "phase": "Failed", "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [{"name": "runner", "image": "runner:test", "imageID": "", "ready": False,
                               "restartCount": 0, "state": {"terminated": {"exitCode": 1}}}]}},
        sub="status")
    restarted = wait(lambda: terminated(api, ns) or (js := api.get(JOBSETS, ns, "slice-0")) and
                     (js.get("status") or {}).get("restarts") == 1 and js, timeout=90,
                     what=lambda: f"the JobSet restarts after a failed host; JobSet status "
                          f"{api.get(JOBSETS, ns, 'slice-0').get('status')}, Jobs "
                          f"{[j.get('status') for j in api.all('batch/v1/jobs', ns)]}, pods "
                          f"{[(p['metadata']['name'], p['status'].get('phase')) for p in pods(api, ns, name)]}")
    assert restarted["status"]["restarts"] == 1
    (again,) = wait(lambda: [j for j in api.all("batch/v1/jobs", ns)
                             if j["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt") == "1"],
                    what="the slice's Job recreated")
    assert again["metadata"]["uid"] != job["metadata"]["uid"]
