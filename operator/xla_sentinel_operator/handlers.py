"""kopf handlers: thin glue between watch events and the pure functions (desired, rollup,
signatures). `register()` binds them to a registry and a Runtime, so tests can run several
operators (restart, two replicas) in one process without module-level state.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf
import structlog
from xla_sentinel.campaign import SpecError, parse_spec
from xla_sentinel.k8s_report import (
    API_VERSION,
    CAMPAIGN_LABEL,
    REPORT_PLURAL,
    SignatureEntry,
    WorkerReport,
    label_value,
    report_from_object,
    report_problem,
    result_from_object,
)

from . import alerting, dashboard, desired, rollup, signatures, tpu
from .kube import ApiError, Kube, connection_from_kubeconfig, path
from .metrics import Liveness, Metrics, serve

GROUP, VERSION = API_VERSION.split("/")
WATCH_SELECTORS: dict[tuple[str, ...], str] = {
    ("batch", "v1", "jobs"): f"{desired.ROLE_LABEL}=worker,{CAMPAIGN_LABEL}",
}
# Read-modify-write attempts of one object before the conflict is raised to kopf's retry.
CONFLICT_ATTEMPTS = 5
log = structlog.get_logger("xla_sentinel_operator")


@dataclass
class Config:
    namespaces: list[str] = field(default_factory=list)  # empty: the whole cluster
    kubeconfig: str | None = None  # this file's current context instead of in-cluster
    runner_image: str = "ghcr.io/xla-sentinel/runner:0.1.0"
    service_account: str = "xla-sentinel-worker"
    rollup_interval: float = 10.0
    alert_retry_interval: float = 30.0
    alert_attempts: int = 5
    alert_backoff: float = 0.5
    alert_rate: float = 0.2  # alerts per second per receiver, after a burst of alert_burst
    alert_burst: int = 5
    external_url: str = ""
    metrics_host: str = "0.0.0.0"
    metrics_port: int | None = 8080  # None: no HTTP endpoint; 0: any free port
    peering_name: str = "xla-sentinel"
    priority: int | None = None  # None: random, so replicas never tie
    standalone: bool = False


@dataclass
class Runtime:
    config: Config
    metrics: Metrics = field(default_factory=Metrics)
    kube: Kube | None = None
    metrics_port: int | None = None
    liveness: Liveness = field(default_factory=Liveness)
    locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)
    # (namespace, report name) -> resourceVersion of a report already called unreadable.
    unreadable: dict[tuple[str, str], str] = field(default_factory=dict)
    # (namespace, report name) -> fingerprint() of the report last ingested in full.
    ingested: dict[tuple[str, str], str] = field(default_factory=dict)
    # (namespace, report name) -> the refusal last announced with an Event (one per error).
    announced: dict[tuple[str, str], str] = field(default_factory=dict)
    # (namespace, signature, hit key) -> the hit count this operator wrote or read back. Only
    # the acting operator writes hits, so an equal count means there is nothing to do; a
    # restart starts empty and reads each signature once.
    hits_seen: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # uid -> (generation, parsed campaign): parse_spec costs milliseconds and report events
    # come by the thousand, while a spec changes only with the generation.
    parsed: dict[str, tuple[int, desired.Campaign]] = field(default_factory=dict)
    limiter: alerting.Limiter = field(init=False)
    _runner: Any = None
    _heartbeat: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.limiter = alerting.Limiter(rate=self.config.alert_rate, burst=self.config.alert_burst)

    @property
    def api(self) -> Kube:
        if self.kube is None:
            raise RuntimeError("not logged in yet")
        return self.kube

    def healthy(self) -> tuple[bool, str]:
        return self.liveness.healthy(time.monotonic(), self.config.rollup_interval)

    def lock(self, namespace: str, signature: str) -> asyncio.Lock:
        return self.locks.setdefault((namespace, signature), asyncio.Lock())

    def campaign(self, body: kopf.Body | dict[str, Any]) -> desired.Campaign:
        meta = body["metadata"]
        uid, generation = meta.get("uid", ""), int(meta.get("generation") or 0)
        hit = self.parsed.get(uid)
        if hit is None or hit[0] != generation or not uid:
            hit = (generation, campaign_of(body))
            self.parsed[uid] = hit
        return hit[1]


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def campaign_of(body: kopf.Body | dict[str, Any]) -> desired.Campaign:
    meta = body["metadata"]
    try:
        spec = parse_spec(dict(body.get("spec") or {}))
        desired.tpu_slice(spec)  # a TPU slice GKE cannot run is refused before any Job
    except (SpecError, tpu.TopologyError) as e:
        raise kopf.PermanentError(str(e)) from None
    return desired.Campaign(name=meta["name"], namespace=meta["namespace"],
                            uid=meta.get("uid", ""), spec=spec)


def register(registry: kopf.OperatorRegistry, rt: Runtime) -> None:
    """Bind every handler of the operator to `registry`, sharing `rt`."""
    cfg = rt.config
    fc = dict(group=GROUP, version=VERSION, plural="fuzzcampaigns", registry=registry)
    bs = dict(group=GROUP, version=VERSION, plural="bugsignatures", registry=registry)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if cfg.kubeconfig:
            info = connection_from_kubeconfig(cfg.kubeconfig)
        else:
            info = (kopf.login_with_service_account(**kwargs)
                    or kopf.login_with_kubeconfig(**kwargs))
        if info is not None:
            rt.kube = Kube(info)
        return info

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.finalizer = "xlasentinel.dev/cleanup"
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
            prefix="xlasentinel.dev")
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix="xlasentinel.dev", key="last-handled-configuration")
        settings.posting.level = logging.WARNING  # our own Warning events, not kopf's chatter
        settings.peering.name = cfg.peering_name
        settings.peering.standalone = cfg.standalone
        settings.peering.mandatory = not cfg.standalone
        settings.peering.priority = (cfg.priority if cfg.priority is not None
                                     else random.randint(1, 2**31))
        settings.watching.server_timeout = 300
        # kopf's `labels=` filters apply after the watch: this selector goes to the API
        # server, so the operator streams worker Jobs, not every Job of the cluster.
        # Reports are a kind of their own (WorkerReport) and need no selector.
        for resource, selector in WATCH_SELECTORS.items():
            settings.watching.label_selectors[resource] = selector
        if cfg.metrics_port is not None:
            rt._runner, rt.metrics_port = await serve(
                rt.metrics, cfg.metrics_host, cfg.metrics_port, rt.healthy,
                page=lambda ns: dashboard.render(rt.api, ns, cfg.namespaces))
        rt._heartbeat = asyncio.create_task(heartbeat(rt))
        rt.liveness.started = True

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        rt.liveness.started = False
        if rt._heartbeat is not None:
            rt._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await rt._heartbeat
        if rt._runner is not None:
            await rt._runner.cleanup()
        if rt.kube is not None:
            await rt.kube.close()

    # Indexes: watch-fed views of the children, so timers need no list calls.
    @kopf.index("batch", "v1", "jobs", labels={CAMPAIGN_LABEL: kopf.PRESENT,
                                               desired.ROLE_LABEL: "worker"}, registry=registry,
                id="worker_jobs")
    def worker_jobs(namespace: str, labels: dict[str, str], body: kopf.Body,
                    **_: Any) -> dict[tuple[str, str], dict[str, Any]]:
        return {(namespace, labels[CAMPAIGN_LABEL]): {
            "metadata": {"name": body.metadata.name, "uid": body.metadata.uid,
                         "labels": dict(labels)},
            "spec": {"completions": body.spec.get("completions"),
                     "suspend": body.spec.get("suspend")},
            "status": dict(body.status)}}

    @kopf.index(GROUP, VERSION, REPORT_PLURAL, registry=registry, id="reports")
    def reports(namespace: str, labels: dict[str, str], body: kopf.Body,
                **_: Any) -> dict[tuple[str, str], tuple[str, WorkerReport]] | None:
        report = report_from_object(dict(body))
        if report is None or CAMPAIGN_LABEL not in labels:
            return None
        return {(namespace, labels[CAMPAIGN_LABEL]): (body.metadata.name, report)}

    @kopf.index(GROUP, VERSION, REPORT_PLURAL, registry=registry, id="results")
    def results(namespace: str, labels: dict[str, str], body: kopf.Body,
                **_: Any) -> dict[tuple[str, str], tuple[str, str, dict[str, Any]]] | None:
        result = result_from_object(dict(body))
        if result is None or CAMPAIGN_LABEL not in labels:
            return None
        return {(namespace, labels[CAMPAIGN_LABEL]): (body.metadata.name, result_key(body), result)}

    @kopf.index(**fc, id="campaigns")
    def campaigns(namespace: str, name: str, body: kopf.Body,
                  **_: Any) -> dict[tuple[str, str], dict[str, Any]]:
        # Keyed like the children's campaign label, which is all a report event carries.
        return {(namespace, label_value(name)): {"metadata": dict(body.metadata), "spec": dict(body.spec),
                                    "apiVersion": API_VERSION, "kind": "FuzzCampaign"}}

    # FuzzCampaign lifecycle.
    @kopf.on.resume(**fc)
    @kopf.on.create(**fc)
    @kopf.on.update(field="spec", **fc)
    async def reconcile_campaign(body: kopf.Body, **_: Any) -> None:
        c = rt.campaign(body)
        jobs = await rt.api.list(path("batch/v1", "jobs", c.namespace),
                                 {**desired.campaign_selector(c.name),
                                  desired.ROLE_LABEL: "worker"})
        completed = (body.get("status") or {}).get("phase") == "Completed"
        await converge_workers(rt, c, jobs, completed)

    @kopf.on.field(field="spec.image", **fc)
    async def image_changed(old: str | None, new: str | None, body: kopf.Body, **_: Any) -> None:
        """A new runner image may carry fixes: verify this campaign's fixed signatures on it."""
        if not old or old == new:
            return  # set at creation, or unchanged: nothing was fixed against it yet
        c = rt.campaign(body)
        items = await rt.api.list(path(API_VERSION, "bugsignatures", c.namespace), {})
        for sig in signatures.to_verify(items, c.name):
            await start_verification(rt, c, sig)

    @kopf.timer(**fc, interval=cfg.rollup_interval, backoff=cfg.rollup_interval, id="roll_up")
    async def roll_up(body: kopf.Body, patch: kopf.Patch, worker_jobs: kopf.Index,
                      reports: kopf.Index, **_: Any) -> None:
        try:
            c = rt.campaign(body)
        except kopf.PermanentError as e:  # only reachable where the CRD's schema is bypassed
            patch.status["phase"] = "Stalled"
            patch.status["conditions"] = rollup.conditions(
                rollup.Health("Stalled", "InvalidSpec", str(e)),
                int(body.metadata.get("generation") or 1),
                list(body.get("status", {}).get("conditions") or []), now_text())
            return
        key = (c.namespace, label_value(c.name))
        jobs = list(worker_jobs.get(key, []))
        named = list(reports.get(key, []))
        rev = desired.revision(c.spec)
        previous = dict(body.get("status") or {})
        now = datetime.now(UTC)
        new = rollup.status(c.spec, int(body.metadata.get("generation") or 1), jobs,
                            [r for _, r in named], rev, previous, now)
        _, due = rollup.retries(previous.get("retries") or {}, jobs, rev, now)
        for retry in due:
            if retry.now and new["phase"] != "Completed":
                # The next roll-up recreates it (converge_workers: a missing Job).
                await rt.api.delete(path("batch/v1", "jobs", c.namespace, retry.job))
                log.warning("workers.retry", campaign=c.name, namespace=c.namespace,
                            job=retry.job, attempt=retry.attempts)
        await converge_workers(rt, c, jobs, new["phase"] == "Completed")
        announce_storage(c, list(previous.get("conditions") or []), new)
        rt.metrics.programs.labels(c.namespace, c.name).set(new["programs"])
        rt.metrics.findings.labels(c.namespace, c.name).set(new["findingsTotal"])
        for k, v in new.items():
            if previous.get(k) != v:
                patch.status[k] = v
        if "completionTime" in previous and "completionTime" not in new:
            patch.status["completionTime"] = None  # running again after a budget raise
        rt.liveness.last_rollup = time.monotonic()

    @kopf.timer(**fc, interval=cfg.rollup_interval * 5, backoff=cfg.rollup_interval * 5,
                id="reingest")
    async def reingest(body: kopf.Body, reports: kopf.Index, results: kopf.Index, **_: Any) -> None:
        """Catch up on reports and Job results whose event failed to ingest (an API error
        mid-way); apart from the roll-up so a backlog never delays the status."""
        c = rt.campaign(body)
        key = (c.namespace, label_value(c.name))
        await ingest_missed(rt, c, list(reports.get(key, [])))
        for name, text, result in list(results.get(key, [])):
            if rt.ingested.get((c.namespace, name)) != text:
                await ingest_result(rt, c, result)
                rt.ingested[(c.namespace, name)] = text

    @kopf.on.delete(**fc)
    async def delete_campaign(name: str, namespace: str, **_: Any) -> None:
        selector = desired.campaign_selector(name)
        for obj in await rt.api.list(path("batch/v1", "jobs", namespace), selector):
            await rt.api.delete(path("batch/v1", "jobs", namespace, obj["metadata"]["name"]))
        for obj in await rt.api.list(path(API_VERSION, REPORT_PLURAL, namespace), selector):
            await rt.api.delete(path(API_VERSION, REPORT_PLURAL, namespace, obj["metadata"]["name"]))
        for gauge in (rt.metrics.programs, rt.metrics.findings):
            try:
                gauge.remove(namespace, name)
            except KeyError:
                pass  # never rolled up
        log.info("campaign.deleted", campaign=name, namespace=namespace)

    # Worker reports -> BugSignatures.
    @kopf.on.event(GROUP, VERSION, REPORT_PLURAL, registry=registry)
    async def report_changed(type: str | None, body: kopf.Body, namespace: str,
                             campaigns: kopf.Index, **_: Any) -> None:
        if type == "DELETED":
            return
        campaign_name = body.metadata.labels.get(CAMPAIGN_LABEL)
        report = report_from_object(dict(body))
        found = list(campaigns.get((namespace, campaign_name), []))
        if not found:
            return
        c = rt.campaign(found[0])
        if report is not None:
            await ingest_report(rt, c, body.metadata.name, report)
            return
        problem = report_problem(dict(body))
        if problem is not None:
            report_unreadable(rt, c, body.metadata.name, str(body.metadata.get("resourceVersion")),
                              problem)
            return
        result = result_from_object(dict(body))
        if result is not None and rt.ingested.get((namespace, body.metadata.name)) != result_key(body):
            await ingest_result(rt, c, result)
            rt.ingested[(namespace, body.metadata.name)] = result_key(body)

    # BugSignature: people set spec.state; alerts that failed are retried.
    @kopf.on.field(field="spec.state", **bs)
    async def state_changed(new: str | None, name: str, namespace: str, status: kopf.Status,
                            campaigns: kopf.Index, **_: Any) -> None:
        if new != "fixed":
            return
        signature = name.removeprefix("sig-")
        async with rt.lock(namespace, signature):
            sig = await rt.api.get(path(API_VERSION, "bugsignatures", namespace, name))
            if sig is None or (sig.get("spec") or {}).get("state") != "fixed":
                return
            count = int((sig.get("status") or {}).get("count") or 0)
            fixed_in = (sig.get("spec") or {}).get("fixedIn")
            if fixed_in and signatures.version_key(fixed_in) is None:
                # Every later hit then counts as a regression (signatures.at_or_after).
                kopf.event(_ref(sig, "BugSignature"), type="Warning", reason="InvalidFixedIn",
                           message=f"spec.fixedIn {fixed_in!r} is not a version (e.g. 0.10.3): "
                                   "every new hit will count as a regression")
            # Guarded: a regression recorded in between would otherwise be undone (a 409
            # makes kopf retry this handler with a fresh read).
            sig = await rt.api.patch(path(API_VERSION, "bugsignatures", namespace, name, "status"),
                                     signatures.guarded(sig, {"status": {"fixedAt": now_text()}}))
            c = _routing_campaign(rt, namespace, list(status.get("campaigns") or []), campaigns)
            if c is not None:
                await maybe_alert(rt, c, sig)  # resolves the alert that fired
                await start_verification(rt, c, sig)
        log.info("signature.fixed", signature=signature, namespace=namespace, count=count)

    @kopf.timer(**bs, interval=cfg.alert_retry_interval, backoff=cfg.alert_retry_interval,
                id="retry_alert")
    async def retry_alert(body: kopf.Body, name: str, namespace: str,
                          campaigns: kopf.Index, **_: Any) -> None:
        spec, status = dict(body.spec), dict(body.status)
        if signatures.due_alert(spec, status) is None and signatures.due_resolve(spec, status) is None:
            return
        c = _routing_campaign(rt, namespace, list(status.get("campaigns") or []), campaigns)
        if c is None:
            return
        async with rt.lock(namespace, name.removeprefix("sig-")):
            sig = await rt.api.get(path(API_VERSION, "bugsignatures", namespace, name))
            if sig is not None:
                await maybe_alert(rt, c, sig)


