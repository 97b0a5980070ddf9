"""The operator's periodic work: roll up campaigns, re-ingest what failed, retry owed
alerts, re-send open signatures' alerts. Plain asyncio loops over kopf's indexes, run only
while this replica leads (leadership.py, read by the heartbeat).

Why not kopf timers: kopf puts its finalizer on every object a timer or daemon serves, so
that it can stop the timer before the object goes. With the operator stopped (uninstalled,
scaled to zero, crashing) deleting a FuzzCampaign, a BugSignature, their namespace or an
Argo CD app holding them would then hang until someone removes the finalizer by hand.
These loops look objects up in the indexes at each round instead, so a deleted object is
simply no longer there, and no object carries a finalizer of this operator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar

import kopf
from xla_sentinel.cluster.report import WorkerReport, label_value

from . import agents, ingest, notify
from . import campaigns as campaign_flows
from .bodies import (
    BugSignature,
    Disrupted,
    FuzzCampaign,
    Job,
    KubeObject,
    Result,
    sig_spec,
    sig_status,
)
from .notify import CampaignIndex
from .runtime import Runtime, log

# Roll-ups of different campaigns at once (each is a few API calls at most).
CONCURRENCY = 8

# kopf's indexes (handlers.py) as their handlers see them: a key -> the values indexed.
# By (namespace, campaign label value): a campaign's worker Jobs, its reports (name,
# report) and results (name, key, result); by namespace: its signatures.
CampaignKey = tuple[str, str]
WorkerJobIndex = Mapping[CampaignKey, Collection[Job]]
# Reports: (name, report without samples and coverage, fingerprint of the whole report).
ReportIndex = Mapping[CampaignKey, Collection[tuple[str, WorkerReport, str]]]
ResultIndex = Mapping[CampaignKey, Collection[tuple[str, str, Result]]]
SignatureIndex = Mapping[str, Collection[BugSignature]]
# By campaign: its disrupted worker pods (only those: rollup.disrupted_pod).
DisruptedIndex = Mapping[CampaignKey, Collection[Disrupted]]
Item = TypeVar("Item", FuzzCampaign, BugSignature)


async def every(rt: Runtime, what: str, interval: float, work: Callable[[], Awaitable[Any]],
                first: float = 0.0) -> None:
    """Run `work` every `interval` seconds (after `first`) while this replica acts; an
    error is logged and the next round tries again."""
    await asyncio.sleep(first)
    while True:
        if rt.liveness.acting:
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # one bad round must not end the loop
                log.exception("periodic.failed", work=what, error=str(e))
        await asyncio.sleep(interval)


def campaign_bodies(rt: Runtime, campaigns: CampaignIndex) -> list[FuzzCampaign]:
    """The campaigns (index values) this operator has reconciled since it started."""
    return [body for key in list(campaigns) for body in list(campaigns.get(key, []))
            if body["metadata"].get("uid") in rt.reconciled]


async def _each(what: str, items: list[Item], work: Callable[[Item], Awaitable[None]]) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(item: Item) -> None:
        async with gate:
            await work(item)

    for item, outcome in zip(items, await asyncio.gather(*(one(i) for i in items),
                                                        return_exceptions=True), strict=True):
        if isinstance(outcome, BaseException) and not isinstance(outcome, kopf.PermanentError):
            obj: KubeObject = item
            meta = obj["metadata"]
            log.error("periodic.failed", work=what, namespace=meta.get("namespace"),
                      name=meta.get("name"), error=f"{type(outcome).__name__}: {outcome}")


def start(rt: Runtime, *, worker_jobs: WorkerJobIndex, reports: ReportIndex,
          results: ResultIndex, campaigns: CampaignIndex, signatures: SignatureIndex,
          disrupted: DisruptedIndex | None = None) -> None:
    """Start the loops over kopf's live indexes (as kopf hands them to the startup handler)."""
    cfg = rt.config

    def key(body: FuzzCampaign) -> CampaignKey:
        return body["metadata"]["namespace"], label_value(body["metadata"]["name"])

    async def roll_up(body: FuzzCampaign) -> None:
        await campaign_flows.roll_up_and_write(
            rt, body, list(worker_jobs.get(key(body), [])),
            [r for _, r, _ in reports.get(key(body), [])],
            list(disrupted.get(key(body), [])) if disrupted is not None else [])
        if body["spec"].get("agents"):  # the swarm's work its events start (agents.converge_waves)
            await agents.converge_waves(rt, rt.campaign(body), body.get("status") or {},
                                        list(signatures.get(body["metadata"]["namespace"], [])))

    async def reingest(body: FuzzCampaign) -> None:
        await ingest.catch_up(rt, rt.campaign(body), list(reports.get(key(body), [])),
                              list(results.get(key(body), [])))

    def sigs() -> list[BugSignature]:
        return [s for k in list(signatures) for s in list(signatures.get(k, []))]

    async def retry(sig: BugSignature) -> None:
        meta = sig["metadata"]
        await notify.retry(rt, meta["namespace"], meta["name"], sig_spec(sig), sig_status(sig),
                           campaigns)


    loops = {
        "roll_up": (cfg.rollup_interval, 0.0,
                    lambda: _each("roll_up", campaign_bodies(rt, campaigns), roll_up)),
        # Reports and results whose event failed to ingest (an API error mid-way); apart
        # from the roll-up, so a backlog never delays the status.
        "reingest": (cfg.rollup_interval * 5, cfg.rollup_interval * 5,
                     lambda: _each("reingest", campaign_bodies(rt, campaigns), reingest)),
        "retry_alert": (cfg.alerting.retry_interval, cfg.alerting.retry_interval,
                        lambda: _each("retry_alert", sigs(), retry)),
        "resend_alerts": (cfg.alerting.resend_interval, cfg.alerting.resend_interval,
                          lambda: notify.resend(rt, sigs(), campaigns)),
    }
    for what, (interval, first, work) in loops.items():
        rt.spawn(asyncio.create_task(every(rt, what, interval, work, first), name=what))
    # Not under `every`: a standby replica lists and watches as the acting one does.
    rt.spawn(asyncio.create_task(_trim_every(TRIM_INTERVAL), name="trim"))


# How often freed heap goes back to the system (_trim_every).
TRIM_INTERVAL = 10.0


async def _trim_every(interval: float) -> None:
    """Give the C heap's free pages back to the system now and then (glibc malloc_trim).
    A freshly started operator parses the initial listing of every watched kind (thousands
    of pods and reports, in kopf's pages) and holds each object until the indexes are
    filled; the bodies are freed once indexed, but glibc keeps the pages: 30 s after a restart facing 4,196 worker pods
    and reports the RSS was the peak, 410 MiB; trimmed every 10 s, 365 MiB of a 411 MiB
    peak (bench/operator_scale.py --kwok-nodes 1000 --workers 4096, one run each)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to give back this way
        trim = None
    if trim is None:
        return
    while True:
        await asyncio.sleep(interval)
        trim(0)
