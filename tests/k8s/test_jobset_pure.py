"""Multi-host TPU slices as JobSets, pure: the JobSet a slice gets (one replicatedJob of an
Indexed Job of its hosts, exclusive per node pool, whole-slice restarts, libtpu's env from
JobSet's own hostnames), converging them (plan_workers), the roll-up from JobSet status
(no retry of its own on top of JobSet's), Kueue, bisector and verification slices, and the
refusal where the operator runs without JobSet, and the chart switch for it. No API:
test_jobset_operator.py runs the operator with JobSet's real controller."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from controlplane.kit import helm_template
from xla_sentinel.cluster.report import REVISION_LABEL, writer_name
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, jobsets, rollup
from xla_sentinel_operator.main import config_from_args
from xla_sentinel_operator.runtime import Refused, campaign_of

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
V6E_4X4 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4}


def camp(name: str = "tpu-nightly", accelerator: dict[str, Any] | None = None,
         **spec: Any) -> desired.Campaign:
    return desired.Campaign(name=name, namespace="fuzz", uid="u-1",
                            spec=parse_spec({"workers": 2, "accelerator": accelerator or V6E_4X4,
                                             **spec}))


def hosts_job(js: dict[str, Any]) -> dict[str, Any]:
    (rjob,) = js["spec"]["replicatedJobs"]
    assert rjob["name"] == jobsets.HOSTS_JOB and rjob["replicas"] == 1
    return rjob["template"]


def env_of(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["containers"][0]["env"]}


def test_a_multi_host_slice_is_one_jobset_of_its_hosts_per_shard():
    c = camp()
    sets = desired.worker_jobs(c, default_image="img")
    assert len(sets) == desired.job_count(c.spec) == 2  # workers: 2 slices (shards)
    for shard, js in enumerate(sets):
        name = js["metadata"]["name"]
        assert (js["apiVersion"], js["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
        assert js["metadata"]["annotations"] == {
            "alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool",
            desired.TEMPLATE_ANNOTATION: desired.template_hash(js)}
        owner = js["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("FuzzCampaign", "u-1", True)
        assert js["spec"]["failurePolicy"]["maxRestarts"] == desired.SLICE_RESTARTS == 3
        job = hosts_job(js)
        spec, pod = job["spec"], job["spec"]["template"]["spec"]
        assert spec["completionMode"] == "Indexed"
        assert spec["completions"] == spec["parallelism"] == 4  # v6e 4x4: 4 hosts of 4 chips
        assert spec["backoffLimit"] == 0  # one failed host fails the slice's Job: JobSet restarts it
        assert pod["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4"
        assert pod["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "4x4"
        env = env_of(pod)
        assert env["XLA_SENTINEL_SHARD_INDEX"] == str(shard)  # one shard per slice
        assert env["TPU_WORKER_ID"] == {"fieldRef": {"fieldPath": desired.COMPLETION_INDEX}}
        # JobSet's headless Service is named after the subdomain: <js>-<rjob>-<job>-<pod>.<js>.
        assert pod["subdomain"] == js["spec"]["network"]["subdomain"] == name
        assert js["spec"]["network"]["enableDNSHostnames"] is True
        assert env["TPU_WORKER_HOSTNAMES"] == ",".join(f"{name}-hosts-0-{h}.{name}" for h in range(4))
        assert env["JAX_PLATFORMS"] == "tpu"
        # The pods are workers (network policy, reports); the Job is no worker Job.
        pod_labels = spec["template"]["metadata"]["labels"]
        assert pod_labels[desired.ROLE_LABEL] == "worker"
        assert pod_labels[desired.SLICE_LABEL] == str(shard)
        assert desired.ROLE_LABEL not in job["metadata"]["labels"]
        assert js["metadata"]["labels"][desired.ROLE_LABEL] == "worker"
        assert js["spec"]["suspend"] is False


def test_names_fit_jobsets_jobs_and_pod_hostnames_for_a_long_campaign_name():
    c = camp(name="a-very-long-campaign-name-for-the-nightly-tpu-regression-fuzzing")
    for js in desired.worker_jobs(c, default_image="img"):
        name = js["metadata"]["name"]
        assert len(jobsets.job_name(name)) <= desired.JOB_NAME_MAX
        # The Job controller names pods `<job>-<index>-` + 5 characters, cut at 58 + 5.
        assert len(f"{jobsets.job_name(name)}-15-") <= 58
        for host in jobsets.hostnames(name, 16):
            assert len(host.split(".")[0]) <= 63
        # Host 0's pod writes the shard's report; its writer name leads back to the JobSet.
        assert jobsets.jobset_of_writer(writer_name(f"{jobsets.job_name(name)}-0-x7k2p")) == name
    assert jobsets.jobset_of_writer("nightly-main-0") is None
    # JobSet wants DNS-1035 names (a letter first), campaigns may start with a digit.
    (js, _) = desired.worker_jobs(camp(name="2026-nightly"), default_image="img")
    assert js["metadata"]["name"].startswith("js-2026-nightly-main-")


def test_kueue_admits_the_jobset_not_its_job():
    c = camp(queueName="tpu-queue")
    js = desired.worker_jobs(c, default_image="img")[0]
    assert js["metadata"]["labels"][desired.QUEUE_LABEL] == "tpu-queue"
    assert js["spec"]["suspend"] is True  # Kueue admits a JobSet by unsuspending it
    job = hosts_job(js)
    assert desired.QUEUE_LABEL not in job["metadata"]["labels"]
    assert desired.QUEUE_LABEL not in job["spec"]["template"]["metadata"]["labels"]


def jobset_status(js: dict[str, Any], *, active: int = 0, ready: int = 0, succeeded: int = 0,
                  restarts: int = 0, conditions: list[dict[str, Any]] = (), uid: str = "js-1"
                  ) -> dict[str, Any]:
    """A JobSet as read back, with the status JobSet's controller writes."""
    return {**js, "metadata": {**js["metadata"], "uid": uid},
            "status": {"restarts": restarts, "conditions": list(conditions),
                       "replicatedJobsStatus": [{"name": "hosts", "active": active, "ready": ready,
                                                 "succeeded": succeeded, "failed": 0,
                                                 "suspended": 0}]}}