async def heartbeat(rt: Runtime) -> None:
    """Prove the operator works: one cheap API read per roll-up interval (also tells
    /healthz whether campaigns exist, whose roll-ups must then keep coming)."""
    namespace = rt.config.namespaces[0] if rt.config.namespaces else None
    while True:
        if rt.kube is not None:
            try:
                data = await rt.kube.request("GET", path(API_VERSION, "fuzzcampaigns", namespace),
                                             params={"limit": "1"})
                rt.liveness.last_api_ok = time.monotonic()
                rt.liveness.campaigns = bool(data.get("items"))
            except (TimeoutError, ApiError, OSError, aiohttp.ClientError) as e:
                log.warning("heartbeat.failed", error=str(e))
        await asyncio.sleep(rt.config.rollup_interval)


async def converge_workers(rt: Runtime, c: desired.Campaign, jobs: list[dict[str, Any]],
                           completed: bool) -> None:
    """Apply desired.plan_workers: create, delete, (un)suspend worker Jobs."""
    want = desired.worker_jobs(c, default_image=rt.config.runner_image,
                               service_account=rt.config.service_account)
    plan = desired.plan_workers(c, want, jobs, completed)
    jobs_path = path("batch/v1", "jobs", c.namespace)
    if plan.create:  # multi-host slices: their hosts' DNS names, before their pods
        for service in desired.worker_services(c):
            await rt.api.create(path("v1", "services", c.namespace), service)
    for job in plan.create:
        _, created = await rt.api.create(jobs_path, job)
        if created:
            log.info("workers.created", campaign=c.name, namespace=c.namespace,
                     job=job["metadata"]["name"], workers=c.spec.workers)
    for name, suspend in plan.suspend.items():
        await rt.api.patch(f"{jobs_path}/{name}", {"spec": {"suspend": suspend}})
        log.info("workers.suspend", campaign=c.name, namespace=c.namespace, job=name,
                 suspend=suspend)
    for name in plan.delete:
        await rt.api.delete(f"{jobs_path}/{name}")
        log.info("workers.retired", campaign=c.name, namespace=c.namespace, job=name)


