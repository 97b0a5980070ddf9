"""The real kopf operator turns a multi-host TPU FuzzCampaign into JobSets, on the real
control plane with JobSet's real controller and webhooks (tests/controlplane/jobset.py)
beside the real Job controller: the JobSet's Job and pods exist with libtpu's env, the
slice's hosts stay in one node pool, a failed host restarts the whole slice (JobSet's
restart, not the operator's), a new revision replaces the JobSets, Kueue admits a JobSet
by unsuspending it, and the campaign's status rolls up from JobSet status. Bisector and
verification runs are slice JobSets too, and host 0's result is traced to its JobSet.
Without JobSet (chart jobset.enabled=false) the campaign is refused rather than split.

The slices run on two GKE v6e 4x4 node pools that kwok runs (conftest.py's `slice_pools`,
tests/controlplane/kwok.py): the real kube-scheduler places the hosts (JobSet's webhook pins
them to their leader's pool), kwok turns them Running and Ready, fails the host the test
labels for kwok's chaos stage (exit 1: `kwok.fail_pod`), completes the hosts it labels for
the gated pod-complete stage (exit 0: `kwok.complete_pod`) and ends deleted pods as a
kubelet would (kwok.py's POD_TERMINATE). Nothing here binds a pod or writes a pod's status.
Kueue is played by the test here (it unsuspends the JobSet), to keep the operator's side
fast; tests/k8s/test_kueue_jobset.py runs the real Kueue with JobSet."""

from __future__ import annotations

from typing import Any

import pytest
from controlplane.jobset import built
from controlplane.kit import Api
from controlplane.kwok import complete_pod, fail_pod
from xla_sentinel_operator import desired, jobsets
from xla_sentinel_operator.kube import path

from .conftest import API, campaign, create, eventually
from .test_bug_lifecycle import SIG, post_result, sig_of, worker_on
from .test_jobset import JOBSETS, NODEPOOL, placed
from .test_lifecycle import condition, fc_path, jobs, status
from .test_signatures import events, webhook_campaign
from .workers import finding

pytestmark = pytest.mark.skipif(not built(), reason="JobSet not built: run `make control-plane`")

V6E_4X4 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4}
HOSTS = 4


def worker_jobsets(api, ns: str) -> list[dict[str, Any]]:
    return api.all(JOBSETS, ns, {"xlasentinel.dev/role": "worker"})


async def place_slice(api: Api, ns: str, js: str, pools: dict[str, list[str]]
                      ) -> tuple[str, list[dict[str, Any]]]:
    """Wait until the scheduler placed the slice of JobSet `js` and kwok runs it: (the pool,
    the pods by host), its placement checked as test_jobset.py's `placed` does."""
    placement: tuple[str, list[dict[str, Any]]] = await eventually(
        lambda: placed(api, ns, jobsets.job_name(js), pools), timeout=60)
    return placement


def env_of(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}


async def test_a_multi_host_campaign_runs_as_jobsets_that_restart_whole_and_roll_up(
        api, ns, client, start_operator, jobset, slice_pools):
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

    _, hosts = await place_slice(api, ns, name, slice_pools)
    for h, pod in enumerate(hosts):
        env = env_of(pod)
        assert pod["spec"]["hostname"] == f"{jobsets.job_name(name)}-{h}"
        assert pod["spec"]["subdomain"] == name
        assert env["TPU_WORKER_HOSTNAMES"] == ",".join(jobsets.hostnames(name, HOSTS))
        assert env["TPU_WORKER_HOSTNAMES"].split(",")[h] == f"{pod['spec']['hostname']}.{name}"
        assert pod["metadata"]["labels"]["xlasentinel.dev/role"] == "worker"
    st = await eventually(lambda: (s := status(api, ns)).get("phase") == "Running"
                          and s["workers"]["active"] == HOSTS and s, timeout=60)
    assert st["workers"]["desired"] == HOSTS
    assert condition(api, ns, "Ready")["status"] == "True"

    # One host fails (kwok's chaos stage, exit 1): JobSet restarts the whole slice; the
    # operator leaves it be.
    fail_pod(api, ns, hosts[2]["metadata"]["name"], exit_code=1)
    restarted = await eventually(lambda: (
        (s := api.get(JOBSETS, ns, name)) and (s.get("status") or {}).get("restarts") == 1 and s),
        timeout=90)
    assert restarted["metadata"]["uid"] == uid  # the same JobSet: not deleted and recreated
    # JobSet deletes the old Job in the foreground: the new one comes once kwok removed the
    # old pods, each at a random time within the workers' grace period (60 s,
    # desired.TERMINATION_GRACE_S; pod/general's pod-delete).
    (again,) = await eventually(lambda: [
        j for j in api.all("batch/v1/jobs", ns)
        if j["metadata"]["labels"].get(jobsets.RESTART_LABEL) == "1"], timeout=120)
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
        api, ns, client, start_operator, jobset, slice_pools):
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
    _, hosts = await place_slice(api, ns, name, slice_pools)
    for pod in hosts:  # every host finishes its budget: kwok's gated pod-complete, exit 0
        complete_pod(api, ns, pod["metadata"]["name"])
    await eventually(lambda: any(
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