def test_plan_workers_creates_missing_jobsets_replaces_old_revisions_and_keeps_finished():
    c = camp()
    want = desired.worker_jobs(c, default_image="img")
    plan = desired.plan_workers(c, want, [], completed=False)
    assert [j["metadata"]["name"] for j in plan.create] == [j["metadata"]["name"] for j in want]

    # A new revision: new JobSets, the old ones go.
    old = [jobsets.as_worker_job(jobset_status(j, active=1)) for j in want]
    c2 = camp(seed=7)
    want2 = desired.worker_jobs(c2, default_image="img")
    plan = desired.plan_workers(c2, want2, old, completed=False)
    assert sorted(plan.delete) == sorted(j["metadata"]["name"] for j in want)
    assert len(plan.create) == 2 and not plan.suspend

    # A finished slice is kept, even when the campaign completed.
    done = [jobsets.as_worker_job(jobset_status(want[0], succeeded=1, conditions=[
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}]))]
    queued = camp(queueName="tpu-queue")
    assert desired.plan_workers(queued, want, done, completed=True).delete == []
    # Suspending a queued campaign deletes its JobSets (Kueue owns spec.suspend).
    running = [jobsets.as_worker_job(jobset_status(j, active=1)) for j in want]
    suspended = camp(queueName="tpu-queue", suspend=True)
    assert len(desired.plan_workers(suspended, want, running, completed=False).delete) == 2
    # Without a queue, suspend is patched on the JobSets themselves.
    plain = camp(suspend=True)
    assert desired.plan_workers(plain, want, running, completed=False).suspend == {
        j["metadata"]["name"]: True for j in want}


def test_the_roll_up_reads_slices_from_jobset_status():
    c = camp()
    rev = desired.revision(c.spec)
    want = desired.worker_jobs(c, default_image="img")
    both = [jobsets.as_worker_job(jobset_status(j, active=1, ready=1, restarts=1, uid=f"u{i}"))
            for i, j in enumerate(want)]
    st = rollup.status(c.spec, 1, both, [], rev, {}, NOW)
    assert st["phase"] == "Running"
    # Pods: one Job of 4 hosts per slice; a restart (a failed host) counts as a failure.
    assert st["workers"] == {"desired": 8, "active": 8, "succeeded": 0, "failed": 2, "reporting": 0}

    done = [jobsets.as_worker_job(jobset_status(j, succeeded=1, uid=f"u{i}", conditions=[
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}]))
        for i, j in enumerate(want)]
    assert rollup.status(c.spec, 1, done, [], rev, {}, NOW)["phase"] == "Completed"