async def ingest_missed(rt: Runtime, c: desired.Campaign,
                        named: list[tuple[str, WorkerReport]]) -> None:
    """Re-ingest reports whose last event failed to ingest (an API error mid-way)."""
    for name, report in named:
        if rt.ingested.get((c.namespace, name)) != fingerprint(report):
            await ingest_report(rt, c, name, report)


async def ingest_report(rt: Runtime, c: desired.Campaign, name: str, report: WorkerReport) -> None:
    rt.metrics.reports_ingested.inc()
    announce_refusal(rt, c, name, report)
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


def announce_refusal(rt: Runtime, c: desired.Campaign, name: str, report: WorkerReport) -> None:
    """A Warning Event on the campaign when the API server refused a worker's report (the
    roll-up puts it in status.reportErrors); once per distinct error."""
    key = (c.namespace, name)
    if not report.error:
        rt.announced.pop(key, None)
        return
    if rt.announced.get(key) == report.error:
        return
    campaign_ref = {"apiVersion": API_VERSION, "kind": "FuzzCampaign",
                    "metadata": {"name": c.name, "namespace": c.namespace, "uid": c.uid}}
    kopf.event(campaign_ref, type="Warning", reason="ReportRefused",
               message=f"worker {report.worker}: {report.error}"[:1000])
    log.error("report.refused", campaign=c.name, namespace=c.namespace, report=name,
              error=report.error)
    rt.announced[key] = report.error


