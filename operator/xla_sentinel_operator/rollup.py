"""Pure roll-up of a campaign's children (worker Jobs, worker reports) into its status:
phase, counters, per-worker summary, the Ready / Reconciling / Stalled conditions that
GitOps tools (Flux kstatus) read, each with observedGeneration, and StorageAvailable for
campaigns whose workers mirror to an artifact store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from xla_sentinel.cluster.report import REVISION_LABEL, WorkerReport
from xla_sentinel.spec.campaign import CampaignSpec

from . import jobsets
from .bodies import (
    CampaignStatus,
    Condition,
    Counters,
    Disrupted,
    Disruptions,
    Failures,
    Job,
    ReportError,
    RetryRecord,
    StorageError,
    WorkerStats,
    WorkerSummary,
    job_spec,
    job_status,
    labels_of,
)
from .desired import GROUP_LABEL, SLICE_LABEL, job_count, pod_count
from .timestamps import parse_time

_CONDITION_TYPES = ("Ready", "Reconciling", "Stalled")
# The reason of a campaign whose worker Jobs wait for Kueue's admission (spec.queueName).
QUEUED = "Queued"


@dataclass(frozen=True)
class Health:
    phase: str
    reason: str
    message: str


def _job_condition(job: Job, kind: str) -> Condition | None:
    return jobsets.true_condition(job_status(job).get("conditions"), kind)


def failure_limit(completions: int) -> int:
    """Failed pods in one Job that mean "failing repeatedly" rather than a preemption."""
    return max(3, completions // 10)


# Failures older than this no longer make a campaign Stalled, and only failures of the
# worker Jobs that exist now count: a recreated Job starts clean.
FAILURE_WINDOW = timedelta(minutes=10)
# A report written this recently means its worker runs, even if no pod shows as ready
# (a Job's `ready` lags, and workers outside a Job report too).
REPORT_FRESH = timedelta(minutes=2)
# Backoff of recreating a failed worker Job: 30 s, 1 min, 2 min, ... at most 1 hour.
RETRY_BASE = timedelta(seconds=30)
RETRY_MAX = timedelta(hours=1)


def _text(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _uid(job: Job) -> str:
    return str(job["metadata"].get("uid") or job["metadata"]["name"])


def _current(jobs: list[Job], rev: str) -> list[Job]:
    """The worker Jobs of revision `rev`."""
    return [j for j in jobs if labels_of(j).get(REVISION_LABEL) == rev]


def recent_failures(previous: Failures, jobs: list[Job], now: datetime) -> Failures:
    """Pod failures per worker Job as events in time: `seen` is the failed count last read
    per Job uid, `recent` the increases ({uid, time, failed}) within FAILURE_WINDOW of Jobs
    that still exist. Kept in status, so an operator restart loses no history."""
    uids = {_uid(j): int(job_status(j).get("failed") or 0) for j in jobs}
    seen = dict(previous.get("seen") or {})
    recent = [e for e in previous.get("recent") or []
              if e.get("uid") in uids and (t := parse_time(e.get("time"))) is not None
              and now - t < FAILURE_WINDOW]
    for uid, failed in sorted(uids.items()):
        new = failed - int(seen.get(uid, 0))
        if new > 0:
            recent.append({"uid": uid, "time": _text(now), "failed": new})
    return {"seen": uids, "recent": recent}


# How a disrupted pod is told apart: the DisruptionTarget condition's reason
# (TerminationByKubelet: node-pressure eviction or graceful node shutdown;
# EvictionByEvictionAPI: a drain; PreemptionByScheduler; DeletionByTaintManager), or the
# kubelet's pod status reason Evicted where the condition is missing.
DISRUPTION_CONDITION = "DisruptionTarget"
MESSAGE_CHARS = 200


def disrupted_pod(pod: Mapping[str, Any]) -> Disrupted | None:
    """A worker pod as the pod index keeps it: only a disrupted one (None otherwise, so the
    index holds no healthy pod)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    job = labels.get("batch.kubernetes.io/controller-uid") or labels.get("controller-uid")
    if not job:
        return None
    cond = next((c for c in status.get("conditions") or []
                 if c.get("type") == DISRUPTION_CONDITION and c.get("status") == "True"), None)
    if cond is None and status.get("reason") != "Evicted":
        return None
    src = cond or status
    return {"job": str(job), "pod": str(meta.get("name") or ""),
            "revision": str(labels.get(REVISION_LABEL) or ""),
            "reason": str(src.get("reason") or "Evicted"),
            "message": str(src.get("message") or "")[:MESSAGE_CHARS],
            "time": str((cond or {}).get("lastTransitionTime") or status.get("startTime") or "")}


