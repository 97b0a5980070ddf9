"""The real kopf operator turns a multi-host TPU FuzzCampaign into JobSets, on the real
control plane with JobSet's real controller and webhooks (tests/controlplane/jobset.py)
beside the real Job controller: the JobSet's Job and pods exist with libtpu's env, the
slice's hosts stay in one node pool, a failed host restarts the whole slice (JobSet's
restart, not the operator's), a new revision replaces the JobSets, Kueue admits a JobSet
by unsuspending it, and the campaign's status rolls up from JobSet status. Bisector and
verification runs are slice JobSets too, and host 0's result is traced to its JobSet.
Without JobSet (chart jobset.enabled=false) the campaign is refused rather than split.

Mocked, because it cannot exist here: GKE's TPU node pools (Node objects with their
labels, no kubelet) and the scheduler and kubelet themselves: the test binds pods to those
nodes and writes their status (Running and Ready, Succeeded, Failed) through the API as
they would, as tests/k8s/test_jobset.py does. Kueue is the test unsuspending the JobSet."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from controlplane.jobset import built
from xla_sentinel_operator import desired, jobsets
from xla_sentinel_operator.kube import path

from .conftest import API, campaign, create, eventually
from .test_bug_lifecycle import SIG, post_result, sig_of, worker_on
from .test_jobset import JOBSETS, NODEPOOL, terminated
from .test_lifecycle import condition, fc_path, jobs, status
from .test_signatures import events, webhook_campaign
from .workers import finding

pytestmark = pytest.mark.skipif(not built(), reason="JobSet not built: run `make control-plane`")

V6E_4X4 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4}
HOSTS = 4


@pytest.fixture
def pools(api, ns) -> Iterator[list[str]]:
    """Two TPU node pools of one v6e 4x4 node each (Node objects: no kubelet runs)."""
    names = []
    for pool in ("pool-a", "pool-b"):
        name = f"{ns}-{pool}-0"
        api.create("v1/nodes", None, {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {NODEPOOL: pool,
                                     "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                     "cloud.google.com/gke-tpu-topology": "4x4"}}})
        names.append(name)
    yield names
    for name in names:
        api.delete("v1/nodes", None, name)


def worker_jobsets(api, ns: str) -> list[dict[str, Any]]:
    return api.all(JOBSETS, ns, {"xlasentinel.dev/role": "worker"})


def slice_pods(api, ns: str, js: str) -> list[dict[str, Any]]:
    """The live pods of a JobSet's current Job, by host index."""
    found = [p for p in api.all("v1/pods", ns, {"batch.kubernetes.io/job-name": jobsets.job_name(js)})
             if not p["metadata"].get("deletionTimestamp")]
    return sorted(found, key=lambda p: int(p["metadata"]["annotations"]
                                           ["batch.kubernetes.io/job-completion-index"]))


def bind(api, ns: str, pod: dict[str, Any], node: str) -> None:
    """What the scheduler does."""
    name = pod["metadata"]["name"]
    code, out = api.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding",
                            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                             "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    assert code == 201, out


def set_phase(api, ns: str, pod: dict[str, Any], phase: str, exit_code: int = 0) -> None:
    """What the kubelet reports: Running and Ready, or terminated with `exit_code`."""
    running = phase == "Running"
    state = {"running": {}} if running else {"terminated": {"exitCode": exit_code}}
    api.patch("v1/pods", ns, pod["metadata"]["name"], {"status": {
        "phase": phase, "conditions": [{"type": "Ready", "status": "True" if running else "False"}],
        "containerStatuses": [{"name": "runner", "image": "runner:test", "imageID": "",
                               "ready": running, "restartCount": 0, "state": state}]}}, sub="status")


async def place_slice(api, ns: str, js: str, node: str) -> list[dict[str, Any]]:
    """Schedule a slice: its leader (host 0) first, then the hosts JobSet's webhook lets in
    once the leader has a node; all on `node`'s pool. Returns the pods by host."""
    (leader,) = await eventually(lambda: slice_pods(api, ns, js), timeout=60)
    bind(api, ns, leader, node)
    hosts = await eventually(lambda: (p := slice_pods(api, ns, js)) and len(p) == HOSTS and p,
                             timeout=60)
    for p in hosts[1:]:
        assert p["spec"]["nodeSelector"][NODEPOOL] == api.get("v1/nodes", None, node)[
            "metadata"]["labels"][NODEPOOL]  # JobSet's exclusive placement: the leader's pool
        bind(api, ns, p, node)
    return hosts