def announce_storage(c: desired.Campaign, previous: list[dict[str, Any]],
                     new: dict[str, Any]) -> None:
    """A Warning Event on the campaign when its workers' artifact store stops answering
    (status.storageErrors, condition StorageAvailable False); once per outage."""
    message = rollup.storage_outage(previous, new["conditions"])
    if message is None:
        return
    campaign_ref = {"apiVersion": API_VERSION, "kind": "FuzzCampaign",
                    "metadata": {"name": c.name, "namespace": c.namespace, "uid": c.uid}}
    kopf.event(campaign_ref, type="Warning", reason="StorageUnavailable", message=message)
    log.error("storage.unavailable", campaign=c.name, namespace=c.namespace,
              workers=[e["worker"] for e in new["storageErrors"]])


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
            sig = await rt.api.get(f"{sig_path}/{name}")
            if sig is None:
                sig, created = await rt.api.create(sig_path, signatures.new_signature(
                    c, worker, signature, entry, versions))
            try:
                sig, regressed = await count_hits(rt, c, worker, entry, sig, versions, revision)
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
            campaign_ref = {"apiVersion": API_VERSION, "kind": "FuzzCampaign",
                            "metadata": {"name": c.name, "namespace": ns, "uid": c.uid}}
            for obj in (_ref(sig, "BugSignature"), campaign_ref):
                kopf.event(obj, type="Warning", reason=reason_text, message=message)
            log.warning(f"signature.{reason}", campaign=c.name, namespace=ns,
                        signature=signature, verdict=entry.verdict, worker=worker)
        await maybe_alert(rt, c, sig)
        rt.hits_seen[seen_key] = entry.count