def disruptions(previous: Disruptions, pods: Sequence[Disrupted]) -> Disruptions:
    """Disrupted worker pods, counted for good: the failure policy ignores a disruption
    (the index runs again, nothing counts against its retries), so without this an eviction
    loop (node disk or memory pressure, spot reclaims) would never show. Per worker Job uid
    the most disrupted pods seen at once: pods the garbage collector removed stay counted
    (the Job controller keeps a Job's failed pods; only the cluster's terminated-pod GC
    removes them, and new disruptions in the same round as such a removal may be counted
    short). A Job with no disrupted pod left leaves `seen`."""
    by_job: dict[str, list[Disrupted]] = {}
    for p in pods:
        by_job.setdefault(p["job"], []).append(p)
    seen_before = previous.get("seen") or {}
    total = int(previous.get("total") or 0)
    by_reason = dict(previous.get("byReason") or {})
    seen: dict[str, int] = {}
    last = previous.get("last")
    for job, items in sorted(by_job.items()):
        items.sort(key=lambda p: (p.get("time") or "", p.get("pod") or ""))
        before = int(seen_before.get(job, 0))
        seen[job] = max(before, len(items))
        for p in items[before:]:  # the newest are the ones not counted yet
            total += 1
            reason = p.get("reason") or "Evicted"
            by_reason[reason] = by_reason.get(reason, 0) + 1
            if last is None or (p.get("time") or "") >= (last.get("time") or ""):
                last = p
    out: Disruptions = {"total": total, "byReason": by_reason, "seen": seen}
    if last is not None:
        out["last"] = last
    return out


def failures_in_window(failures: Failures, job: Job) -> int:
    return sum(int(e.get("failed") or 0) for e in failures.get("recent") or []
               if e.get("uid") == _uid(job))


def retry_delay(attempts: int) -> timedelta:
    """How long to wait before recreating a worker Job that failed `attempts` times."""
    return min(RETRY_BASE * (1 << max(0, attempts - 1)), RETRY_MAX)


@dataclass(frozen=True)
class Retry:
    """What to do about one failed worker Job: recreate it now, or wait until `at`."""

    job: str
    group: str
    attempts: int
    at: datetime
    now: bool


def retries(previous: dict[str, RetryRecord], jobs: list[Job], rev: str,
            now: datetime) -> tuple[dict[str, RetryRecord], list[Retry]]:
    """The retry record of failed worker Jobs (status.retries: per group, or per group and
    slice, the attempts, the uid of the failed Job counted last and the next retry time),
    and the Jobs due now. A group whose Job runs again without a failure in the window
    starts over at 0. A slice JobSet (jobsets.as_worker_job) restarts its own slice
    (maxRestarts); one that spent them (spot TPU slices reclaimed over and over) is
    recreated here with the same backoff, so a spot campaign does not lose the slice for
    good. One failed by its fatal rule (exit 2, a deadline: jobsets.FATAL_JOB_REASONS) is
    not: a new slice would fail the same way."""
    present = {_retry_key(j) for j in jobs}
    # A group between the deletion of its failed Job and the new one keeps its count.
    record = {g: e for g, e in previous.items() if g not in present}
    due: list[Retry] = []
    for job in jobs:
        labels = labels_of(job)
        if labels.get(REVISION_LABEL) != rev:
            continue
        failed = _job_condition(job, "Failed")
        if (job.get("kind") == jobsets.KIND and failed is not None
                and failed.get("reason") != jobsets.SPENT_RESTARTS):
            continue
        group = _retry_key(job)
        before: RetryRecord = previous.get(group) or {}
        if _job_condition(job, "Failed") is None:
            if before and before.get("failedUid") != _uid(job):
                record[group] = before  # recreated: keep counting until it proves healthy
            continue
        if before.get("failedUid") == _uid(job):
            entry = before
        else:
            attempts = int(before.get("attempts") or 0) + 1
            entry = {"attempts": attempts, "failedUid": _uid(job),
                     "nextRetry": _text(now + retry_delay(attempts))}
        record[group] = entry
        at = parse_time(entry.get("nextRetry")) or now
        due.append(Retry(job["metadata"]["name"], group, int(entry.get("attempts") or 0), at,
                         now >= at))
    return record, due


