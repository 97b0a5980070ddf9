"""The kopf registration: which watch events and indexes the operator has, each a thin
handler that hands its body to a workflow (campaigns, ingest, followups, notify), and the
startup that begins the periodic work over the indexes (periodic.py).

No handler here needs kopf's finalizer: no timer or daemon (they would put it on every
campaign and signature, and deleting them with the operator stopped would hang), no
mandatory on.delete. Children go with their campaign by owner reference.

`register()` binds them to a registry and a Runtime, so tests can run several operators
(restart, two replicas) in one process without module-level state. What a handler does is
tested through its workflow, without kopf (tests/k8s/*_pure.py), and end to end on the test
control plane.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, TypeVar, cast

import kopf
from xla_sentinel.cluster.report import (
    CAMPAIGN_LABEL,
    GROUP,
    REPORT_PLURAL,
    VERSION,
    WorkerReport,
    label_value,
    report_from_object,
    result_from_object,
)
from xla_sentinel.spec.campaign import API_VERSION

from . import agents, desired, followups, ingest, periodic, rollup

# Aliased: kopf passes the `campaigns` index to handlers by that argument name.
from . import campaigns as campaign_flows
from .bodies import (
    BugSignature,
    BugSignatureSpec,
    BugSignatureStatus,
    CampaignStatus,
    Disrupted,
    FuzzCampaign,
    Job,
    JobStatus,
    Meta,
    Result,
)
from .bodies import WorkerReport as WorkerReportBody
from .kube import (
    SERVICE_ACCOUNT_TOKEN,
    Kube,
    connection_from_kubeconfig,
    connection_in_cluster,
)
from .notify import CampaignIndex
from .periodic import (
    CampaignKey,
    DisruptedIndex,
    ReportIndex,
    ResultIndex,
    SignatureIndex,
    WorkerJobIndex,
)
from .runtime import Runtime

CAMPAIGNS, SIGNATURES = "fuzzcampaigns", "bugsignatures"
T = TypeVar("T")
# Objects per page of kopf's initial listing of a kind (configure()).
LIST_PAGE = 200
WATCH_SELECTORS: dict[tuple[str, str, str], str] = {
    ("batch", "v1", "jobs"): f"{desired.ROLE_LABEL}=worker,{CAMPAIGN_LABEL}",
    # Worker pods (their disruptions): never every pod of the cluster.
    ("", "v1", "pods"): f"{desired.ROLE_LABEL}=worker,{CAMPAIGN_LABEL}",
}
# Worker pods are watched for their disruptions only (the disrupted_pods index), and a
# disrupted Job pod ends Failed before it goes (unless force-deleted): the Job controller's
# tracking finalizer holds it until it is terminal, with its DisruptionTarget condition kept.
# So only Failed pods are listed and streamed. Every pod whole, a restarted operator held 4,096
# Pending or Running pods (about 25 KiB each as Python objects) at once until its indexes
# were filled, and kept the heap they had spread over (docs/operator.md, the restarted
# operator); and every running pod's status change streamed through it.
WATCH_FIELD_SELECTORS: dict[tuple[str, str, str], str] = {
    ("", "v1", "pods"): "status.phase=Failed",
}


def configure(settings: kopf.OperatorSettings, rt: Runtime) -> None:
    """kopf's settings: our annotations, peering, server-side selectors. The finalizer is
    the one older versions put on every object: kopf removes it where no handler needs it,
    which none does now (an upgrade frees the objects of a previous release)."""
    peering = rt.config.peering
    settings.persistence.finalizer = f"{GROUP}/cleanup"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration")
    settings.posting.level = logging.WARNING  # our own Warning events, not kopf's chatter
    settings.peering.name = peering.name
    settings.peering.standalone = peering.standalone
    settings.peering.mandatory = not peering.standalone
    settings.peering.priority = rt.priority  # by seniority unless given (leadership.py)
    settings.watching.server_timeout = 300
    # A fresh operator (upgrade, failover) lists every watched object: by default kopf does
    # it in one request per kind, holding the whole list (thousands of worker pods and
    # reports, each tens of KiB as Python objects) at once. In pages, one page is held.
    settings.watching.chunk_size = LIST_PAGE
    # kopf's task of an object keeps the object's last event while it idles (5 s by
    # default); after a listing that is every object listed in those seconds.
    settings.queueing.idle_timeout = 1.0
    # kopf's `labels=` filters apply after the watch: this selector goes to the API
    # server, so the operator streams worker Jobs and pods, not every Job and pod of the cluster.
    # Reports are a kind of their own (WorkerReport) and need no selector.
    for resource, selector in WATCH_SELECTORS.items():
        settings.watching.label_selectors[resource] = selector
    for resource, selector in WATCH_FIELD_SELECTORS.items():
        settings.watching.field_selectors[resource] = selector


def register(registry: kopf.OperatorRegistry, rt: Runtime) -> None:
    """Bind every handler of the operator to `registry`, sharing `rt`.

    kopf hands a handler its indexes by their ids through **kwargs, which its handler
    protocols cannot type: a handler reads them from `kwargs` into typed names."""
    cfg = rt.config

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        info: kopf.ConnectionInfo | None
        token_file = None
        if cfg.kubeconfig:
            info = connection_from_kubeconfig(cfg.kubeconfig)
        elif (info := connection_in_cluster(os.environ)) is not None:
            token_file = SERVICE_ACCOUNT_TOKEN  # projected: the kubelet rotates it
        else:
            info = kopf.login_with_kubeconfig(**kwargs)
        if info is not None:
            rt.kube = Kube(info, token_file=token_file)
        return info

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **kwargs: Any) -> None:
        configure(settings, rt)
        await rt.start()
        # The indexes are live: kopf fills them as its watches run.
        worker_jobs: WorkerJobIndex = kwargs["worker_jobs"]
        reports: ReportIndex = kwargs["reports"]
        results: ResultIndex = kwargs["results"]
        campaigns: CampaignIndex = kwargs["campaigns"]
        signatures: SignatureIndex = kwargs["signatures"]
        disrupted: DisruptedIndex = kwargs["disrupted_pods"]
        periodic.start(rt, worker_jobs=worker_jobs, reports=reports, results=results,
                       campaigns=campaigns, signatures=signatures, disrupted=disrupted)

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await rt.close()

    # Indexes: watch-fed views of the children, so the periodic work needs no list calls.
    @kopf.index("batch", "v1", "jobs", labels={CAMPAIGN_LABEL: kopf.PRESENT,
                                               desired.ROLE_LABEL: "worker"}, registry=registry,
                id="worker_jobs")
    def worker_jobs(labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[CampaignKey, Job]:
        return {(_namespace(body), labels[CAMPAIGN_LABEL]): {
            "metadata": {"name": body.metadata.name, "uid": body.metadata.uid,
                         "labels": dict(labels),
                         # Only the rendering's hash: converge_workers compares it.
                         "annotations": {k: v for k, v in body.metadata.annotations.items()
                                         if k == desired.TEMPLATE_ANNOTATION}},
            "spec": {"completions": body.spec.get("completions"),
                     "suspend": body.spec.get("suspend")},
            "status": _raw(JobStatus, body.status)}}

    # Worker pods, keeping only the disrupted ones (evicted, preempted, drained): their
    # failure policy ignores them, so the roll-up counts them (rollup.disruptions). Only
    # Failed pods come here (WATCH_FIELD_SELECTORS): a disrupted one is counted once terminal.
    @kopf.index("", "v1", "pods", labels={CAMPAIGN_LABEL: kopf.PRESENT,
                                          desired.ROLE_LABEL: "worker"}, registry=registry,
                id="disrupted_pods")
    def disrupted_pods(labels: kopf.Labels, body: kopf.Body,
                       **_: Any) -> dict[CampaignKey, Disrupted] | None:
        pod = rollup.disrupted_pod(body)
        return None if pod is None else {(_namespace(body), labels[CAMPAIGN_LABEL]): pod}

    @kopf.index(GROUP, VERSION, REPORT_PLURAL, registry=registry, id="reports")
    def reports(labels: kopf.Labels, body: kopf.Body,
                **_: Any) -> dict[CampaignKey, tuple[str, WorkerReport, str]] | None:
        report = report_from_object(dict(body))
        if report is None or CAMPAIGN_LABEL not in labels:
            return None
        # Slim: thousands of reports of every revision stay here for the roll-ups.
        return {(_namespace(body), labels[CAMPAIGN_LABEL]):
                (body.metadata.name, ingest.slim(report), ingest.fingerprint(report))}

    @kopf.index(GROUP, VERSION, REPORT_PLURAL, registry=registry, id="results")
    def results(labels: kopf.Labels, body: kopf.Body,
                **_: Any) -> dict[CampaignKey, tuple[str, str, Result]] | None:
        result = result_from_object(dict(body))
        if result is None or CAMPAIGN_LABEL not in labels:
            return None
        # result_from_object let through only the types of Result, as the engine writes them.
        return {(_namespace(body), labels[CAMPAIGN_LABEL]):
                (body.metadata.name, followups.result_key(_raw(WorkerReportBody, body)),
                 cast(Result, result))}

    @kopf.index(group=GROUP, version=VERSION, plural=CAMPAIGNS, registry=registry,
                id="campaigns")
    def campaigns(body: kopf.Body, **_: Any) -> dict[CampaignKey, FuzzCampaign]:
        # Keyed like the children's campaign label, which is all a report event carries;
        # the status is the roll-up's previous one.
        meta = body.metadata
        return {(_namespace(body), label_value(meta.name)): {
            "metadata": _raw(Meta, meta), "spec": dict(body.spec),
            "status": _raw(CampaignStatus, body.status),
            "apiVersion": API_VERSION, "kind": "FuzzCampaign"}}

    @kopf.index(group=GROUP, version=VERSION, plural=SIGNATURES, registry=registry,
                id="signatures")
    def signatures(body: kopf.Body, **_: Any) -> dict[str, BugSignature]:
        # What alert retries and re-sends read; not the per-worker hits, the big part.
        meta = body.metadata
        status = {k: v for k, v in body.status.items() if k != "hits"}
        # The generation too: the state the operator recorded holds at it (bodies.sig_spec).
        return {_namespace(body): {"metadata": {"name": meta.name, "namespace": _namespace(body),
                                                "generation": int(meta.get("generation") or 0)},
                                 "spec": _raw(BugSignatureSpec, body.spec),
                                 "status": _raw(BugSignatureStatus, status)}}

    # FuzzCampaign lifecycle. Status roll-ups and re-ingestion are periodic.py's loops.
    @kopf.on.resume(group=GROUP, version=VERSION, plural=CAMPAIGNS, registry=registry)
    @kopf.on.create(group=GROUP, version=VERSION, plural=CAMPAIGNS, registry=registry)
    @kopf.on.update(group=GROUP, version=VERSION, plural=CAMPAIGNS, registry=registry,
                    field="spec")
    async def reconcile_campaign(body: kopf.Body, **_: Any) -> None:
        rt.reconciled.add(body.metadata.uid)  # kopf's indexes are filled: roll-ups may start
        campaign = _campaign(body)
        await campaign_flows.reconcile(rt, campaign)
        await agents.converge(rt, rt.campaign(campaign))  # spec.agents: the swarm beside the workers

    @kopf.on.field(group=GROUP, version=VERSION, plural=CAMPAIGNS, registry=registry,
                   field="spec.image")
    async def image_changed(old: object, new: object, body: kopf.Body, **_: Any) -> None:
        if not old or old == new:
            return  # set at creation, or unchanged: nothing was fixed against it yet
        await followups.verify_on_new_image(rt, rt.campaign(_campaign(body)))

    # Deleted: the garbage collector removes the Jobs and reports (owner references), with
    # or without this operator; here only sooner, and the campaign's gauges with them.
    @kopf.on.event(group=GROUP, version=VERSION, plural=CAMPAIGNS, registry=registry)
    async def campaign_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        if type == "DELETED":
            meta = body.metadata
            rt.reconciled.discard(meta.uid)
            await campaign_flows.delete_children(rt, meta.name, _namespace(body), meta.uid)

    # Worker reports -> BugSignatures.
    @kopf.on.event(GROUP, VERSION, REPORT_PLURAL, registry=registry)
    async def report_changed(type: str | None, body: kopf.Body, **kwargs: Any) -> None:
        if type == "DELETED":
            rt.forget_report(_namespace(body), body.metadata.name)
            return
        campaigns: CampaignIndex = kwargs["campaigns"]
        key = (_namespace(body), body.metadata.labels.get(CAMPAIGN_LABEL, ""))
        if not campaigns.get(key):
            return
        name = body.metadata.name

        async def ingest_report(obj: WorkerReportBody | None) -> None:
            # The campaign as it is when the report's turn comes (the index is live): its
            # spec may have changed while the report waited.
            found = list(campaigns.get(key, []))
            if not found:
                return
            if obj is None:  # the backlog kept only the name (runtime.Backlog)
                obj = await ingest.read_report(rt, key[0], name)
            if obj is not None:
                await ingest.report_object(rt, rt.campaign(found[0]), obj)

        # Ingested by the backlog's workers, not in kopf's task of this object: a restarted
        # operator gets every report at once (runtime.Backlog). The closure holds no body:
        # the backlog keeps the report, or past its bound only the name.
        await rt.backlog.put((key[0], name), ingest_report,
                             ingest.essentials(_raw(WorkerReportBody, body)))

    # BugSignature: people set spec.state (alert retries and re-sends: periodic.py).
    @kopf.on.field(group=GROUP, version=VERSION, plural=SIGNATURES, registry=registry,
                   field="spec.state")
    async def state_changed(new: object, body: kopf.Body, **kwargs: Any) -> None:
        if new == "fixed":
            campaigns: CampaignIndex = kwargs["campaigns"]
            await followups.mark_fixed(rt, _namespace(body), body.metadata.name, campaigns)

    # A regression is recorded in status while spec.state stays fixed (bodies.sig_spec):
    # people answer it with a new fixedIn, which marks the bug fixed again.
    @kopf.on.field(group=GROUP, version=VERSION, plural=SIGNATURES, registry=registry,
                   field="spec.fixedIn")
    async def fixed_in_changed(old: object, new: object, body: kopf.Body, **kwargs: Any) -> None:
        if new != old and body.spec.get("state") == "fixed":
            campaigns: CampaignIndex = kwargs["campaigns"]
            await followups.mark_fixed(rt, _namespace(body), body.metadata.name, campaigns)


def _raw(shape: type[T], view: Mapping[str, Any]) -> T:
    """A plain copy of a part of a kopf Body (a live view of the raw object) as the body type
    `shape` of bodies.py: kopf types a body's parts as Mapping[str, Any]."""
    return cast(T, dict(view))


def _namespace(body: kopf.Body) -> str:
    """kopf types a namespace optional, for cluster-scoped kinds; every kind here is
    namespaced."""
    return str(body.metadata.namespace)


def _campaign(body: kopf.Body) -> FuzzCampaign:
    """A FuzzCampaign's body as the workflows read it (only read: kopf's Body is a view)."""
    return cast(FuzzCampaign, body)


