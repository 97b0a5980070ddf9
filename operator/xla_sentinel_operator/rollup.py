"""Pure roll-up of a campaign's children (worker Jobs, worker reports) into its status:
phase, counters, per-worker summary, and the Ready / Reconciling / Stalled conditions that
GitOps tools (Flux kstatus) read, each with observedGeneration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from xla_sentinel.campaign import CampaignSpec
from xla_sentinel.k8s_report import WorkerReport

from .desired import REVISION_LABEL, worker_groups

_CONDITION_TYPES = ("Ready", "Reconciling", "Stalled")


@dataclass(frozen=True)
class Health:
    phase: str
    reason: str
    message: str


def _job_condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def failure_limit(completions: int) -> int:
    """Failed pods in one Job that mean "failing repeatedly" rather than a preemption."""
    return max(3, completions // 10)


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def counters(reports: list[WorkerReport]) -> dict[str, Any]:
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


def health(spec: CampaignSpec, jobs: list[dict[str, Any]], reports: list[WorkerReport],
           rev: str, programs: int, start: datetime | None, now: datetime) -> Health:
    """The phase and why. `jobs` are the campaign's worker Jobs of every revision."""
    current = [j for j in jobs if j["metadata"].get("labels", {}).get(REVISION_LABEL) == rev]
    for job in current:
        failed = _job_condition(job, "Failed")
        if failed:
            return Health("Stalled", "WorkerJobFailed",
                          f"Job {job['metadata']['name']}: {failed.get('message') or failed.get('reason') or 'failed'}")
        n_failed = int((job.get("status") or {}).get("failed") or 0)
        limit = failure_limit(int(job.get("spec", {}).get("completions") or 1))
        if n_failed >= limit:
            return Health("Stalled", "WorkersFailing",
                          f"Job {job['metadata']['name']}: {n_failed} worker pods failed "
                          f"(limit {limit})")
    n_groups = len(worker_groups(spec))
    all_done = (len(current) == n_groups
                and all(_job_condition(j, "Complete") for j in current))
    if budget_spent(spec, programs, start, now) or all_done:
        return Health("Completed", "BudgetSpent" if not all_done else "WorkersFinished",
                      f"{programs} programs run")
    if spec.suspend:
        return Health("Suspended", "Suspended", "spec.suspend is true; results are kept")
    if len(current) < n_groups:
        return Health("Pending", "CreatingWorkers", f"{len(current)}/{n_groups} worker Jobs exist")
    if len(current) < len(jobs):
        return Health("Running", "RollingWorkers", "replacing worker Jobs of an older revision")
    active = sum(int((j.get("status") or {}).get("active") or 0) for j in current)
    if active == 0 and not reports:
        return Health("Pending", "WaitingForWorkers", "no worker pod is running yet")
    return Health("Running", "Running", f"{active} worker pods active")


def conditions(h: Health, generation: int, previous: list[dict[str, Any]],
               now_text: str) -> list[dict[str, Any]]:
    """kstatus conditions: Ready while running or done, Reconciling while converging,
    Stalled when it cannot make progress. Transition times survive unchanged statuses."""
    truth = {
        "Ready": h.phase in ("Running", "Completed", "Suspended") and h.reason != "RollingWorkers",
        "Reconciling": h.phase == "Pending" or h.reason == "RollingWorkers",
        "Stalled": h.phase == "Stalled",
    }
    old = {c.get("type"): c for c in previous}
    out = []
    for kind in _CONDITION_TYPES:
        status = "True" if truth[kind] else "False"
        before = old.get(kind) or {}
        changed = before.get("status") != status
        out.append({
            "type": kind, "status": status, "reason": h.reason, "message": h.message,
            "observedGeneration": generation,
            "lastTransitionTime": now_text if changed else before.get("lastTransitionTime", now_text),
        })
    return out


def worker_summary(reports: list[WorkerReport]) -> list[dict[str, Any]]:
    return [{"worker": r.worker, "programs": r.programs, "executions": r.executions,
             "findings": len(r.findings), "attempts": r.attempts, "lastReport": r.updated}
            for r in sorted(reports, key=lambda r: _worker_key(r.worker))]


def _worker_key(worker: str) -> tuple[str, int]:
    group, _, index = worker.rpartition("-")
    return (group, int(index)) if index.isdigit() else (worker, -1)


def status(spec: CampaignSpec, generation: int, jobs: list[dict[str, Any]],
           reports: list[WorkerReport], rev: str, previous: dict[str, Any],
           now: datetime) -> dict[str, Any]:
    """The whole status block of a campaign from its children and its previous status."""
    now_text = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    totals = counters(reports)
    start_text = previous.get("startTime") or now_text
    h = health(spec, jobs, reports, rev, totals["programs"], _parse_time(start_text), now)
    current = [j for j in jobs if j["metadata"].get("labels", {}).get(REVISION_LABEL) == rev]
    job_status = [j.get("status") or {} for j in current]
    out: dict[str, Any] = {
        "phase": h.phase,
        "observedGeneration": generation,
        "revision": rev,
        **totals,
        "workers": {
            "desired": spec.workers * len(worker_groups(spec)),
            "active": sum(int(s.get("active") or 0) for s in job_status),
            "succeeded": sum(int(s.get("succeeded") or 0) for s in job_status),
            "failed": sum(int(s.get("failed") or 0) for s in job_status),
            "reporting": len(reports),
        },
        "workerSummary": worker_summary(reports),
        "startTime": start_text,
        "conditions": conditions(h, generation, previous.get("conditions") or [], now_text),
    }
    if h.phase == "Completed":
        out["completionTime"] = previous.get("completionTime") or now_text
    if previous.get("lastAlertTime"):
        out["lastAlertTime"] = previous["lastAlertTime"]
    return out