def _retry_key(job: Job) -> str:
    """Whose retries a worker Job's are: its group's; a slice JobSet's, its group's slice."""
    labels = labels_of(job)
    group = str(labels.get(GROUP_LABEL) or job["metadata"]["name"])
    if job.get("kind") == jobsets.KIND and SLICE_LABEL in labels:
        return f"{group}/s{labels[SLICE_LABEL]}"
    return group


def healthy_again(record: dict[str, RetryRecord], jobs: list[Job], rev: str,
                  failures: Failures) -> dict[str, RetryRecord]:
    """Drop the retry record of groups whose current Job has active pods and no failure in
    the window: the next failure starts the backoff from its base again."""
    out = dict(record)
    for job in jobs:
        labels = labels_of(job)
        group = _retry_key(job) if GROUP_LABEL in labels else None
        if (group is not None and labels.get(REVISION_LABEL) == rev and group in out
                and out[group].get("failedUid") != _uid(job)
                and int(job_status(job).get("active") or 0) > 0
                and failures_in_window(failures, job) == 0):
            del out[group]
    return out


def counters(reports: list[WorkerReport]) -> Counters:
    findings: dict[str, int] = {}
    signatures: set[str] = set()
    for r in reports:
        for verdict, n in r.findings_by_verdict().items():
            findings[verdict] = findings.get(verdict, 0) + n
        signatures.update(r.signatures)
    return {
        "programs": sum(r.programs for r in reports),
        "executions": sum(r.executions for r in reports),
        "elapsedSeconds": round(sum(r.elapsed_s for r in reports), 3),
        "findings": dict(sorted(findings.items())),
        "findingsTotal": sum(findings.values()),
        "signatures": len(signatures),
    }


def budget_spent(spec: CampaignSpec, programs: int, start: datetime | None,
                 now: datetime) -> bool:
    budget = spec.budget
    if budget.continuous:
        return False
    if budget.programs is not None and programs >= budget.programs:
        return True
    return bool(budget.seconds is not None and start is not None
                and (now - start).total_seconds() >= budget.seconds)


def _fresh(report: WorkerReport, now: datetime) -> bool:
    updated = parse_time(report.updated)
    return updated is not None and now - updated < REPORT_FRESH


def running_workers(jobs: list[Job], reports: list[WorkerReport], now: datetime) -> bool:
    """Some worker runs: a pod is ready, or a worker reported recently. Not `active`: a
    Job counts its Pending pods (unscheduled, pulling the image) as active, and a Pending
    pod has done nothing."""
    return (any(int(job_status(j).get("ready") or 0) > 0 for j in jobs)

            or any(_fresh(r, now) for r in reports))


@dataclass(frozen=True)
class Observed:
    """What health() reads, once: the campaign's spec and children at one roll-up."""

    spec: CampaignSpec
    jobs: list[Job]  # every revision's
    current: list[Job]  # the current revision's
    reports: list[WorkerReport]
    programs: int
    now: datetime
    failures: Failures
    retry_at: dict[str, Retry]
    spent: bool  # budget_spent()
    all_done: bool  # every worker Job of the current revision is Complete

    def ready_pods(self) -> int:
        return sum(int(job_status(j).get("ready") or 0) for j in self.current)


def _kind(job: Job) -> str:
    return job.get("kind") or "Job"


def _stalled(o: Observed) -> Health | None:
    """A worker Job failed for good, or its pods keep failing."""
    for job in o.current:
        name = job["metadata"]["name"]
        failed = _job_condition(job, "Failed")
        if failed:
            why = failed.get("message") or failed.get("reason") or "failed"
            r = o.retry_at.get(name)
            when = f"; recreating it (attempt {r.attempts}) at {_text(r.at)}" if r else ""
            return Health("Stalled", "WorkerJobFailed", f"{_kind(job)} {name}: {why}{when}")
        n_failed = failures_in_window(o.failures, job)
        limit = failure_limit(int(job_spec(job).get("completions") or 1))
        if n_failed >= limit:
            what = ("restarts of its slice" if job.get("kind") == jobsets.KIND
                    else "worker pods failed")
            return Health("Stalled", "WorkersFailing",
                          f"{_kind(job)} {name}: {n_failed} {what} in the last "
                          f"{int(FAILURE_WINDOW.total_seconds() // 60)} minutes (limit {limit})")
    return None


