"""Ingest WorkerReports: a worker's cumulative report becomes BugSignature hits (created,
counted, regressed, alerted), a Job's result goes to followups.py, and a report this
operator cannot read or the API server refused is announced once.

Idempotent by construction: a report is cumulative and a signature stores each worker's
own count, so ingesting the same report twice writes the same values; `rt.ingested` and
`rt.hits_seen` only skip work already done.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import cast

from xla_sentinel.cluster.report import (
    REPORT_PLURAL,
    SignatureEntry,
    WorkerReport,
    report_from_object,
    report_problem,
    result_from_object,
)
from xla_sentinel.spec.campaign import API_VERSION

from . import agents, desired, signatures
from .bodies import BugSignature, KubeObject, Result, sig_spec, sig_status
from .bodies import WorkerReport as WorkerReportBody
from .followups import ingest_result, result_key, start_bisectors, start_verification
from .kube import ApiError, path
from .notify import maybe_alert
from .runtime import CONFLICT_ATTEMPTS, Runtime, campaign_ref, log, now_text, object_ref


async def report_object(rt: Runtime, c: desired.Campaign, obj: WorkerReportBody) -> None:
    """One WorkerReport object of campaign `c`, as a watch event brings it: a worker's
    report, one this operator cannot read, or a bisector's or verification's result."""
    meta = obj["metadata"]
    # cluster.report reads the raw object (its own schema of a report's spec).
    raw = cast(dict[str, object], obj)
    report = report_from_object(raw)
    if report is not None:
        await ingest_report(rt, c, meta["name"], report)
        return
    problem = report_problem(raw)
    if problem is not None:
        await report_unreadable(rt, c, meta["name"], str(meta.get("resourceVersion")), problem)
        return
    result = result_from_object(raw)
    if result is not None:
        # result_from_object let through only the types of Result, as the engine writes them.
        await ingest_result_once(rt, c, meta["name"], result_key(obj), cast(Result, result))


def essentials(obj: WorkerReportBody) -> WorkerReportBody:
    """What report_object() reads of a WorkerReport object (its name, namespace, version and
    spec), kept while its ingestion waits: not the managed fields and the rest of the body."""
    meta = obj["metadata"]
    kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}
    return cast(WorkerReportBody, {"metadata": kept, "spec": dict(obj.get("spec") or {})})


async def read_report(rt: Runtime, namespace: str, name: str) -> WorkerReportBody | None:
    """A WorkerReport read from the API, as essentials() keeps it; None once it is gone."""
    obj = await rt.api.get(path(API_VERSION, REPORT_PLURAL, namespace, name), WorkerReportBody)
    return essentials(obj) if obj is not None else None


async def ingest_result_once(rt: Runtime, c: desired.Campaign, name: str, key: str,
                             result: Result) -> None:
    """A result object ingests once per content (`key`); its events and the catch-up
    re-ingestion bring it again."""
    if rt.ingested.get((c.namespace, name)) != key:
        # A fix agent pod's drafts (agents.py); a bisector's or verifier's result otherwise.
        if result["type"] == "fixDraft":
            await agents.ingest_fix_drafts(rt, c, name, result)
        else:
            await ingest_result(rt, c, name, result)
        rt.ingested[(c.namespace, name)] = key


async def catch_up(rt: Runtime, c: desired.Campaign,
                   reports: list[tuple[str, WorkerReport, str]],
                   results: list[tuple[str, str, Result]]) -> None:
    """Ingest the reports (name, slim report, fingerprint of the whole: the index's) and
    results (name, key, result) of a campaign whose last event failed to ingest (an API
    error mid-way). The index holds reports without their samples (slim()), so a report
    still to ingest is read whole from the API."""
    for name, _, whole in reports:
        if rt.ingested.get((c.namespace, name)) == whole or rt.backlog.holds((c.namespace, name)):
            continue  # ingested, or its event's ingestion is still to come (runtime.Backlog)
        obj = await rt.api.get(path(API_VERSION, REPORT_PLURAL, c.namespace, name), KubeObject)
        report = report_from_object(cast(dict[str, object], obj)) if obj is not None else None
        if report is not None:
            await ingest_report(rt, c, name, report)
    for name, key, result in results:
        await ingest_result_once(rt, c, name, key, result)


def slim(report: WorkerReport) -> WorkerReport:
    """A report as the operator keeps it in memory (the reports index): what the roll-up
    reads (counts, verdicts, signatures, storage, attempts), without the findings' samples
    and the coverage, most of a report's up to 512 KiB. Ingestion reads the whole report
    (its event, or the API: catch_up)."""
    return dataclasses.replace(
        report, coverage={},
        signatures={k: dataclasses.replace(e, samples=[]) for k, e in report.signatures.items()})


async def ingest_report(rt: Runtime, c: desired.Campaign, name: str, report: WorkerReport) -> None:
    """Every signature of one worker's report, then the report counts as ingested."""
    rt.metrics.reports_ingested.inc()
    await announce_refusal(rt, c, name, report)
    for signature, entry in sorted(report.signatures.items()):
        await ingest_signature(rt, c, report.worker, signature, entry, report.versions,
                               report.revision)
    rt.ingested[(c.namespace, name)] = fingerprint(report)


def fingerprint(report: WorkerReport) -> str:
    """What a report says, as a key of what was ingested. Not `report.updated`: it has a
    resolution of one second, and a worker writes its empty report and its first finding
    within one; a failed ingestion of the second then looked done."""
    text = json.dumps(dataclasses.asdict(report), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


async def announce_refusal(rt: Runtime, c: desired.Campaign, name: str, report: WorkerReport) -> None:
    """A Warning Event on the campaign when the API server refused a worker's report (the
    roll-up puts it in status.reportErrors); once per distinct error."""
    key = (c.namespace, name)
    if not report.error:
        rt.announced.pop(key, None)
        return
    if rt.announced.get(key) == report.error:
        return
    await rt.event(campaign_ref(c), "Warning", "ReportRefused",
                   f"worker {report.worker}: {report.error}"[:1000])
    log.error("report.refused", campaign=c.name, namespace=c.namespace, report=name,
              error=report.error)
    rt.announced[key] = report.error


async def report_unreadable(rt: Runtime, c: desired.Campaign, name: str, version: str,
                      problem: str) -> None:
    """A report this operator cannot read (a worker of another version, or garbage) counts
    for nothing, and says so once per version of the object; the other reports go on."""
    if rt.unreadable.get((c.namespace, name)) == version:
        return
    rt.unreadable[(c.namespace, name)] = version
    log.error("report.unreadable", campaign=c.name, namespace=c.namespace, report=name,
              problem=problem)
    await rt.event(campaign_ref(c), "Warning", "ReportUnreadable",
                   f"WorkerReport {name} is not counted: {problem}")


async def ingest_signature(rt: Runtime, c: desired.Campaign, worker: str, signature: str,
                           entry: SignatureEntry, versions: dict[str, str],
                           revision: str = "") -> None:
    """Upsert one signature from one worker's report: create or count, regress, alert."""
    ns = c.namespace
    seen_key = (ns, signature, signatures.hit_key(c.name, worker, revision))
    if rt.hits_seen.get(seen_key) == entry.count:
        return
    sig_path = path(API_VERSION, "bugsignatures", ns)
    name = signatures.signature_name(signature)
    async with rt.lock(ns, signature):
        created = False
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            found = await rt.api.get(f"{sig_path}/{name}", BugSignature)
            if found is None:
                found, created = await rt.api.create(sig_path, signatures.new_signature(
                    c, worker, signature, entry, versions))
            try:
                sig, regressed = await count_hits(rt, c, worker, entry, found, versions, revision)

                break
            except ApiError as e:
                # Someone (a person setting state, another handler) wrote in between:
                # read again and recompute rather than overwrite their change.
                if e.status != 409 or attempt == CONFLICT_ATTEMPTS:
                    raise
                log.info("signature.conflict", signature=signature, namespace=ns, attempt=attempt)
        if created or regressed:
            reason = "regressed" if regressed else "new"
            rt.metrics.signatures.labels(ns, entry.verdict, reason).inc()
            message = (f"{reason} bug signature {signature}: {entry.verdict} "
                       f"({(entry.samples[0] if entry.samples else {}).get('culprit_op') or 'op unknown'})"
                       f" from {c.name}/{worker}")
            reason_text = "BugSignatureRegressed" if regressed else "NewBugSignature"
            for obj in (object_ref(sig, "BugSignature"), campaign_ref(c)):
                await rt.event(obj, "Warning", reason_text, message)
            log.warning(f"signature.{reason}", campaign=c.name, namespace=ns,
                        signature=signature, verdict=entry.verdict, worker=worker)
        await maybe_alert(rt, c, sig)
        rt.hits_seen[seen_key] = entry.count


async def count_hits(rt: Runtime, c: desired.Campaign, worker: str, entry: SignatureEntry,
                     sig: BugSignature, versions: dict[str, str] | None = None,
                     revision: str = "") -> tuple[BugSignature, bool]:
    """Write `worker`'s count into the signature read as `sig` (guarded by its
    resourceVersion), record a regression; (the signature written, whether it regressed)."""
    meta = sig["metadata"]
    sig_path = path(API_VERSION, "bugsignatures", meta["namespace"], meta["name"])
    spec, status = sig_spec(sig), sig_status(sig)
    update = signatures.hits_update(status, c.name, worker, entry, revision,
                                    desired.revision(c.spec))
    if update is None:
        return sig, False
    seen = signatures.seen_on(status.get("seenOn"), versions, entry.last_seen or now_text())
    if seen is not None:
        update["seenOn"] = seen
    regressed = signatures.regressed(spec, status, versions)
    if regressed:
        update.update(signatures.regression(sig))
    bisects = await start_bisectors(rt, c, worker, entry, status)
    if bisects:
        update["bisectJobs"] = bisects
    if not regressed and signatures.verification_owed(spec, status, update):
        # Fixed before any campaign was listed, so mark_fixed had none to run it on. Started
        # before the write that lists one: a failed start is retried with the report, and
        # a repeated one creates nothing (the Job's name is fixed).
        await start_verification(rt, c, sig)
    sig = await rt.api.patch(f"{sig_path}/status", signatures.guarded(sig, {"status": update}),
                             BugSignature)
    return sig, regressed