async def count_hits(rt: Runtime, c: desired.Campaign, worker: str, entry: SignatureEntry,
                     sig: dict[str, Any], versions: dict[str, str] | None = None,
                     revision: str = "") -> tuple[dict[str, Any], bool]:
    """Write `worker`'s count into the signature read as `sig` (guarded by its
    resourceVersion), record a regression; (the signature written, whether it regressed)."""
    meta = sig["metadata"]
    sig_path = path(API_VERSION, "bugsignatures", meta["namespace"], meta["name"])
    spec, status = dict(sig.get("spec") or {}), dict(sig.get("status") or {})
    update = signatures.hits_update(status, c.name, worker, entry, revision)
    if update is None:
        return sig, False
    seen = signatures.seen_on(status.get("seenOn"), versions, entry.last_seen or now_text())
    if seen is not None:
        update["seenOn"] = seen
    regressed = signatures.regressed(spec, status, versions)
    if regressed:
        update["regressions"] = int(status.get("regressions") or 0) + 1
        update["fixedAt"] = None
        if spec.get("state") != "regressed":
            sig = await rt.api.patch(sig_path, signatures.guarded(sig, {"spec": {"state": "regressed"}}))
    bisects = await start_bisectors(rt, c, worker, entry, status)
    if bisects:
        update["bisectJobs"] = bisects
    sig = await rt.api.patch(f"{sig_path}/status", signatures.guarded(sig, {"status": update}))
    return sig, regressed