def env_of(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}


async def test_a_multi_host_campaign_runs_as_jobsets_that_restart_whole_and_roll_up(
        api, ns, client, start_operator, jobset, pools):
    await start_operator()
    await create(client, campaign(ns, workers=1, accelerator=V6E_4X4, budget={"programs": 1000}))

    (js,) = await eventually(lambda: worker_jobsets(api, ns))
    name, uid = js["metadata"]["name"], js["metadata"]["uid"]
    fc = api.get("xlasentinel.dev/v1alpha1/fuzzcampaigns", ns, "nightly")
    assert js["metadata"]["ownerReferences"][0]["uid"] == fc["metadata"]["uid"]
    assert js["metadata"]["annotations"][jobsets.EXCLUSIVE_TOPOLOGY] == NODEPOOL
    # JobSet's controller makes the slice's Job; it is no worker Job of the operator's.
    (job,) = await eventually(lambda: api.all("batch/v1/jobs", ns))
    assert job["metadata"]["name"] == jobsets.job_name(name)
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == HOSTS
    assert jobs(api, ns) == []
    # The hosts' names resolve through JobSet's own headless Service, named as the JobSet.
    service = await eventually(lambda: api.get("v1/services", ns, name))
    assert service["spec"]["clusterIP"] == "None"

    hosts = await place_slice(api, ns, name, pools[1])
    for h, pod in enumerate(hosts):
        env = env_of(pod)
        assert pod["spec"]["hostname"] == f"{jobsets.job_name(name)}-{h}"
        assert pod["spec"]["subdomain"] == name
        assert env["TPU_WORKER_HOSTNAMES"] == ",".join(jobsets.hostnames(name, HOSTS))
        assert env["TPU_WORKER_HOSTNAMES"].split(",")[h] == f"{pod['spec']['hostname']}.{name}"
        assert pod["metadata"]["labels"]["xlasentinel.dev/role"] == "worker"
    for pod in hosts:
        set_phase(api, ns, pod, "Running")
    st = await eventually(lambda: (s := status(api, ns)).get("phase") == "Running"
                          and s["workers"]["active"] == HOSTS and s, timeout=60)
    assert st["workers"]["desired"] == HOSTS
    assert condition(api, ns, "Ready")["status"] == "True"

    # One host fails: JobSet restarts the whole slice; the operator leaves it be.
    set_phase(api, ns, hosts[2], "Failed", exit_code=1)
    restarted = await eventually(lambda: terminated(api, ns) or (
        (s := api.get(JOBSETS, ns, name)) and (s.get("status") or {}).get("restarts") == 1 and s),
        timeout=90)
    assert restarted["metadata"]["uid"] == uid  # the same JobSet: not deleted and recreated
    (again,) = await eventually(lambda: [
        j for j in api.all("batch/v1/jobs", ns)
        if j["metadata"]["labels"].get(jobsets.RESTART_LABEL) == "1"], timeout=60)
    assert again["metadata"]["name"] == jobsets.job_name(name)
    st = await eventually(lambda: (s := status(api, ns))["workers"]["failed"] == 1 and s, timeout=30)
    assert st["phase"] != "Stalled" and st["retries"] == {}
    assert [j["metadata"]["uid"] for j in worker_jobsets(api, ns)] == [uid]

    # A new revision replaces the slice's JobSet.
    await client.patch(fc_path(ns), {"spec": {"seed": 7}})
    (new,) = await eventually(lambda: (s := worker_jobsets(api, ns)) and len(s) == 1
                              and s[0]["metadata"]["name"] != name and s, timeout=60)
    st = await eventually(lambda: (s := status(api, ns)).get("observedGeneration") == 2 and s)
    assert new["metadata"]["labels"]["xlasentinel.dev/revision"] == st["revision"]
    assert api.get(JOBSETS, ns, name) is None