def _done(o: Observed) -> Health | None:
    """The budget is spent or every worker finished. Workers whose pods are up are finishing
    their shards (the last programs, the summary, the report): stopping them now would cut
    that short, so Completed (which suspends the Jobs) waits for them. Pending pods have
    done nothing and are stopped."""
    if o.spent and not o.all_done and (finishing := o.ready_pods()):
        return Health("Running", "Finishing", f"budget spent ({o.programs} programs); "
                                              f"{finishing} workers finishing their shards")
    if o.spent or o.all_done:
        return Health("Completed", "WorkersFinished" if o.all_done else "BudgetSpent",
                      f"{o.programs} programs run")
    return None


def _suspended(o: Observed) -> Health | None:
    if o.spec.suspend:
        return Health("Suspended", "Suspended", "spec.suspend is true; results are kept")
    return None


def _converging(o: Observed) -> Health | None:
    """Worker Jobs of the current revision are still to be made, or older ones to go."""
    n_groups = job_count(o.spec)
    if len(o.current) < n_groups:
        return Health("Pending", "CreatingWorkers", f"{len(o.current)}/{n_groups} worker Jobs exist")
    if len(o.current) < len(o.jobs):
        return Health("Running", "RollingWorkers", "replacing worker Jobs of an older revision")
    return None


def _waiting(o: Observed) -> Health | None:
    """No worker runs yet: Kueue has not admitted them, or their pods are not up."""
    queue = o.spec.queueName
    queued = Health("Pending", QUEUED, f"waiting for Kueue to admit the workers (queue {queue})"
                    + ("; capacity asked for by its ProvisioningRequest" if o.spec.provisioning else ""))
    # Kueue holds every worker Job suspended (not admitted yet, or preempted): nothing runs,
    # whatever the reports say (a preempted worker's last report stays fresh for a while).
    if queue and o.current and all(job_spec(j).get("suspend") for j in o.current):
        return queued
    if running_workers(o.current, o.reports, o.now):
        return None
    if queue and any(job_spec(j).get("suspend") for j in o.current):
        return queued
    return Health("Pending", "WaitingForWorkers", "no worker pod is running")


# The questions health() asks in order; the first that answers gives the phase.
HEALTH_CHECKS: tuple[Callable[[Observed], Health | None], ...] = (
    _stalled, _done, _suspended, _converging, _waiting)


def health(spec: CampaignSpec, jobs: list[Job], reports: list[WorkerReport],
           rev: str, programs: int, start: datetime | None, now: datetime,
           failures: Failures | None = None, due: Sequence[Retry] = ()) -> Health:
    """The phase and why. `jobs` are the campaign's worker Jobs of every revision;
    `failures` is recent_failures() (default: every failed pod counts as recent)."""
    current = _current(jobs, rev)
    o = Observed(spec=spec, jobs=jobs, current=current, reports=reports, programs=programs,
                 now=now, failures=recent_failures({}, current, now) if failures is None
                 else failures, retry_at={r.job: r for r in due},
                 spent=budget_spent(spec, programs, start, now),
                 all_done=(len(current) == job_count(spec)
                           and all(_job_condition(j, "Complete") for j in current)))
    for check in HEALTH_CHECKS:
        if (h := check(o)) is not None:
            return h
    active = sum(int(job_status(j).get("active") or 0) for j in current)
    return Health("Running", "Running", f"{active} worker pods active")


def conditions(h: Health, generation: int, previous: list[Condition],
               now_text: str) -> list[Condition]:

    """kstatus conditions: Ready while running or done, Reconciling while converging,
    Stalled when it cannot make progress. Waiting for Kueue to admit the workers (reason
    Queued) is none of them: a steady state that may last as long as the quota is taken,
    so Ready is False with reason Queued and Reconciling False, and Flux `wait` and Argo
    CD (deploy/argocd/health.lua: Suspended) do not wait on it as on a rollout. Transition
    times survive unchanged statuses."""
    queued = h.reason == QUEUED
    truth = {
        # Ready: workers run (health says Running only then) or the campaign is done.
        "Ready": h.phase in ("Running", "Completed") and h.reason != "RollingWorkers",
        "Reconciling": (h.phase == "Pending" and not queued) or h.reason == "RollingWorkers",
        "Stalled": h.phase == "Stalled",
    }
    old = {c.get("type"): c for c in previous}
    out: list[Condition] = []
    for kind in _CONDITION_TYPES:
        status = "True" if truth[kind] else "False"
        before = old.get(kind)
        changed = before is None or before.get("status") != status
        out.append({
            "type": kind, "status": status, "reason": h.reason, "message": h.message,
            "observedGeneration": generation,
            "lastTransitionTime": (now_text if before is None or changed
                                   else before.get("lastTransitionTime", now_text)),
        })
    return out


