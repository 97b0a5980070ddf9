"""FuzzCampaign workflows: converge a campaign's worker Jobs (and the JobSets of its
multi-host TPU slices) on desired.plan_workers, roll its children up into its status
(rollup.py), retry failed workers, clean up after delete.

The decisions are the pure functions' (desired, rollup); this module reads and writes the
API and posts the Events they call for.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import cast

import kopf
from xla_sentinel.cluster.report import REPORT_PLURAL, WorkerReport
from xla_sentinel.spec.campaign import API_VERSION

from . import desired, jobsets, rollup
from .bodies import (
    CampaignStatus,
    Condition,
    Disrupted,
    FuzzCampaign,
    Job,
    JobSet,
    KubeObject,
    Workload,
)
from .kube import ApiError, path
from .runtime import Refused, Runtime, campaign_ref, log, now_text


async def reconcile(rt: Runtime, body: FuzzCampaign) -> None:
    """A campaign created, resumed or with a new spec: converge its worker Jobs."""
    c = rt.campaign(body)
    jobs = await rt.api.list(path("batch/v1", "jobs", c.namespace), Job,
                             {**desired.campaign_selector(c.name), desired.ROLE_LABEL: "worker"})
    # Every worker JobSet the campaign owns, whatever its spec says now: a campaign whose
    # hosts went from 2 to 1 (or from a TPU slice to CPU) renders Jobs, and its older
    # revision's JobSets, which the roll-up no longer lists, are deleted here as stale.
    jobs += await slice_jobsets(rt, c, retired=True)
    completed = (body.get("status") or {}).get("phase") == "Completed"
    await converge_workers(rt, c, jobs, completed)


async def slice_jobsets(rt: Runtime, c: desired.Campaign, *, retired: bool = False) -> list[Job]:
    """The worker JobSets the campaign owns (desired.owned_jobsets) of its TPU campaign's
    multi-host slices, or of its CPU/GPU multi-host groups (accelerator.hosts > 1), read as
    worker Jobs (jobsets.as_worker_job). Listed at each roll-up rather than watched: only
    those campaigns have them, a handful of objects; none where the operator runs without
    JobSet. `retired`: listed whatever the spec says now (reconcile, on a spec change or an
    operator's start), so that those of a spec that had them are found and, no longer
    wanted, deleted (desired.plan_workers)."""
    if not rt.config.jobs.jobset or not (retired or desired.runs_jobsets(c.spec)):
        return []
    try:
        items = await rt.api.list(path(jobsets.API_VERSION, jobsets.PLURAL, c.namespace), JobSet,
                                  {**desired.campaign_selector(c.name), desired.ROLE_LABEL: "worker"})
    except ApiError as e:
        if e.status == 404:  # no JobSet CRD: none can exist
            return []
        raise
    return [jobsets.as_worker_job(js) for js in desired.owned_jobsets(c, items)]


def _collection(c: desired.Campaign, obj: Workload | None) -> str:
    """Where a worker object lives: a slice JobSet or a Job."""
    if obj is not None and obj.get("kind") == jobsets.KIND:
        return path(jobsets.API_VERSION, jobsets.PLURAL, c.namespace)
    return path("batch/v1", "jobs", c.namespace)


async def converge_workers(rt: Runtime, c: desired.Campaign, jobs: list[Job],
                           completed: bool) -> None:
    """Apply desired.plan_workers: create, delete, (un)suspend worker Jobs and slice JobSets."""
    want = desired.worker_jobs(c, default_image=rt.runner_image(c),
                               service_account=rt.config.jobs.service_account)
    plan = desired.plan_workers(c, want, jobs, completed)
    by_name = {j["metadata"]["name"]: j for j in jobs}
    for job in plan.create:
        try:
            _, created = await rt.api.create(_collection(c, job), job)
        except ApiError as e:
            if e.status == 404 and job.get("kind") == jobsets.KIND:
                # jobset.enabled and no JobSet CRD in the cluster: say so on the campaign
                # instead of a Pending campaign and an error in the operator's log only.
                raise Refused(f"cannot create JobSet {job['metadata']['name']}: the cluster has "
                              f"no {jobsets.PLURAL}.{jobsets.API_VERSION.split('/')[0]} resource "
                              "(install JobSet, sigs.k8s.io/jobset, or set the chart value "
                              "jobset.enabled=false)", "JobSetUnavailable") from None
            raise
        if created:
            log.info("workers.created", campaign=c.name, namespace=c.namespace,
                     kind=job.get("kind"), job=job["metadata"]["name"], workers=c.spec.workers)
    for name, suspend in plan.suspend.items():
        await rt.api.patch(f"{_collection(c, by_name.get(name))}/{name}", {"spec": {"suspend": suspend}})
        log.info("workers.suspend", campaign=c.name, namespace=c.namespace, job=name,
                 suspend=suspend)
    for name in plan.delete:
        await rt.api.delete(f"{_collection(c, by_name.get(name))}/{name}")
        log.info("workers.retired", campaign=c.name, namespace=c.namespace, job=name)
    for name, rendered in plan.adopt.items():
        await rt.api.patch(f"{_collection(c, by_name.get(name))}/{name}",
                           {"metadata": {"annotations": {desired.TEMPLATE_ANNOTATION: rendered}}})
    for name in plan.replace:
        # Pod templates are immutable: the next roll-up creates it again as rendered now.
        await rt.api.delete(f"{_collection(c, by_name.get(name))}/{name}")
        log.info("workers.rollout", campaign=c.name, namespace=c.namespace, job=name)


async def roll_up(rt: Runtime, body: FuzzCampaign, jobs: list[Job],
                  reports: list[WorkerReport],
                  disrupted: Sequence[Disrupted] = ()) -> CampaignStatus:
    """One roll-up of a campaign from its worker Jobs and reports (kopf's indexes): retry
    failed workers, converge the Jobs, announce a storage outage, set the gauges. Returns
    the status fields that changed (None: remove the field)."""
    meta = body["metadata"]
    generation = int(meta.get("generation") or 1)
    previous: CampaignStatus = body.get("status") or {}

    def stalled(e: kopf.PermanentError) -> CampaignStatus:
        return {"phase": "Stalled", "conditions": rollup.conditions(
            rollup.Health("Stalled", getattr(e, "reason", "InvalidSpec"), str(e)), generation,
            list(previous.get("conditions") or []), now_text())}

    try:
        c = rt.campaign(body)
    except kopf.PermanentError as e:  # the CRD's schema bypassed, or an image mismatch
        return stalled(e)
    rev = desired.revision(c.spec)
    rt.revision_seen(c.namespace, c.name, rev)
    jobs = [*jobs, *await slice_jobsets(rt, c)]
    now = datetime.now(UTC)
    new = rollup.status(c.spec, generation, jobs, reports, rev, previous, now, disrupted)
    _, due = rollup.retries(previous.get("retries") or {}, jobs, rev, now)
    by_name = {j["metadata"]["name"]: j for j in jobs}
    for retry in due:
        if retry.now and new["phase"] != "Completed":
            # The next roll-up recreates it (converge_workers: a missing Job or JobSet).
            await rt.api.delete(f"{_collection(c, by_name.get(retry.job))}/{retry.job}")
            log.warning("workers.retry", campaign=c.name, namespace=c.namespace,
                        job=retry.job, attempt=retry.attempts)
    try:
        await converge_workers(rt, c, jobs, new["phase"] == "Completed")
    except Refused as e:
        return _changed(previous, stalled(e))
    await announce_storage(rt, c, list(previous.get("conditions") or []), new)
    rt.metrics.programs.labels(c.namespace, c.name).set(new["programs"])
    rt.metrics.findings.labels(c.namespace, c.name).set(new["findingsTotal"])
    changed = _changed(previous, new)
    if "completionTime" in previous and "completionTime" not in new:
        changed["completionTime"] = None  # running again after a budget raise
    rt.liveness.last_rollup = time.monotonic()
    return changed


def _changed(previous: CampaignStatus, new: CampaignStatus) -> CampaignStatus:
    """The fields of `new` that differ from `previous`: the merge patch between them."""
    # The keys are new's own, so the subset is a CampaignStatus too.
    return cast(CampaignStatus, {k: v for k, v in new.items() if previous.get(k) != v})


async def roll_up_and_write(rt: Runtime, body: FuzzCampaign,
                            jobs: list[Job], reports: list[WorkerReport],
                            disrupted: Sequence[Disrupted] = ()) -> None:
    """roll_up() and write what changed into the campaign's status (a merge patch of the
    status subresource; gone in between: nothing to write)."""
    changed = await roll_up(rt, body, jobs, reports, disrupted)
    if not changed:
        return
    meta = body["metadata"]
    try:
        await rt.api.patch(path(API_VERSION, "fuzzcampaigns", meta["namespace"], meta["name"],
                                "status"), {"status": changed})
    except ApiError as e:
        if e.status != 404:
            raise


async def announce_storage(rt: Runtime, c: desired.Campaign, previous: list[Condition],
                           new: CampaignStatus) -> None:
    """A Warning Event on the campaign when its workers' artifact store stops answering
    (status.storageErrors, condition StorageAvailable False); once per outage."""
    message = rollup.storage_outage(previous, new.get("conditions") or [])
    if message is None:
        return
    await rt.event(campaign_ref(c), "Warning", "StorageUnavailable", message)
    log.error("storage.unavailable", campaign=c.name, namespace=c.namespace,
              workers=[e["worker"] for e in new.get("storageErrors") or []])


async def delete_children(rt: Runtime, name: str, namespace: str, uid: str) -> None:
    """A deleted campaign: remove its Jobs and reports (those it owns: a new campaign of
    the same name keeps its own) and its gauges; BugSignatures outlive it. The garbage
    collector removes the children too (each names the campaign as owner), which is what
    happens when the operator is down: nothing waits on this."""
    selector = desired.campaign_selector(name)
    resources = [path("batch/v1", "jobs", namespace), path(API_VERSION, REPORT_PLURAL, namespace)]
    if rt.config.jobs.jobset:
        resources.insert(0, path(jobsets.API_VERSION, jobsets.PLURAL, namespace))
    for resource in resources:
        try:
            objs = await rt.api.list(resource, KubeObject, selector)

        except ApiError as e:
            if e.status != 404:  # 404: no JobSet CRD
                raise
            objs = []
        for obj in objs:
            owners = obj["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == uid for o in owners):
                await rt.api.delete(f"{resource}/{obj['metadata']['name']}")
    rt.forget(namespace, name, uid=uid)
    for gauge in (rt.metrics.programs, rt.metrics.findings):
        try:
            gauge.remove(namespace, name)
        except KeyError:
            pass  # never rolled up
    log.info("campaign.deleted", campaign=name, namespace=namespace)
