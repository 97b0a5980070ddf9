"""JobSet for multi-host TPU slices, on the real control plane with JobSet's real controller
and webhooks (tests/controlplane/jobset.py) beside the real Job controller: one JobSet per
slice with exclusive placement per GKE node pool and a failurePolicy that restarts the whole
slice. A hand-written JobSet of the shape the operator creates (jobsets.py); the
operator's own JobSets are test_jobset_operator.py's.

The slice runs on two GKE v6e 4x4 node pools that kwok runs (conftest.py's `slice_pools`,
tests/controlplane/kwok.py). Nothing here binds a pod or writes a pod's status: the real
kube-scheduler places the leader pod (host 0) in a pool, JobSet's pod webhook pins the other
hosts to that pool and the scheduler places them on its VMs, chips counted; kwok turns them
Running and Ready, fails the host the test labels for kwok's chaos stage (pod/chaos's
pod-container-running-failed, exit 1: `kwok.fail_pod`), and ends the pods the Job
controller then deletes as a kubelet would (kwok.py's POD_TERMINATE)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from controlplane.jobset import built
from controlplane.kit import Api
from controlplane.kwok import TPU_RESOURCE, fail_pod

pytestmark = pytest.mark.skipif(not built(), reason="JobSet not built: run `make control-plane`")

JOBSETS = "jobset.x-k8s.io/v1alpha2/jobsets"
NODEPOOL = "cloud.google.com/gke-nodepool"
HOSTS = 4
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def slice_jobset(name: str) -> dict[str, Any]:
    """One 4-host TPU slice (v6e 4x4) as a JobSet: one Indexed Job of a pod per host."""
    pod = {"restartPolicy": "Never",
           # Nothing to let finish: kwok removes a deleted pod at a random time within its
           # grace period (pod/general's pod-delete), and a restart waits for the old pods.
           "terminationGracePeriodSeconds": 0,
           "nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                            "cloud.google.com/gke-tpu-topology": "4x4"},
           # GKE taints TPU nodes; the operator's pods tolerate it likewise (desired.py).
           "tolerations": [{"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
           "containers": [{"name": "runner", "image": "runner:test",
                           "resources": {"limits": {TPU_RESOURCE: "4"}}}]}
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


def slice_pods(api: Api, ns: str, job: str) -> list[dict[str, Any]]:
    """The live pods of a slice's Job (not being deleted), by host index."""
    found = [p for p in pods(api, ns, job) if not p["metadata"].get("deletionTimestamp")]
    return sorted(found, key=lambda p: int(p["metadata"]["annotations"][COMPLETION_INDEX]))


def running(pod: dict[str, Any]) -> bool:
    """Running and Ready, as kwok's pod-ready stage reports a pod the scheduler bound."""
    return pod["status"].get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def placed(api: Api, ns: str, job: str, pools: dict[str, list[str]]
           ) -> tuple[str, list[dict[str, Any]]] | None:
    """(the pool, the pods by host) once all the slice's hosts run; asserts JobSet's exclusive
    placement as the scheduler carried it out: every host on a VM of the leader's pool, one
    host a VM (a host takes all 4 chips of one), the followers pinned there by JobSet's pod
    webhook, which admits a follower only once the leader has a node."""
    hosts = slice_pods(api, ns, job)
    if len(hosts) != HOSTS or not all(running(p) for p in hosts):
        return None
    leader = hosts[0]
    assert leader["metadata"]["annotations"][COMPLETION_INDEX] == "0"
    in_pools = [name for name, nodes in pools.items() if leader["spec"]["nodeName"] in nodes]
    assert len(in_pools) == 1, (leader["spec"]["nodeName"], pools)
    pool = in_pools[0]
    for p in hosts[1:]:
        assert (p["spec"].get("nodeSelector") or {}).get(NODEPOOL) == pool, p["spec"].get("nodeSelector")
    nodes = [p["spec"]["nodeName"] for p in hosts]
    assert sorted(nodes) == sorted(pools[pool]), nodes  # the other pool never
    return pool, hosts


def test_a_slice_jobset_places_its_hosts_in_one_node_pool_and_restarts_whole(api, ns, jobset,
                                                                            slice_pools):
    api.create(JOBSETS, ns, slice_jobset("slice-0"))
    (job,) = wait(lambda: api.all("batch/v1/jobs", ns), what="the JobSet controller makes the Job")
    name = job["metadata"]["name"]
    assert name == "slice-0-hosts-0"
    assert job["spec"]["completions"] == HOSTS

    # The scheduler puts the leader (host 0) in a pool, by the exclusive affinities JobSet's
    # webhook gave it; the other hosts follow it into that pool, never the other one.
    _, hosts = wait(lambda: placed(api, ns, name, slice_pools), what=lambda: (
        f"all hosts placed and running; pods "
        f"{[(p['metadata']['name'], p['spec'].get('nodeName'), p['status'].get('phase')) for p in pods(api, ns, name)]}"))
    affinity = hosts[0]["spec"]["affinity"]
    assert affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == NODEPOOL
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "topologyKey"] == NODEPOOL

    # One host fails (kwok's chaos stage, exit 1): the whole slice restarts (every Job
    # recreated, restart attempt 1).
    fail_pod(api, ns, hosts[1]["metadata"]["name"], exit_code=1)
    restarted = wait(lambda: (js := api.get(JOBSETS, ns, "slice-0")) and
                     (js.get("status") or {}).get("restarts") == 1 and js, timeout=90,
                     what=lambda: f"the JobSet restarts after a failed host; JobSet status "
                          f"{api.get(JOBSETS, ns, 'slice-0').get('status')}, Jobs "
                          f"{[j.get('status') for j in api.all('batch/v1/jobs', ns)]}, pods "
                          f"{[(p['metadata']['name'], p['status'].get('phase')) for p in pods(api, ns, name)]}")
    assert restarted["status"]["restarts"] == 1
    # JobSet deletes the old Job in the foreground: the new one comes once kwok removed the
    # old pods.
    (again,) = wait(lambda: [j for j in api.all("batch/v1/jobs", ns)
                             if j["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt") == "1"],
                    what="the slice's Job recreated")
    assert again["metadata"]["uid"] != job["metadata"]["uid"]