async def start_bisectors(rt: Runtime, c: desired.Campaign, worker: str, entry: SignatureEntry,
                          status: dict[str, Any]) -> list[str] | None:
    """Bisector Jobs for the first `bisect.perSignature` findings of a signature."""
    started = list(status.get("bisectJobs") or [])
    want = c.spec.bisect.perSignature if c.spec.bisect.enabled else 0
    added = False
    for sample in entry.samples:
        if len(started) >= want:
            break
        job = desired.bisector_job(c, sample, worker, default_image=rt.config.runner_image,
                                   service_account=rt.config.service_account)
        if job["metadata"]["name"] in started:
            continue
        await rt.api.create(path("batch/v1", "jobs", c.namespace), job)
        started.append(job["metadata"]["name"])
        added = True
        log.info("bisector.created", campaign=c.name, namespace=c.namespace,
                 signature=sample.get("signature"), job=job["metadata"]["name"])
    return started if added else None


def result_key(body: kopf.Body) -> str:
    return str((body.get("spec") or {}).get("result") or "")


async def start_verification(rt: Runtime, c: desired.Campaign, sig: dict[str, Any]) -> None:
    """Run the signature's repro bundle on the campaign's runner image (a Job) once per
    image and fixing version; the result comes back as a `verification` result."""
    spec = sig.get("spec") or {}
    if not spec.get("repro"):
        log.info("verify.no_repro", signature=spec.get("signature"), namespace=c.namespace)
        return
    job = desired.verify_job(c, str(spec["signature"]), str(spec["repro"]),
                             str(spec.get("fixedIn") or ""), default_image=rt.config.runner_image,
                             service_account=rt.config.service_account)
    _, created = await rt.api.create(path("batch/v1", "jobs", c.namespace), job)
    if created:
        log.info("verify.created", campaign=c.name, namespace=c.namespace,
                 signature=spec.get("signature"), job=job["metadata"]["name"])


async def ingest_result(rt: Runtime, c: desired.Campaign, result: dict[str, Any]) -> None:
    if result.get("type") == "bisection":
        await ingest_bisection(rt, c, result)
    elif result.get("type") == "verification":
        await ingest_verification(rt, c, result)


async def _patch_status(rt: Runtime, ns: str, name: str, fields: dict[str, Any]) -> dict[str, Any] | None:
    sig = await rt.api.get(path(API_VERSION, "bugsignatures", ns, name))
    if sig is None:
        return None
    return await rt.api.patch(path(API_VERSION, "bugsignatures", ns, name, "status"),
                              signatures.guarded(sig, {"status": fields}))


async def ingest_bisection(rt: Runtime, c: desired.Campaign, result: dict[str, Any]) -> None:
    """A bisector Job's result: the candidate signature records it; a localized culprit
    fills in the candidate's spec or, when it refines to another signature, creates that
    one (or reopens it when it was fixed) rather than a second copy of a known bug."""
    ns, candidate = c.namespace, str(result.get("candidate") or "")
    name = signatures.signature_name(candidate)
    job = str(result.get("job") or "")
    refined = str(result.get("signature") or candidate)
    localized = result.get("status") == "localized"
    async with rt.lock(ns, candidate):
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            sig = await rt.api.get(path(API_VERSION, "bugsignatures", ns, name))
            if sig is None:
                log.warning("bisection.orphan", signature=candidate, namespace=ns)
                return
            fields: dict[str, Any] = {"bisection": signatures.bisection_status(result, job)}
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
    await refine_into(rt, c, sig, result)


