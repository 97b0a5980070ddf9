"""What follows a BugSignature's discovery and its fix: bisector Jobs localize a new bug,
verification Jobs rerun a fixed bug's repro on a new image; their results (WorkerReports
with `spec.result`) come back here and are written into the signatures.

The Jobs are desired.py's and the status fields signatures.py's; this module starts the
Jobs and writes each result into its signatures, under their locks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from xla_sentinel.cluster.report import CAMPAIGN_LABEL, SignatureEntry, label_value
from xla_sentinel.spec.campaign import API_VERSION

from . import desired, jobsets, signatures
from .bodies import (
    BisectionResult,
    BugSignature,
    BugSignatureStatus,
    Job,
    JobSet,
    Verification,
    VerificationResult,
    WorkerReport,
    Workload,
    labels_of,
    sig_spec,
    sig_status,
)
from .kube import ApiError, path
from .notify import CampaignIndex, maybe_alert, routing_campaign
from .runtime import CONFLICT_ATTEMPTS, Runtime, campaign_ref, log, now_text, object_ref


def result_key(obj: WorkerReport) -> str:
    """What a result object says, as a key of what was ingested (a result is written once)."""
    return str((obj.get("spec") or {}).get("result") or "")


async def start_bisectors(rt: Runtime, c: desired.Campaign, worker: str, entry: SignatureEntry,
                          status: BugSignatureStatus) -> list[str] | None:
    """Bisector Jobs for the first `bisect.perSignature` findings of a signature; the Job
    names of the signature's status.bisectJobs, or None when none was added."""
    started = list(status.get("bisectJobs") or [])
    want = c.spec.bisect.perSignature if c.spec.bisect.enabled else 0
    added = False
    for sample in entry.samples:
        if len(started) >= want:
            break
        job = desired.bisector_job(c, sample, worker, default_image=rt.runner_image(c),
                                   service_account=rt.config.jobs.service_account)
        if job["metadata"]["name"] in started:
            continue
        await rt.api.create(_collection(c, job), job)
        started.append(job["metadata"]["name"])
        added = True
        log.info("bisector.created", campaign=c.name, namespace=c.namespace,
                 signature=sample.get("signature"), job=job["metadata"]["name"])
    return started if added else None


def _collection(c: desired.Campaign, job: Workload) -> str:
    """Where a one-off Job goes: a slice JobSet (multi-host TPU) or a Job."""
    if job.get("kind") == jobsets.KIND:
        return path(jobsets.API_VERSION, jobsets.PLURAL, c.namespace)
    return path("batch/v1", "jobs", c.namespace)


async def start_verification(rt: Runtime, c: desired.Campaign, sig: BugSignature) -> None:
    """Run the signature's repro bundle on the campaign's runner image (a Job) once per
    image and fixing version; the result comes back as a `verification` result."""
    spec = sig_spec(sig)
    if not spec.get("repro"):
        log.info("verify.no_repro", signature=spec.get("signature"), namespace=c.namespace)
        return
    job = desired.verify_job(c, str(spec["signature"]), str(spec["repro"]),
                             str(spec.get("fixedIn") or ""),
                             default_image=rt.runner_image(c),
                             service_account=rt.config.jobs.service_account)
    _, created = await rt.api.create(_collection(c, job), job)
    if created:
        log.info("verify.created", campaign=c.name, namespace=c.namespace,
                 signature=spec.get("signature"), job=job["metadata"]["name"])


async def verify_on_new_image(rt: Runtime, c: desired.Campaign) -> None:
    """A campaign's new runner image may carry fixes: verify its fixed signatures on it."""
    items = await rt.api.list(path(API_VERSION, "bugsignatures", c.namespace), BugSignature, {})
    for sig in signatures.to_verify(items, c.name):
        await start_verification(rt, c, sig)


async def mark_fixed(rt: Runtime, namespace: str, name: str, campaigns: CampaignIndex) -> None:
    """A person set a signature's state to fixed: record fixedAt, resolve the alert that
    fired and verify the fix, routed by a campaign of the signature that still exists.
    With none listed yet, the verification waits for the first (ingest.count_hits)."""
    signature = name.removeprefix("sig-")
    async with rt.lock(namespace, signature):
        sig = await rt.api.get(path(API_VERSION, "bugsignatures", namespace, name), BugSignature)
        if sig is None or sig_spec(sig).get("state") != "fixed":
            return
        count = int(sig_status(sig).get("count") or 0)
        fixed_in = sig_spec(sig).get("fixedIn")
        if fixed_in and signatures.version_key(fixed_in) is None:
            # Every later hit then counts as a regression (signatures.at_or_after).
            await rt.event(object_ref(sig, "BugSignature"), "Warning", "InvalidFixedIn",
                           f"spec.fixedIn {fixed_in!r} is not a version (e.g. 0.10.3): "
                           "every new hit will count as a regression")
        # Guarded: a regression recorded in between would otherwise be undone (a 409
        # makes kopf retry this handler with a fresh read).
        fixed = await rt.api.patch(path(API_VERSION, "bugsignatures", namespace, name, "status"),
                                   signatures.guarded(sig, {"status": {
                                       "fixedAt": now_text(), "state": None,
                                       "regressedGeneration": None}}),
                                   BugSignature)
        # The status read under the lock, not the event's: a campaign listed since counts.
        listed = list(sig_status(fixed).get("campaigns") or [])
        c = routing_campaign(rt, namespace, listed, campaigns)
        if c is not None:
            await maybe_alert(rt, c, fixed)  # resolves the alert that fired
            await start_verification(rt, c, fixed)
    log.info("signature.fixed", signature=signature, namespace=namespace, count=count)