async def test_kueue_admits_a_slice_jobset_and_a_finished_slice_completes_the_campaign(
        api, ns, client, start_operator, jobset, pools):
    await start_operator()
    await create(client, campaign(ns, workers=1, accelerator=V6E_4X4, queueName="tpu-queue"))
    (js,) = await eventually(lambda: worker_jobsets(api, ns))
    name = js["metadata"]["name"]
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "tpu-queue"
    assert js["spec"]["suspend"] is True
    # Suspended: JobSet's Job is suspended too, no pod; the campaign waits in the queue.
    (job,) = await eventually(lambda: api.all("batch/v1/jobs", ns))
    assert job["spec"]["suspend"] is True
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]
    ready = await eventually(lambda: condition(api, ns, "Ready").get("reason") == "Queued"
                             and condition(api, ns, "Ready"))
    assert "tpu-queue" in ready["message"] and api.all("v1/pods", ns) == []

    api.patch(JOBSETS, ns, name, {"spec": {"suspend": False}})  # "Kueue" admits the slice
    hosts = await place_slice(api, ns, name, pools[0])
    for pod in hosts:
        set_phase(api, ns, pod, "Succeeded")
    await eventually(lambda: terminated(api, ns) or any(
        c["type"] == "Completed" and c["status"] == "True"
        for c in (api.get(JOBSETS, ns, name).get("status") or {}).get("conditions") or []), timeout=60)
    st = await eventually(lambda: (s := status(api, ns)).get("phase") == "Completed" and s, timeout=30)
    assert condition(api, ns, "Ready")["reason"] == "WorkersFinished"
    assert st["workers"]["succeeded"] == HOSTS
    assert [j["metadata"]["name"] for j in worker_jobsets(api, ns)] == [name]  # kept, finished


async def test_without_jobset_a_multi_host_campaign_is_refused_not_split(api, ns, client,
                                                                         start_operator):
    await start_operator(jobs={"jobset": False})
    await create(client, campaign(ns, accelerator=V6E_4X4))
    stalled = await eventually(lambda: condition(api, ns, "Stalled").get("status") == "True"
                               and condition(api, ns, "Stalled"))
    assert stalled["reason"] == "JobSetUnavailable" and "jobset.enabled" in stalled["message"]
    assert status(api, ns)["phase"] == "Stalled"
    assert api.all("batch/v1/jobs", ns) == []


async def test_followups_of_a_multi_host_campaign_are_slice_jobsets_whose_host_0_reports(
        api, ns, client, start_operator, receiver, worker_kubeconfig, jobset):
    await start_operator()
    fc = await webhook_campaign(client, ns, receiver.url, accelerator=V6E_4X4)
    w = await worker_on(worker_kubeconfig, fc, "main-0", "0.10.2")  # before the fix
    await w.find(finding(SIG, 1))
    # A new signature's bisector runs on a whole slice, with a deadline.
    (bisector,) = await eventually(lambda: api.all(JOBSETS, ns, {"xlasentinel.dev/role": "bisector"}))
    spec = bisector["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert spec["completions"] == HOSTS and spec["activeDeadlineSeconds"] == desired.BISECT_DEADLINE_S
    bname = bisector["metadata"]["name"]
    await eventually(lambda: api.get("batch/v1/jobs", ns, jobsets.job_name(bname)))

    await eventually(lambda: len(receiver.posts) == 1)  # the signature is recorded and alerted
    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"),
                       {"spec": {"state": "fixed", "fixedIn": "0.10.3"}})
    (verifier,) = await eventually(lambda: api.all(JOBSETS, ns, {"xlasentinel.dev/role": "verifier"}))
    vname = verifier["metadata"]["name"]
    verified = {"signature": SIG, "result": "verified", "exitCode": 0, "image": "runner:test",
                "fixedIn": "0.10.3", "versions": {"jaxlib": "0.10.3"}}
    # Host 0 of the bisector's slice cannot pass its result off as a verification...
    await post_result(api, worker_kubeconfig, fc, "verification", "b", verified,
                      name=f"{jobsets.job_name(bname)}-0")
    await eventually(lambda: [e for e in events(api, ns, "FuzzCampaign") if e["reason"] == "ResultRefused"])
    assert "verification" not in sig_of(api, ns).get("status", {})
    # ... the verifier slice's host 0 (`<jobset>-hosts-0-0`, its pod's writer name) can.
    await post_result(api, worker_kubeconfig, fc, "verification", SIG, verified,
                      name=f"{jobsets.job_name(vname)}-0")
    verification = await eventually(lambda: sig_of(api, ns)["status"].get("verification"))
    assert verification["result"] == "verified"