def test_a_slice_that_spent_its_restarts_stalls_the_campaign_and_is_recreated_with_backoff():
    c = camp()
    rev = desired.revision(c.spec)
    want = desired.worker_jobs(c, default_image="img")
    failed = jobsets.as_worker_job(jobset_status(want[0], restarts=3, conditions=[
        {"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts",
         "message": "jobset failed due to reaching max number of restarts"}]))
    running = jobsets.as_worker_job(jobset_status(want[1], active=1, ready=1, uid="u2"))
    # Spot TPU slices reclaimed 3 times: the slice is recreated after the backoff, keyed
    # per slice (the other slice of the group runs on).
    record, due = rollup.retries({}, [failed, running], rev, NOW)
    assert list(record) == ["main/s0"] and record["main/s0"]["attempts"] == 1
    assert [(r.job, r.now) for r in due] == [(want[0]["metadata"]["name"], False)]
    later = NOW + rollup.RETRY_BASE
    record2, due2 = rollup.retries(record, [failed, running], rev, later)
    assert [(r.job, r.now) for r in due2] == [(want[0]["metadata"]["name"], True)]
    # Deleted and not yet recreated: the count is kept for the next failure's backoff.
    assert rollup.retries(record2, [running], rev, later)[0] == record2
    st = rollup.status(c.spec, 1, [failed, running], [], rev, {}, NOW)
    assert st["phase"] == "Stalled"
    stalled = next(x for x in st["conditions"] if x["type"] == "Stalled")
    assert stalled["reason"] == "WorkerJobFailed"
    assert stalled["message"].startswith(f"JobSet {want[0]['metadata']['name']}: ")
    assert "after 3 restarts of the slice" in stalled["message"]
    assert "recreating it (attempt 1)" in stalled["message"]
    # Failed by its fatal rule (exit 2, a deadline): a new slice would fail the same way.
    fatal = jobsets.as_worker_job(jobset_status(want[0], restarts=0, conditions=[
        {"type": "Failed", "status": "True", "reason": "FailJobSetFailurePolicyAction",
         "message": "PodFailurePolicy"}]))
    assert rollup.retries({}, [fatal, running], rev, NOW) == ({}, [])
    # An Indexed Job that failed is still retried by the roll-up, as before.
    job = {"metadata": {"name": "j", "uid": "j1", "labels": {REVISION_LABEL: rev,
                                                             desired.GROUP_LABEL: "main"}},
           "status": {"conditions": [{"type": "Failed", "status": "True"}]}}
    assert [r.job for r in rollup.retries({}, [job], rev, NOW)[1]] == ["j"]


SAMPLE = {"signature": "00000000000000aa", "id": "f1", "dir": "finding-1"}


@pytest.mark.parametrize("make", ["bisector", "verifier"])
def test_followups_of_a_multi_host_slice_run_on_a_whole_slice_in_the_queue(make):
    c = camp(queueName="tpu-queue")
    if make == "bisector":
        js = desired.bisector_job(c, SAMPLE, "main-0", default_image="img")
        deadline = desired.BISECT_DEADLINE_S
    else:
        js = desired.verify_job(c, "00000000000000aa", "gs://b/repro", "0.10.3", default_image="img")
        deadline = desired.VERIFY_DEADLINE_S
    assert js["kind"] == "JobSet" and js["metadata"]["labels"][desired.ROLE_LABEL] == make
    assert js["metadata"]["labels"][desired.QUEUE_LABEL] == "tpu-queue" and js["spec"]["suspend"] is True
    job = hosts_job(js)["spec"]
    assert job["completions"] == 4 and job["activeDeadlineSeconds"] == deadline
    env = env_of(job["template"]["spec"])
    assert env["TPU_WORKER_HOSTNAMES"].count(",") == 3 and "TPU_WORKER_ID" in env
    # Past its deadline it fails for good, not restarted into the same wait.
    (fatal,) = [r for r in js["spec"]["failurePolicy"]["rules"] if r["name"] == "fatal"]
    assert fatal["action"] == "FailJobSet" and "DeadlineExceeded" in fatal["onJobFailureReasons"]