# The Job role whose pods write each kind of result, and the result field naming the
# signature that Job was started for.
RESULT_WRITERS = {"bisection": ("bisector", "candidate"), "verification": ("verifier", "signature")}


def result_problem(c: desired.Campaign, name: str,
                   result: BisectionResult | VerificationResult,
                   job: Job | JobSet | None) -> str | None:
    """Why a result object is not the result of a Job this operator started for it, or None.
    The chart's admission policy lets a pod write only the object named after its own Job
    (cluster.report.writer_name), so a result must be named after a bisector or verifier
    Job of this campaign started for the signature it speaks of: a worker, which may write
    its own report, cannot mark a fix verified or forge a bisection under its own name."""
    role, field = RESULT_WRITERS[str(result.get("type"))]
    labels = labels_of(job) if job is not None else {}
    raw: Mapping[str, object] = result
    signature = str(raw.get(field) or "")
    if job is None:
        return f"{name}: no Job of that name (a {result.get('type')} result comes from a {role} Job)"
    if labels.get(desired.ROLE_LABEL) != role or \
            labels.get(CAMPAIGN_LABEL) != desired.campaign_selector(c.name)[CAMPAIGN_LABEL]:
        return f"{name}: Job {name} is no {role} of campaign {c.name}"
    if labels.get(desired.SIGNATURE_LABEL) != label_value(signature):
        return f"{name}: Job {name} was started for another signature than {signature!r}"
    return None


async def ingest_result(rt: Runtime, c: desired.Campaign, name: str,
                        result: BisectionResult | VerificationResult) -> None:
    """A bisector's or verification's result (cluster.report.result_from_object) in the
    object `name`, written into its signatures when it comes from the Job it names
    (result_problem); otherwise a ResultRefused Event and nothing else."""
    job: Job | JobSet | None = await rt.api.get(path("batch/v1", "jobs", c.namespace, name), Job)
    owner = jobsets.jobset_of_writer(name)
    if job is None and owner is not None and rt.config.jobs.jobset:
        # Host 0 of a slice JobSet writes it (`<jobset>-hosts-0-0`): the JobSet says for what.
        job = await rt.api.get(path(jobsets.API_VERSION, jobsets.PLURAL, c.namespace, owner),
                               JobSet)
    problem = result_problem(c, name, result, job)
    if problem is not None:
        await rt.event(campaign_ref(c), "Warning", "ResultRefused", problem)
        log.warning("result.refused", campaign=c.name, namespace=c.namespace, reason=problem)
        return
    if result["type"] == "bisection":
        await ingest_bisection(rt, c, result)
    else:
        await ingest_verification(rt, c, result)


async def ingest_bisection(rt: Runtime, c: desired.Campaign, result: BisectionResult) -> None:
    """A bisector Job's result: the candidate signature records it; a localized culprit
    fills in the candidate's spec or, when it refines to another signature, creates that
    one (or reopens it when it was fixed) rather than a second copy of a known bug."""
    ns, candidate = c.namespace, str(result.get("candidate") or "")
    name = signatures.signature_name(candidate)
    job = str(result.get("job") or "")
    refined = str(result.get("signature") or candidate)
    localized = result.get("status") == "localized"
    recorded: BugSignature  # the candidate as read for the write that succeeded
    async with rt.lock(ns, candidate):
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            sig = await rt.api.get(path(API_VERSION, "bugsignatures", ns, name), BugSignature)
            if sig is None:
                log.warning("bisection.orphan", signature=candidate, namespace=ns)
                return
            recorded = sig
            fields: BugSignatureStatus = {"bisection": signatures.bisection_status(result, job)}
            if localized and refined != candidate:
                fields["refinedTo"] = refined
            try:
                await rt.api.patch(path(API_VERSION, "bugsignatures", ns, name, "status"),
                                   signatures.guarded(sig, {"status": fields}))
                break
            except ApiError as e:  # written in between: read again
                if e.status != 409 or attempt == CONFLICT_ATTEMPTS:
                    raise
        if localized and refined == candidate:
            await rt.api.patch(path(API_VERSION, "bugsignatures", ns, name),
                               {"spec": signatures.culprit_spec(result)})
    log.info("bisection.ingested", signature=candidate, namespace=ns, status=result.get("status"),
             refined=refined)
    if not localized or refined == candidate:
        return
    await refine_into(rt, c, recorded, result)



