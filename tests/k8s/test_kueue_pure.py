"""Kueue owns Job.spec.suspend of queued Jobs: the operator never flips it, suspends a
queued campaign by deleting its worker Jobs, and sends accelerator bisectors through the
queue. Time queued is not budget time (test_rollup_pure). Pure functions, no API."""

from __future__ import annotations

import re
from typing import Any

import pytest
from xla_sentinel.cluster.report import WorkerReport
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel_operator import desired, rollup

TPU = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x2", "count": 4}


def camp(**spec: Any) -> desired.Campaign:
    return desired.Campaign(name="nightly", namespace="fuzz", uid="u", spec=parse_spec(spec))


def existing(c: desired.Campaign, *, suspend: bool, complete: bool = False) -> list[dict]:
    jobs = desired.worker_jobs(c, default_image="img")
    for j in jobs:
        j["spec"]["suspend"] = suspend
        if complete:
            j["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    return jobs


def plan(c: desired.Campaign, have: list[dict], completed: bool = False) -> desired.WorkerPlan:
    return desired.plan_workers(c, desired.worker_jobs(c, default_image="img"), have, completed)


def test_queued_jobs_are_created_suspended_and_never_patched():
    c = camp(queueName="tpu-queue")
    (job,) = desired.worker_jobs(c, default_image="img")
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"][desired.QUEUE_LABEL] == "tpu-queue"
    # Kueue admitted it (unsuspended) or holds it: either way the operator leaves it alone.
    for suspended in (True, False):
        p = plan(c, existing(c, suspend=suspended))
        assert p == desired.WorkerPlan(create=[], delete=[], suspend={})


def test_suspending_a_queued_campaign_deletes_its_workers_and_resuming_recreates_them():
    running = camp(queueName="q")
    suspended = camp(queueName="q", suspend=True)
    assert desired.revision(running.spec) == desired.revision(suspended.spec)
    have = existing(running, suspend=False)
    p = plan(suspended, have)
    assert p.delete == [have[0]["metadata"]["name"]] and p.suspend == {} and p.create == []
    assert plan(suspended, []).create == []  # stays down while suspended
    (again,) = plan(running, []).create
    assert again["spec"]["suspend"] is True  # back in the queue for Kueue to admit


def test_a_finished_queued_job_is_kept_and_a_running_one_past_the_budget_goes():
    c = camp(queueName="q")
    assert plan(c, existing(c, suspend=False, complete=True), completed=True).delete == []
    assert len(plan(c, existing(c, suspend=False), completed=True).delete) == 1


def test_without_a_queue_suspend_is_a_patch():
    c = camp(suspend=True)
    have = existing(camp(), suspend=False)
    p = plan(c, have)
    assert p.suspend == {have[0]["metadata"]["name"]: True} and p.delete == []
    assert plan(camp(), existing(camp(), suspend=True)).suspend == {have[0]["metadata"]["name"]: False}


def test_accelerator_bisectors_go_through_the_queue_and_cpu_ones_do_not():
    sample = {"id": "f" * 20, "signature": "0" * 16, "dir": "findings/f"}
    tpu = desired.bisector_job(camp(queueName="q", accelerator=TPU), sample, "main-0", default_image="img")
    assert tpu["metadata"]["labels"][desired.QUEUE_LABEL] == "q" and tpu["spec"]["suspend"] is True
    assert "google.com/tpu" in tpu["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    cpu = desired.bisector_job(camp(queueName="q"), sample, "main-0", default_image="img")
    assert desired.QUEUE_LABEL not in cpu["metadata"]["labels"] and cpu["spec"]["suspend"] is False


def test_a_queued_campaign_waiting_for_admission_is_pending_queued():
    c = camp(queueName="q")
    jobs = existing(c, suspend=True)
    for j in jobs:
        j["status"] = {}
    h = rollup.health(c.spec, jobs, [], desired.revision(c.spec), 0, None, rollup.parse_time("2026-11-29T12:00:00Z"))
    assert (h.phase, h.reason) == ("Pending", "Queued")
    # Waiting for quota is a steady state, not a rollout: Flux (kstatus reads Reconciling
    # and Stalled) and Argo CD must not wait on it as Progressing.
    conds = {c["type"]: c for c in rollup.conditions(h, 1, [], "2026-11-29T12:00:00Z")}
    assert {k: (c["status"], c["reason"]) for k, c in conds.items()} == {
        "Ready": ("False", "Queued"), "Reconciling": ("False", "Queued"),
        "Stalled": ("False", "Queued")}
    # Creating the workers is converging: Reconciling.
    creating = rollup.conditions(rollup.Health("Pending", "CreatingWorkers", "0/1"), 1, [], "t")
    assert next(c for c in creating if c["type"] == "Reconciling")["status"] == "True"


def test_a_preempted_campaign_is_queued_whatever_its_last_reports_say():
    """Kueue preempted it: every current Job suspended. Its workers' last reports are a
    few seconds old, which alone reads as running workers for REPORT_FRESH (2 minutes);
    nothing runs, so it is Queued (tests/k8s/test_kueue.py saw Running / Ready there)."""
    c = camp(queueName="q")
    jobs = existing(c, suspend=True)
    now = rollup.parse_time("2026-11-29T12:00:00Z")
    fresh = [WorkerReport(worker=f"main-{i}", programs=5, updated="2026-11-29T11:59:55Z") for i in range(3)]
    h = rollup.health(c.spec, jobs, fresh, desired.revision(c.spec), 15, None, now)
    assert (h.phase, h.reason) == ("Pending", "Queued")
    # Admitted (unsuspended) with fresh reports: running.
    assert rollup.health(c.spec, existing(c, suspend=False), fresh, desired.revision(c.spec), 15, None,
                         now).phase == "Running"


def test_a_campaigns_kueue_priority_label_goes_to_its_queued_jobs_only():
    """A campaign labelled kueue.x-k8s.io/priority-class (a WorkloadPriorityClass) puts the
    label on its queued Jobs, the workers' and an accelerator bisector's, so Kueue orders
    and preempts campaigns by it; a Job outside the queue carries neither label."""
    c = desired.Campaign(name="release", namespace="fuzz", uid="u",
                         spec=parse_spec({"queueName": "q", "accelerator": TPU}), priority_class="urgent")
    (worker,) = desired.worker_jobs(c, default_image="img")
    assert worker["metadata"]["labels"][desired.PRIORITY_LABEL] == "urgent"
    sample = {"id": "f" * 20, "signature": "0" * 16, "dir": "findings/f"}
    tpu = desired.bisector_job(c, sample, "main-0", default_image="img")
    assert tpu["metadata"]["labels"][desired.PRIORITY_LABEL] == "urgent"
    cpu = desired.bisector_job(desired.Campaign(name="r", namespace="fuzz", uid="u",
                                                spec=parse_spec({"queueName": "q"}), priority_class="urgent"),
                               sample, "main-0", default_image="img")
    assert desired.PRIORITY_LABEL not in cpu["metadata"]["labels"]
    unqueued = desired.Campaign(name="r", namespace="fuzz", uid="u", spec=parse_spec({}), priority_class="urgent")
    assert desired.PRIORITY_LABEL not in desired.worker_jobs(unqueued, default_image="img")[0]["metadata"]["labels"]


def test_min_workers_asks_kueue_for_partial_admission_of_the_worker_job():
    """spec.minWorkers: the Job's kueue.x-k8s.io/job-min-parallelism, so Kueue may admit the
    shards that fit; a change to it is a new Job (Kueue reads it when it makes the
    Workload), while a campaign without it keeps the template hash it always had."""
    plain = camp(queueName="q", workers=3, accelerator=TPU)
    (job,) = desired.worker_jobs(plain, default_image="img")
    assert desired.MIN_PARALLELISM_ANNOTATION not in job["metadata"]["annotations"]
    partial = camp(queueName="q", workers=3, minWorkers=1, accelerator=TPU)
    (pjob,) = desired.worker_jobs(partial, default_image="img")
    assert pjob["metadata"]["annotations"][desired.MIN_PARALLELISM_ANNOTATION] == "1"
    assert desired.revision(partial.spec) == desired.revision(plain.spec)  # workers compute the same
    assert (pjob["metadata"]["annotations"][desired.TEMPLATE_ANNOTATION]
            != job["metadata"]["annotations"][desired.TEMPLATE_ANNOTATION])
    assert desired.plan_workers(partial, [pjob], [job], False).replace == [job["metadata"]["name"]]


@pytest.mark.parametrize(("spec", "message"), [
    ({"workers": 3, "minWorkers": 1}, "takes a queueName"),
    ({"workers": 3, "minWorkers": 4, "queueName": "q"}, "between 1 and workers (3)"),
    ({"workers": 3, "minWorkers": 0, "queueName": "q"}, "between 1 and workers (3)"),
])
def test_min_workers_is_checked(spec, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(spec)



PROVISIONED = {"maxRunDurationSeconds": 7200}
MAX_RUN = f"{desired.PROVREQ_PREFIX}maxRunDurationSeconds"


def test_provisioning_puts_its_parameters_on_every_queued_workload_for_the_provisioning_request():
    """spec.provisioning: each queued Job and JobSet (workers, and bisectors that hold
    accelerators) carries provreq.kueue.x-k8s.io/maxRunDurationSeconds, which Kueue copies
    to the ProvisioningRequest it makes; a change to it is a new Job (Kueue reads it when it
    makes the Workload), while a campaign without it keeps the template hash it had."""
    plain = camp(queueName="q", workers=3, accelerator=TPU)
    asked = camp(queueName="q", workers=3, accelerator=TPU, provisioning=PROVISIONED)
    (job,), (pjob,) = (desired.worker_jobs(c, default_image="img") for c in (plain, asked))
    assert MAX_RUN not in job["metadata"]["annotations"]
    assert pjob["metadata"]["annotations"][MAX_RUN] == "7200"
    assert desired.revision(asked.spec) == desired.revision(plain.spec)  # workers compute the same
    assert desired.plan_workers(asked, [pjob], [job], False).replace == [job["metadata"]["name"]]
    longer = camp(queueName="q", workers=3, accelerator=TPU, provisioning={"maxRunDurationSeconds": 9000})
    (ljob,) = desired.worker_jobs(longer, default_image="img")
    assert desired.plan_workers(longer, [ljob], [pjob], False).replace == [pjob["metadata"]["name"]]
    # A 4-host v6e slice: one JobSet per shard, each with the parameter.
    sliced = camp(queueName="q", workers=2, provisioning=PROVISIONED, accelerator={
        "type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4})
    slices = desired.worker_jobs(sliced, default_image="img")
    assert len(slices) == 2 and all(s["kind"] == "JobSet" and s["metadata"]["annotations"][MAX_RUN] == "7200"
                                    for s in slices)
    sample = {"id": "f" * 20, "signature": "0" * 16, "dir": "findings/f"}
    tpu = desired.bisector_job(asked, sample, "main-0", default_image="img")
    assert tpu["metadata"]["annotations"][MAX_RUN] == "7200"
    # A CPU bisector runs outside the queue: no ProvisioningRequest is made for it.
    cpu = desired.bisector_job(camp(queueName="q", provisioning=PROVISIONED), sample, "main-0", default_image="img")
    assert MAX_RUN not in (cpu["metadata"].get("annotations") or {})


def test_a_provisioning_campaign_waiting_for_admission_says_it_waits_for_capacity():
    c = camp(queueName="q", provisioning=PROVISIONED)
    jobs = existing(c, suspend=True)
    h = rollup.health(c.spec, jobs, [], desired.revision(c.spec), 0, None, rollup.parse_time("2026-11-29T12:00:00Z"))
    assert (h.phase, h.reason) == ("Pending", "Queued") and "ProvisioningRequest" in h.message


@pytest.mark.parametrize(("spec", "message"), [
    ({"provisioning": PROVISIONED}, "takes a queueName"),
    ({"queueName": "q", "provisioning": {"maxRunDurationSeconds": 0}}, "between 1 and 604800"),
    ({"queueName": "q", "provisioning": {"maxRunDurationSeconds": 8 * 24 * 3600}}, "between 1 and 604800"),
    ({"queueName": "q", "provisioning": {}}, "required field is missing"),
    ({"queueName": "q", "provisioning": {"maxRunDurationSecond": 60}}, "unknown field"),
])
def test_provisioning_is_checked(spec, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(spec)