async def refine_into(rt: Runtime, c: desired.Campaign, candidate: dict[str, Any],
                      result: dict[str, Any]) -> None:
    ns, refined = c.namespace, str(result["signature"])
    name = signatures.signature_name(refined)
    sig_path = path(API_VERSION, "bugsignatures", ns)
    versions = dict(result.get("versions") or {})
    async with rt.lock(ns, refined):
        created = reopened = False
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            sig = await rt.api.get(f"{sig_path}/{name}")
            if sig is None:
                sig, created = await rt.api.create(sig_path, signatures.refined_signature(candidate, result))
            try:
                sig, reopened = await _count_refined(rt, c, sig, result, created, versions)
                break
            except ApiError as e:  # written in between (kopf's annotations, people): redo
                if e.status != 409 or attempt == CONFLICT_ATTEMPTS:
                    raise
        spec = dict(sig.get("spec") or {})
        if created or reopened:
            reason = "BugSignatureRegressed" if reopened else "NewBugSignature"
            kopf.event(_ref(sig, "BugSignature"), type="Warning", reason=reason,
                       message=f"{'reopened' if reopened else 'new'} bug signature {refined}: "
                               f"{spec.get('verdict')} in {result.get('culprit_op')}, cured by "
                               f"{result.get('culprit_pass')} (refined from {result.get('candidate')})")
            rt.metrics.signatures.labels(ns, str(spec.get("verdict")),
                                         "regressed" if reopened else "new").inc()
        await maybe_alert(rt, c, sig)


async def _count_refined(rt: Runtime, c: desired.Campaign, sig: dict[str, Any],
                         result: dict[str, Any], created: bool,
                         versions: dict[str, str]) -> tuple[dict[str, Any], bool]:
    """Count the bisected finding on the refined signature read as `sig` (once per finding);
    reopen it when it was fixed and the finding's version is the fixing one or later."""
    meta = sig["metadata"]
    sig_path = path(API_VERSION, "bugsignatures", meta["namespace"], meta["name"])
    spec, status = dict(sig.get("spec") or {}), dict(sig.get("status") or {})
    hits = dict(status.get("hits") or {})
    key = f"bisect/{result.get('finding')}"
    if key in hits:
        return sig, False
    reopened = not created and signatures.regressed(spec, status, versions)
    hits[key] = 1
    update: dict[str, Any] = {
        "hits": hits, "count": sum(hits.values()),
        "campaigns": sorted(set(status.get("campaigns") or []) | {c.name}),
        "refinedFrom": sorted(set(status.get("refinedFrom") or []) | {str(result.get("candidate"))}),
        "bisection": signatures.bisection_status(result, str(result.get("job") or ""))}
    seen = signatures.seen_on(status.get("seenOn"), versions, str(result.get("time") or now_text()))
    if seen is not None:
        update["seenOn"] = seen
    if reopened:
        update["regressions"] = int(status.get("regressions") or 0) + 1
        update["fixedAt"] = None
        if spec.get("state") != "regressed":
            sig = await rt.api.patch(sig_path, signatures.guarded(sig, {"spec": {"state": "regressed"}}))
    sig = await rt.api.patch(f"{sig_path}/status", signatures.guarded(sig, {"status": update}))
    return sig, reopened


async def ingest_verification(rt: Runtime, c: desired.Campaign, result: dict[str, Any]) -> None:
    """A fix verification Job's result: verified or still failing, with its evidence."""
    ns, signature = c.namespace, str(result.get("signature") or "")
    outcome = str(result.get("result") or "error")
    record = {k: result[k] for k in ("result", "image", "fixedIn", "jaxlib", "exitCode", "evidence",
                                     "time", "job")
              if result.get(k) not in (None, "")}
    record["versions"] = {k: str(v) for k, v in (result.get("versions") or {}).items()}
    name = signatures.signature_name(signature)
    async with rt.lock(ns, signature):
        sig = await rt.api.get(path(API_VERSION, "bugsignatures", ns, name))
        if sig is None or (sig.get("status") or {}).get("verification") == record:
            return  # gone, or ingested before (a restarted operator reads results again)
        sig = await _patch_status(rt, ns, name, {"verification": record})
    if sig is None:
        return
    kind, reason = (("Normal", "FixVerified") if outcome == "verified"
                    else ("Warning", "FixNotVerified"))
    kopf.event(_ref(sig, "BugSignature"), type=kind, reason=reason,
               message=f"repro of {signature} on {result.get('image')}: {outcome}")
    log.info("verify.ingested", signature=signature, namespace=ns, result=outcome)


def _routing_campaign(rt: Runtime, namespace: str, names: list[str],
                      campaigns: kopf.Index) -> desired.Campaign | None:
    """The first campaign of a signature that still exists: its alert route is used."""
    for name in names:
        found = list(campaigns.get((namespace, label_value(name)), []))
        if found:
            return rt.campaign(found[0])
    return None