async def refine_into(rt: Runtime, c: desired.Campaign, candidate: BugSignature,
                      result: BisectionResult) -> None:
    """Count a bisected finding on the signature it refines to: create that signature, or
    reopen it when it was fixed; alert as for a new or regressed signature."""
    ns, refined = c.namespace, str(result["signature"])
    name = signatures.signature_name(refined)
    sig_path = path(API_VERSION, "bugsignatures", ns)
    versions = dict(result.get("versions") or {})
    async with rt.lock(ns, refined):
        created = reopened = False
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            found = await rt.api.get(f"{sig_path}/{name}", BugSignature)
            if found is None:
                found, created = await rt.api.create(
                    sig_path, signatures.refined_signature(candidate, result))
            try:
                sig, reopened = await _count_refined(rt, c, found, result, created, versions)
                break
            except ApiError as e:  # written in between (kopf's annotations, people): redo
                if e.status != 409 or attempt == CONFLICT_ATTEMPTS:
                    raise
        spec = sig_spec(sig)
        if created or reopened:
            reason = "BugSignatureRegressed" if reopened else "NewBugSignature"
            await rt.event(object_ref(sig, "BugSignature"), "Warning", reason,
                           f"{'reopened' if reopened else 'new'} bug signature {refined}: "
                           f"{spec.get('verdict')} in {result.get('culprit_op')}, cured by "
                           f"{result.get('culprit_pass')} (refined from {result.get('candidate')})")
            rt.metrics.signatures.labels(ns, str(spec.get("verdict")),
                                         "regressed" if reopened else "new").inc()
        await maybe_alert(rt, c, sig)


async def _count_refined(rt: Runtime, c: desired.Campaign, sig: BugSignature,
                         result: BisectionResult, created: bool,
                         versions: dict[str, str]) -> tuple[BugSignature, bool]:
    """Count the bisected finding on the refined signature read as `sig` (once per finding);
    reopen it when it was fixed and the finding's version is the fixing one or later."""
    meta = sig["metadata"]
    sig_path = path(API_VERSION, "bugsignatures", meta["namespace"], meta["name"])
    spec, status = sig_spec(sig), sig_status(sig)
    hits = dict(status.get("hits") or {})
    key = f"bisect/{result.get('finding')}"
    if key in hits:
        return sig, False
    reopened = not created and signatures.regressed(spec, status, versions)
    hits[key] = 1
    update: BugSignatureStatus = {
        "hits": hits, "count": int(status.get("hitsRetired") or 0) + sum(hits.values()),
        "campaigns": sorted(set(status.get("campaigns") or []) | {c.name}),
        "refinedFrom": sorted(set(status.get("refinedFrom") or []) | {str(result.get("candidate"))}),
        "bisection": signatures.bisection_status(result, str(result.get("job") or ""))}
    seen = signatures.seen_on(status.get("seenOn"), versions, str(result.get("time") or now_text()))
    if seen is not None:
        update["seenOn"] = seen
    if reopened:
        update.update(signatures.regression(sig))
    if not reopened and signatures.verification_owed(spec, status, update):
        await start_verification(rt, c, sig)  # fixed before any campaign was listed (count_hits)
    sig = await rt.api.patch(f"{sig_path}/status", signatures.guarded(sig, {"status": update}),
                             BugSignature)
    return sig, reopened


# status.verification's fields, copied from the result where set.
_VERIFICATION_FIELDS = ("result", "image", "fixedIn", "jaxlib", "exitCode", "evidence", "time",
                        "job")


async def ingest_verification(rt: Runtime, c: desired.Campaign,
                              result: VerificationResult) -> None:
    """A fix verification Job's result: verified or still failing, with its evidence."""
    ns, signature = c.namespace, str(result.get("signature") or "")
    outcome = str(result.get("result") or "error")
    raw: Mapping[str, object] = result
    # The keys are _VERIFICATION_FIELDS, Verification's own, with the result's values.
    record = cast(Verification, {k: raw[k] for k in _VERIFICATION_FIELDS
                                 if raw.get(k) not in (None, "")})
    record["versions"] = {k: str(v) for k, v in (result.get("versions") or {}).items()}
    name = signatures.signature_name(signature)
    async with rt.lock(ns, signature):
        sig = await rt.api.get(path(API_VERSION, "bugsignatures", ns, name), BugSignature)
        if sig is None or sig_status(sig).get("verification") == record:
            return  # gone, or ingested before (a restarted operator reads results again)
        sig = await _patch_status(rt, ns, name, {"verification": record})
    if sig is None:
        return
    kind, reason = (("Normal", "FixVerified") if outcome == "verified"
                    else ("Warning", "FixNotVerified"))
    await rt.event(object_ref(sig, "BugSignature"), kind, reason,
                   f"repro of {signature} on {result.get('image')}: {outcome}")
    log.info("verify.ingested", signature=signature, namespace=ns, result=outcome)


async def _patch_status(rt: Runtime, ns: str, name: str,
                        fields: BugSignatureStatus) -> BugSignature | None:
    sig = await rt.api.get(path(API_VERSION, "bugsignatures", ns, name), BugSignature)
    if sig is None:
        return None
    return await rt.api.patch(path(API_VERSION, "bugsignatures", ns, name, "status"),
                              signatures.guarded(sig, {"status": fields}), BugSignature)