def test_followups_of_a_single_host_slice_are_jobs_with_a_deadline_and_cpu_ones_are_not_held():
    tpu = camp(accelerator={**V6E_4X4, "tpuTopology": "2x4", "count": 8}, queueName="tpu-queue")
    job = desired.verify_job(tpu, "00000000000000aa", "gs://b/repro", "0.10.3", default_image="img")
    assert job["kind"] == "Job" and job["spec"]["suspend"] is True
    assert job["metadata"]["labels"][desired.QUEUE_LABEL] == "tpu-queue"
    assert job["spec"]["activeDeadlineSeconds"] == desired.VERIFY_DEADLINE_S
    cpu = camp(accelerator={"type": "cpu"}, queueName="cpu-queue")
    job = desired.bisector_job(cpu, SAMPLE, "main-0", default_image="img")
    assert job["kind"] == "Job" and job["spec"]["suspend"] is False
    assert desired.QUEUE_LABEL not in job["metadata"]["labels"]
    assert "activeDeadlineSeconds" not in job["spec"]


def body(accelerator: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "tpu", "namespace": "fuzz", "uid": "u"},
            "spec": {"accelerator": accelerator}}


def test_without_jobset_a_multi_host_campaign_is_refused_not_split():
    with pytest.raises(Refused) as refused:
        campaign_of(body(V6E_4X4), jobset=False)
    assert refused.value.reason == "JobSetUnavailable"
    assert "4x4 is a multi-host v6e slice (16 chips on 4 hosts)" in str(refused.value)
    assert "jobset.enabled" in str(refused.value)
    campaign_of(body({**V6E_4X4, "tpuTopology": "2x4", "count": 8}), jobset=False)  # one host: fine
    campaign_of(body(V6E_4X4), jobset=True)
    assert config_from_args([]).jobs.jobset is True
    assert config_from_args(["--no-jobset"]).jobs.jobset is False


@pytest.mark.parametrize(("clusterwide", "enabled"), [(False, True), (False, False),
                                                      (True, True), (True, False)])
def test_the_chart_switch_reaches_the_operator_and_its_rbac(clusterwide, enabled):
    """`helm template` of the chart: jobset.enabled gives the operator its JobSet RBAC (Role
    per namespace, or ClusterRole) or --no-jobset, parsed by the operator's own parser."""
    objs = helm_template(f"jobset.enabled={str(enabled).lower()}",
                         f"operator.clusterWide={str(clusterwide).lower()}")
    kind = "ClusterRole" if clusterwide else "Role"
    (role,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"].endswith("-operator")]
    rules = [r for r in role["rules"] if "jobset.x-k8s.io" in r["apiGroups"]]
    if enabled:
        assert rules == [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
                          "verbs": ["get", "list", "watch", "create", "patch", "delete"]}]
    else:
        assert rules == []
    (deployment,) = [o for o in objs if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert config_from_args(args[1:]).jobs.jobset is enabled


def test_a_cluster_without_the_jobset_crd_stalls_the_campaign_with_a_clear_reason():
    """jobset.enabled but no JobSet CRD installed: creating the slice's JobSet answers 404.
    The campaign gets Stalled/JobSetUnavailable saying what to install, not a Pending campaign
    with the error in the operator's log only. The API is a stand-in here because the shared
    test control plane keeps JobSet's CRD once any test applied it (CRDs are cluster-wide)."""
    import asyncio
    from types import SimpleNamespace

    from xla_sentinel_operator import campaigns
    from xla_sentinel_operator.config import Config
    from xla_sentinel_operator.kube import ApiError

    created: list[str] = []

    class Api:
        async def create(self, collection: str, obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
            created.append(obj["kind"])
            if obj["kind"] == jobsets.KIND:
                raise ApiError(404, "the server could not find the requested resource")
            return obj, True

    rt = SimpleNamespace(api=Api(), config=Config(), runner_image=lambda c: "runner:1")
    with pytest.raises(Refused) as e:
        asyncio.run(campaigns.converge_workers(rt, camp(), [], completed=False))
    assert e.value.reason == "JobSetUnavailable" and "sigs.k8s.io/jobset" in str(e.value)
    assert created == [jobsets.KIND]

    class Other(Api):
        async def create(self, collection: str, obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
            raise ApiError(404, "namespace gone")

    with pytest.raises(ApiError):  # a 404 on a plain Job is not a missing JobSet
        asyncio.run(campaigns.converge_workers(SimpleNamespace(api=Other(), config=Config(),
                                                               runner_image=lambda c: "r"),
                                               camp(accelerator={"type": "cpu"}), [], completed=False))