# Bounds of the per-worker lists in a campaign's status: it must stay far below the API
# server's object limit (etcd's default request limit is 1.5 MiB) whatever the campaign's
# size and age. Per worker and revision, an entry took ~160 bytes (670 KB per revision at
# 4,096 workers); the lists keep the entries worth a look, and workerStats / the totals
# count the rest.
WORKER_SUMMARY_MAX = 50
ERRORS_MAX = 10
ERROR_CHARS = 400


def _by_worker(r: WorkerReport) -> tuple[tuple[str, int], str]:
    return _worker_key(r.worker), r.revision


def worker_summary(reports: list[WorkerReport], rev: str = "",
                   limit: int = WORKER_SUMMARY_MAX) -> list[WorkerSummary]:
    """Per worker and revision: programs, findings, attempts, last report; listed by worker.
    With more than `limit` reports, the ones most worth a look: the current revision's
    first, then the most restarted, then those whose last report is oldest."""
    def notable(r: WorkerReport) -> tuple[bool, int, str, int, tuple[str, int], str]:
        return (r.revision not in (rev, ""), -r.attempts, r.updated or "~", r.programs,
                *_by_worker(r))

    chosen = sorted(reports, key=notable)[:limit] if len(reports) > limit else reports
    return [{"worker": r.worker, "revision": r.revision, "programs": r.programs,
             "executions": r.executions, "findings": r.findings_total(),
             "attempts": r.attempts, "lastReport": r.updated}
            for r in sorted(chosen, key=_by_worker)]


def worker_stats(reports: list[WorkerReport], rev: str,
                 limit: int = WORKER_SUMMARY_MAX) -> WorkerStats:
    """What workerSummary leaves out, counted: reports of every revision (`reports`, of
    which `listed` are in workerSummary) and over the current revision's workers the
    least and most programs, the most attempts, how many restarted (attempts > 1), and the
    oldest and newest last report."""
    current = [r for r in reports if r.revision in (rev, "")]
    out: WorkerStats = {"reports": len(reports), "listed": min(len(reports), limit),
                        "revisions": len({r.revision for r in reports}),
                        "workers": len(current)}
    if current:
        out.update({"programsMin": min(r.programs for r in current),
                    "programsMax": max(r.programs for r in current),
                    "attemptsMax": max(r.attempts for r in current),
                    "restarted": sum(1 for r in current if r.attempts > 1)})
        updated = [r.updated for r in current if r.updated]
        if updated:
            out.update({"oldestReport": min(updated), "newestReport": max(updated)})

    return out


def report_errors(reports: list[WorkerReport]) -> list[ReportError]:
    """Workers whose last report write the API server refused (their spec.error), by
    worker; status.reportErrors holds the first ERRORS_MAX."""
    return [{"worker": r.worker, "revision": r.revision, "error": r.error[:ERROR_CHARS]}
            for r in sorted(reports, key=_by_worker) if r.error]


def storage_errors(reports: list[WorkerReport], rev: str) -> list[StorageError]:
    """Workers of the current revision whose artifact store does not answer (their report's
    `storage`): they keep fuzzing and keep the findings on the pod's disk until it does.
    Older revisions' pods are retired, and their last word would otherwise stay forever.
    All of them, by worker: the condition sums them up, status.storageErrors holds the first
    ERRORS_MAX."""
    return [{"worker": r.worker, "revision": r.revision,
             "uri": str(r.storage.get("uri") or "")[:ERROR_CHARS],
             "reason": str(r.storage.get("reason") or "")[:ERROR_CHARS],
             "pending": int(r.storage.get("pending") or 0), "since": str(r.storage.get("since") or "")}
            for r in sorted(reports, key=_by_worker)
            if r.revision in (rev, "") and r.storage and not r.storage.get("ok", True)]


STORAGE_CONDITION = "StorageAvailable"


