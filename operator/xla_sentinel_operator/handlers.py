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
from typing import Any

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

from . import agents, desired, followups, ingest, periodic

# Aliased: kopf passes the `campaigns` index to handlers by that argument name.
from . import campaigns as campaign_flows
from .kube import Kube, connection_from_kubeconfig, connection_in_cluster
from .runtime import Runtime

WATCH_SELECTORS: dict[tuple[str, ...], str] = {
    ("batch", "v1", "jobs"): f"{desired.ROLE_LABEL}=worker,{CAMPAIGN_LABEL}",
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
    # kopf's `labels=` filters apply after the watch: this selector goes to the API
    # server, so the operator streams worker Jobs, not every Job of the cluster.
    # Reports are a kind of their own (WorkerReport) and need no selector.
    for resource, selector in WATCH_SELECTORS.items():
        settings.watching.label_selectors[resource] = selector


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
            info = (connection_in_cluster(os.environ)
                    or kopf.login_with_kubeconfig(**kwargs))
        if info is not None:
            rt.kube = Kube(info)
        return info

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, worker_jobs: kopf.Index,
                      reports: kopf.Index, results: kopf.Index, campaigns: kopf.Index,
                      signatures: kopf.Index, **_: Any) -> None:
        configure(settings, rt)
        await rt.start()
        # The indexes are live: kopf fills them as its watches run.
        periodic.start(rt, worker_jobs=worker_jobs, reports=reports, results=results,
                       campaigns=campaigns, signatures=signatures)

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await rt.close()

    # Indexes: watch-fed views of the children, so the periodic work needs no list calls.
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
        return {(namespace, labels[CAMPAIGN_LABEL]):
                (body.metadata.name, followups.result_key(body), result)}

    @kopf.index(**fc, id="campaigns")
    def campaigns(namespace: str, name: str, body: kopf.Body,
                  **_: Any) -> dict[tuple[str, str], dict[str, Any]]:
        # Keyed like the children's campaign label, which is all a report event carries;
        # the status is the roll-up's previous one.
        return {(namespace, label_value(name)): {"metadata": dict(body.metadata), "spec": dict(body.spec),
                                                 "status": dict(body.status),
                                                 "apiVersion": API_VERSION, "kind": "FuzzCampaign"}}

    @kopf.index(**bs, id="signatures")
    def signatures(namespace: str, name: str, body: kopf.Body,
                   **_: Any) -> dict[str, dict[str, Any]]:
        # What alert retries and re-sends read; not the per-worker hits, the big part.
        status = {k: v for k, v in body.status.items() if k != "hits"}
        return {namespace: {"metadata": {"name": name, "namespace": namespace},
                            "spec": dict(body.spec), "status": status}}

    # FuzzCampaign lifecycle. Status roll-ups and re-ingestion are periodic.py's loops.
    @kopf.on.resume(**fc)
    @kopf.on.create(**fc)
    @kopf.on.update(field="spec", **fc)
    async def reconcile_campaign(body: kopf.Body, **_: Any) -> None:
        rt.reconciled.add(body.metadata.uid)  # kopf's indexes are filled: roll-ups may start
        await campaign_flows.reconcile(rt, body)
        await agents.converge(rt, rt.campaign(body))  # spec.agents: the swarm beside the workers

    @kopf.on.field(field="spec.image", **fc)
    async def image_changed(old: str | None, new: str | None, body: kopf.Body, **_: Any) -> None:
        if not old or old == new:
            return  # set at creation, or unchanged: nothing was fixed against it yet
        await followups.verify_on_new_image(rt, rt.campaign(body))

    # Deleted: the garbage collector removes the Jobs and reports (owner references), with
    # or without this operator; here only sooner, and the campaign's gauges with them.
    @kopf.on.event(**fc)
    async def campaign_event(type: str | None, name: str, namespace: str, uid: str,
                             **_: Any) -> None:
        if type == "DELETED":
            rt.reconciled.discard(uid)
            await campaign_flows.delete_children(rt, name, namespace, uid)

    # Worker reports -> BugSignatures.
    @kopf.on.event(GROUP, VERSION, REPORT_PLURAL, registry=registry)
    async def report_changed(type: str | None, body: kopf.Body, namespace: str,
                             campaigns: kopf.Index, **_: Any) -> None:
        if type == "DELETED":
            return
        found = list(campaigns.get((namespace, body.metadata.labels.get(CAMPAIGN_LABEL)), []))
        if found:
            await ingest.report_object(rt, rt.campaign(found[0]), dict(body))

    # BugSignature: people set spec.state (alert retries and re-sends: periodic.py).
    @kopf.on.field(field="spec.state", **bs)
    async def state_changed(new: str | None, name: str, namespace: str,
                            campaigns: kopf.Index, **_: Any) -> None:
        if new == "fixed":
            await followups.mark_fixed(rt, namespace, name, campaigns)