async def maybe_alert(rt: Runtime, c: desired.Campaign, sig: dict[str, Any]) -> None:
    """Send the alert this signature is owed (firing, or resolving once it is fixed), once;
    retryable failures and throttled alerts are left for the retry timer."""
    spec, status = sig.get("spec") or {}, sig.get("status") or {}
    key = signatures.due_alert(spec, status)
    resolve = signatures.due_resolve(spec, status) if key is None else None
    if key is None and resolve is None:
        return
    ns, name = sig["metadata"]["namespace"], sig["metadata"]["name"]
    ref = c.spec.alerts.webhookSecretRef
    sig_status = path(API_VERSION, "bugsignatures", ns, name, "status")
    outcome = alerting.Delivery.SENT
    if ref is not None:
        secret = await rt.api.get(path("v1", "secrets", ns, ref.name))
        url = alerting.secret_value(secret, ref.key) if secret else None
        problem = (f"Secret {ref.name} does not exist" if secret is None
                   else alerting.url_problem(url))
        if problem is not None:
            await webhook_invalid(rt, c, sig, f"webhook URL in Secret {ref.name}, key "
                                              f"{ref.key}: {problem}")
            return
        body = signatures.alerts(sig, key or str(resolve), now=datetime.now(UTC),
                                 external_url=rt.config.external_url, resolved=key is None)
        outcome = await alerting.post_alerts(url, body, attempts=rt.config.alert_attempts,
                                             backoff=rt.config.alert_backoff, limiter=rt.limiter)
        if outcome in (alerting.Delivery.FAILED, alerting.Delivery.THROTTLED):
            if outcome is alerting.Delivery.FAILED:
                rt.metrics.alert_failures.inc()
            log.error(f"alert.{outcome.value}", campaign=c.name, namespace=ns,
                      signature=spec.get("signature"), key=key or resolve)
            return
    if resolve is not None:
        await rt.api.patch(sig_status, {"status": {"resolvedKey": resolve}})
        log.info("alert.resolved", campaign=c.name, namespace=ns,
                 signature=spec.get("signature"), key=resolve, outcome=outcome.value)
        return
    sent = now_text()
    update: dict[str, Any] = {"alertKey": key, "lastAlertTime": sent, "alertError": None}
    if outcome is alerting.Delivery.REJECTED:
        # Never retried: the receiver refuses this message; the error is kept for people.
        rt.metrics.alert_failures.inc()
        update["alertError"] = f"rejected by the receiver ({sent})"
    else:
        rt.metrics.alerts_sent.labels(str(key).split("-")[0]).inc()
    await rt.api.patch(sig_status, {"status": update})
    try:
        await rt.api.patch(path(API_VERSION, "fuzzcampaigns", ns, c.name, "status"),
                           {"status": {"lastAlertTime": sent}})
    except ApiError as e:
        if e.status != 404:  # the campaign may be gone; the signature outlives it
            raise
    log.warning("alert.sent", campaign=c.name, namespace=ns, signature=spec.get("signature"),
                key=key, webhook=ref is not None, outcome=outcome.value)


def report_unreadable(rt: Runtime, c: desired.Campaign, name: str, version: str,
                      problem: str) -> None:
    """A report this operator cannot read (a worker of another version, or garbage) counts
    for nothing, and says so once per version of the object; the other reports go on."""
    if rt.unreadable.get((c.namespace, name)) == version:
        return
    rt.unreadable[(c.namespace, name)] = version
    log.error("report.unreadable", campaign=c.name, namespace=c.namespace, report=name,
              problem=problem)
    campaign_ref = {"apiVersion": API_VERSION, "kind": "FuzzCampaign",
                    "metadata": {"name": c.name, "namespace": c.namespace, "uid": c.uid}}
    kopf.event(campaign_ref, type="Warning", reason="ReportUnreadable",
               message=f"WorkerReport {name} is not counted: {problem}")


async def webhook_invalid(rt: Runtime, c: desired.Campaign, sig: dict[str, Any],
                          error: str) -> None:
    """A person's Secret holds no usable URL: say so on the signature and, once per
    distinct error, in a Warning Event; the retry timer tries again after a fix."""
    ns, name = sig["metadata"]["namespace"], sig["metadata"]["name"]
    rt.metrics.alert_failures.inc()
    log.error("alert.webhook_invalid", campaign=c.name, namespace=ns, signature=name, error=error)
    if (sig.get("status") or {}).get("alertError") == error:
        return
    await rt.api.patch(path(API_VERSION, "bugsignatures", ns, name, "status"),
                       {"status": {"alertError": error}})
    campaign_ref = {"apiVersion": API_VERSION, "kind": "FuzzCampaign",
                    "metadata": {"name": c.name, "namespace": ns, "uid": c.uid}}
    kopf.event(campaign_ref, type="Warning", reason="AlertWebhookInvalid",
               message=f"{error}; alerts for {name} wait until it is fixed")


def _ref(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": API_VERSION, "kind": kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "uid": meta.get("uid", "")}}