def storage_condition(errors: list[StorageError], reports: list[WorkerReport], rev: str,
                      generation: int, previous: list[Condition],
                      now_text: str) -> Condition | None:
    """StorageAvailable: False while a worker of this revision cannot reach the artifact
    store (the first one's reason, and how many findings wait on pods' disks), True once
    every worker that mirrors says it answers; None while no worker has said either."""
    if not errors and not any(r.storage for r in reports if r.revision in (rev, "")):
        return None
    if errors:
        first = errors[0]
        waiting = sum(e["pending"] for e in errors)
        reason, status = "StorageUnavailable", "False"
        message = (f"{len(errors)} worker(s) cannot store findings ({waiting} waiting on pods' "
                   f"disks, kept and retried); {first['worker']} since {first['since']}: "
                   f"{first['reason']}")[:1000]
    else:
        reason, status, message = "StorageAvailable", "True", "every worker's artifact store answers"
    before = next((c for c in previous if c.get("type") == STORAGE_CONDITION), None)
    return {"type": STORAGE_CONDITION, "status": status, "reason": reason, "message": message,
            "observedGeneration": generation,
            "lastTransitionTime": (before.get("lastTransitionTime", now_text)
                                   if before is not None and before.get("status") == status
                                   else now_text)}


def storage_outage(previous: list[Condition], new: list[Condition]) -> str | None:
    """The message of a StorageUnavailable Event when this roll-up starts an outage (the
    condition turns False), else None: one Event per outage, kept across operator restarts
    because the condition lives in the campaign's status."""
    def false(conds: list[Condition]) -> Condition | None:
        return next((c for c in conds if c.get("type") == STORAGE_CONDITION
                     and c.get("status") == "False"), None)

    started = false(new)
    return str(started.get("message")) if started is not None and false(previous) is None else None


def _worker_key(worker: str) -> tuple[str, int]:
    group, _, index = worker.rpartition("-")
    return (group, int(index)) if index.isdigit() else (worker, -1)


def status(spec: CampaignSpec, generation: int, jobs: list[Job],
           reports: list[WorkerReport], rev: str, previous: CampaignStatus,
           now: datetime, disrupted: Sequence[Disrupted] = ()) -> CampaignStatus:
    """The whole status block of a campaign from its children (`disrupted`: its disrupted
    worker pods, the pod index's) and its previous status."""
    now_text = _text(now)
    totals = counters(reports)
    current = _current(jobs, rev)
    failures = recent_failures(previous.get("failures") or {}, current, now)
    record, due = retries(previous.get("retries") or {}, jobs, rev, now)
    record = healthy_again(record, jobs, rev, failures)
    # The budget clock starts when a worker first runs, not when the campaign is created:
    # time queued (Kueue, no capacity, image pulls) is not spent.
    start_text = previous.get("startTime") or (
        now_text if running_workers(current, reports, now) or reports else None)
    h = health(spec, jobs, reports, rev, totals["programs"], parse_time(start_text), now,
               failures, due)
    statuses = [job_status(j) for j in current]
    previous_conditions = previous.get("conditions") or []
    conds = conditions(h, generation, previous_conditions, now_text)
    stored = storage_errors(reports, rev)
    refused = report_errors(reports)
    storage = storage_condition(stored, reports, rev, generation, previous_conditions, now_text)
    if storage is not None:
        conds.append(storage)
    out: CampaignStatus = {
        "phase": h.phase,
        "observedGeneration": generation,
        "revision": rev,
        "programs": totals["programs"],
        "executions": totals["executions"],
        "elapsedSeconds": totals["elapsedSeconds"],
        "findings": totals["findings"],
        "findingsTotal": totals["findingsTotal"],
        "signatures": totals["signatures"],
        "workers": {

            "desired": pod_count(spec),
            "active": sum(int(s.get("active") or 0) for s in statuses),
            "succeeded": sum(int(s.get("succeeded") or 0) for s in statuses),
            "failed": sum(int(s.get("failed") or 0) for s in statuses),
            "reporting": sum(1 for r in reports if r.revision in (rev, "")),
        },
        "workerSummary": worker_summary(reports, rev),
        "workerStats": worker_stats(reports, rev),
        "reportErrors": refused[:ERRORS_MAX],
        "reportErrorsTotal": len(refused),
        "storageErrors": stored[:ERRORS_MAX],
        "storageErrorsTotal": len(stored),
        "failures": failures,
        "disruptions": disruptions(previous.get("disruptions") or {}, disrupted),
        "retries": record,
        "conditions": conds,
    }
    if start_text:
        out["startTime"] = start_text
    if h.phase == "Completed":
        out["completionTime"] = previous.get("completionTime") or now_text
    if last_alert := previous.get("lastAlertTime"):
        out["lastAlertTime"] = last_alert

    return out
