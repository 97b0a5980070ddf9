"""The state one operator shares across its handlers and workflows (API client, metrics,
locks, what it has ingested), and the few helpers every workflow uses.

One Runtime per operator, never module-level state, so tests can run several operators
(restart, two replicas) in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf
import structlog
from xla_sentinel.spec.campaign import API_VERSION, SpecError, parse_spec

from . import alerting, dashboard, desired, leadership, tpu
from .bodies import (
    BugSignature,
    FuzzCampaign,
    KopfPeering,
    ObjectRef,
    PeerEntry,
    annotations_of,
)
from .bodies import WorkerReport as WorkerReportBody
from .config import Config
from .kube import ApiError, Kube, path
from .metrics import Liveness, Metrics, serve, serve_page
from .timestamps import rfc3339

# Read-modify-write attempts of one object before the conflict is raised to kopf's retry.
CONFLICT_ATTEMPTS = 5
# Report ingestions at once (Backlog): each is a few signature reads and writes. Bounded so
# that a restarted operator's thousands of listed reports never crowd out, in the API
# client's connection pool and the event loop, the campaigns' own handlers and roll-ups.
INGEST_WORKERS = 8
# Waiting ingestions that keep their report's content (Backlog); the others keep only the
# report's name and read it from the API at their turn.
BODIES_KEPT = 256
log = structlog.get_logger("xla_sentinel_operator")

Key = tuple[str, str]
# An ingestion, given the report as its event brought it (bodies.WorkerReport, the parts
# ingest.essentials keeps), or None where the backlog kept only the name: then it reads
# the report from the API.
Ingestion = Callable[[WorkerReportBody | None], Awaitable[None]]


class Backlog:
    """Report ingestions waiting for one of INGEST_WORKERS workers, by (namespace, report).

    kopf runs each object's handler in a task of its own as events come: a freshly started
    operator (upgrade, failover) lists every report at once and had thousands of
    ingestions in flight, each holding its whole object, which starved the campaigns'
    handlers and roll-ups (a spec change not rolled up within minutes) and took the
    operator's memory to 2.7x its steady state. The report handler now only puts the
    ingestion here and returns. A newer event of a report still waiting replaces the older
    one (a report is cumulative: only its latest content needs ingesting), and one report is
    never ingested by two workers at once. A failed ingestion is logged: the periodic
    re-ingestion (ingest.catch_up) finds it by its fingerprint and tries again.

    At most `bodies_kept` waiting ingestions keep the report their event brought; past
    that, only the report's name is kept and the ingestion reads the report from the API at
    its turn (the newest content, as a replacing event would bring). A restarted operator's
    listing puts every report here at once, and a worker's report is up to 512 KiB: kept
    whole, thousands would stay through the whole drain, their memory then held by a heap
    that gives back only empty arenas (docs/operator.md, the restarted operator). An
    operator that keeps up (a few reports waiting) reads nothing more."""

    def __init__(self, workers: int = INGEST_WORKERS, bodies_kept: int = BODIES_KEPT) -> None:
        self.workers = workers
        self.bodies_kept = bodies_kept
        # key -> (ingestion, the report it was put with, or None: read it at its turn)
        self.pending: dict[Key, tuple[Ingestion, WorkerReportBody | None]] = {}
        self.running: set[Key] = set()
        self.kept = 0  # pending entries holding a report
        self._ready = asyncio.Condition()

    def __len__(self) -> int:
        return len(self.pending) + len(self.running)

    def holds(self, key: Key) -> bool:
        """Whether the report's ingestion waits or runs here (catch_up leaves it alone)."""
        return key in self.pending or key in self.running

    async def put(self, key: Key, work: Ingestion, report: WorkerReportBody | None = None) -> None:
        """Ingest `report` (the event's) with `work`; past `bodies_kept` waiting reports
        `work` gets None and reads it. A newer event of a waiting report takes its place."""
        before = self.pending.get(key)
        if before is not None and before[1] is not None:
            self.kept -= 1
        if report is not None and self.kept >= self.bodies_kept:
            report = None
        if report is not None:
            self.kept += 1
        self.pending[key] = (work, report)  # a replaced key keeps its place in the order
        async with self._ready:
            self._ready.notify()

    def _take(self, key: Key) -> tuple[Ingestion, WorkerReportBody | None]:
        item = self.pending.pop(key)
        if item[1] is not None:
            self.kept -= 1
        return item

    def drop(self, key: Key) -> None:
        """The report is gone: nothing of it left to ingest."""
        if key in self.pending:
            self._take(key)

    def _next(self) -> tuple[Key, Ingestion, WorkerReportBody | None] | None:
        for key in self.pending:  # oldest first (dicts keep insertion order)
            if key not in self.running:
                return key, *self._take(key)
        return None

    async def work(self) -> None:
        """One worker: ingest what is put, oldest first, until cancelled."""
        while True:
            async with self._ready:
                await self._ready.wait_for(self._next_ready)
                item = self._next()
            if item is None:  # another worker took it between the wake-up and here
                continue
            key, job, report = item
            self.running.add(key)
            try:
                await job(report)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # one report's failure must not end the worker
                log.error("report.ingest_failed", namespace=key[0], report=key[1],
                          error=f"{type(e).__name__}: {e}")
            finally:
                self.running.discard(key)
                if key in self.pending:  # a newer event came while this one ran
                    async with self._ready:
                        self._ready.notify()

    def _next_ready(self) -> bool:
        return any(key not in self.running for key in self.pending)


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
    # (namespace, signature name, alert key) of alerts this operator resolved: a re-send
    # (notify.resend) that read the signature before it was fixed must not fire it again.
    resolved: set[tuple[str, str, str]] = field(default_factory=set)
    # uid -> (generation, parsed campaign): parse_spec costs milliseconds and report events
    # come by the thousand, while a spec changes only with the generation.
    parsed: dict[str, tuple[tuple[int, str | None], desired.Campaign]] = field(default_factory=dict)
    # uids of the campaigns kopf has handed to reconcile() in this operator: kopf calls it
    # only once its indexes are filled, so a roll-up of these never reads empty indexes.
    reconciled: set[str] = field(default_factory=set)
    # (namespace, campaign) -> the revision its last roll-up saw: when it changes, what
    # this operator remembers of the older revisions' workers is let go (forget()).
    revisions: dict[tuple[str, str], str] = field(default_factory=dict)
    # Report ingestions waiting for a worker (Backlog), started with the operator.
    backlog: Backlog = field(default_factory=Backlog)
    limiter: alerting.Limiter = field(init=False)
    # Peering: this replica's identity and priority (kopf's, and the periodic work's gate).
    identity: str = field(default_factory=leadership.own_identity)
    priority: int = field(init=False)
    _runner: Any = None
    _page_runner: Any = None
    page_port: int | None = None  # the triage page's, when served (MetricsConfig.page_port)
    _heartbeat: asyncio.Task[None] | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.metrics.report_backlog.set_function(lambda: len(self.backlog))
        self.limiter = alerting.Limiter(rate=self.config.alerting.rate,
                                        burst=self.config.alerting.burst)
        given = self.config.peering.priority
        self.priority = (given if given is not None
                         else leadership.seniority_priority(time.time(), self.identity))
        if self.config.peering.standalone:
            self.liveness.act(True, time.monotonic())

    @property
    def api(self) -> Kube:
        if self.kube is None:
            raise RuntimeError("not logged in yet")
        return self.kube

    async def start(self) -> None:
        """Serve /metrics and the probes, the triage page on its own port where asked, and
        start the heartbeat; called once kopf has logged in."""
        m = self.config.metrics
        if m.port is not None:
            self._runner, self.metrics_port = await serve(
                self.metrics, m.host, m.port, self.healthy, alive=self.alive)
        if m.page_port is not None:
            self._page_runner, self.page_port = await serve_page(
                m.host, m.page_port,
                lambda ns: dashboard.render(self.api, ns, self.config.namespaces),
                m.page_token_file)
        self._heartbeat = asyncio.create_task(heartbeat(self))
        for i in range(self.backlog.workers):
            self.spawn(asyncio.create_task(self.backlog.work(), name=f"ingest-{i}"))
        self.liveness.started = True

    def spawn(self, task: asyncio.Task[None]) -> None:
        """Keep a background task of this operator, cancelled by close()."""
        self._tasks.append(task)

    async def close(self) -> None:
        """Stop what start() began and close the API client."""
        self.liveness.started = False
        for task in [self._heartbeat, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for runner in (self._runner, self._page_runner):
            if runner is not None:
                await runner.cleanup()
        if self.kube is not None:
            await self.kube.close()

    def forget(self, namespace: str, campaign: str, keep_revision: str | None = None,
               uid: str | None = None) -> int:
        """Let go of what this operator remembers of a campaign's workers: the hit counts of
        its older revisions (all of them with `keep_revision` None: the campaign is gone),
        and, gone, its parsed spec. Months of revisions and campaigns otherwise pile up in
        `hits_seen` (an entry per worker, revision and signature). Only a shortcut is lost:
        a report read again is compared with the signature instead. Entries let go."""
        prefix = f"{campaign}/"

        def old(key: str) -> bool:
            if not key.startswith(prefix):
                return False
            parts = key.split("/")
            return keep_revision is None or (len(parts) == 3 and parts[1] != keep_revision)

        gone = [k for k in self.hits_seen if k[0] == namespace and old(k[2])]
        for k in gone:
            del self.hits_seen[k]
        if keep_revision is None:
            self.revisions.pop((namespace, campaign), None)
            if uid is not None:
                self.parsed.pop(uid, None)
        return len(gone)

    def revision_seen(self, namespace: str, campaign: str, rev: str) -> None:
        """A roll-up saw `rev`: on a change, forget the older revisions' hit counts."""
        before = self.revisions.get((namespace, campaign))
        self.revisions[(namespace, campaign)] = rev
        if before is not None and before != rev:
            self.forget(namespace, campaign, keep_revision=rev)

    def forget_report(self, namespace: str, name: str) -> None:
        """A WorkerReport was deleted: its ingestion and refusal records go with it."""
        self.backlog.drop((namespace, name))
        for records in (self.ingested, self.announced, self.unreadable):
            records.pop((namespace, name), None)

    def healthy(self) -> tuple[bool, str]:
        return self.liveness.healthy(time.monotonic(), self.config.rollup_interval)

    def alive(self) -> tuple[bool, str]:
        return self.liveness.alive(time.monotonic(), self.config.rollup_interval)

    async def event(self, ref: ObjectRef, type: str, reason: str, message: str) -> None:
        """Post a core/v1 Event about `ref` (object_ref, campaign_ref). Posted directly, not
        through kopf.event, which works only inside kopf's handlers; the periodic work
        (periodic.py) runs outside them. A refused Event is logged, never raised."""
        meta = ref["metadata"]
        when = now_text()
        body: dict[str, object] = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{meta['name'][:200]}.",
                             "namespace": meta["namespace"]},
                "involvedObject": {"apiVersion": ref["apiVersion"], "kind": ref["kind"],
                                   "name": meta["name"], "namespace": meta["namespace"],
                                   "uid": meta.get("uid", "")},
                "type": type, "reason": reason, "message": message[:1024],
                "source": {"component": "xla-sentinel-operator"},
                "firstTimestamp": when, "lastTimestamp": when, "count": 1}
        try:
            await self.api.request("POST", path("v1", "events", meta["namespace"]), body=body)
        except (TimeoutError, ApiError, OSError, aiohttp.ClientError) as e:
            log.warning("event.failed", reason=reason, object=meta["name"], error=str(e))

    def lock(self, namespace: str, signature: str) -> asyncio.Lock:
        return self.locks.setdefault((namespace, signature), asyncio.Lock())

    def campaign(self, body: FuzzCampaign) -> desired.Campaign:
        meta = body["metadata"]
        uid = meta.get("uid", "")
        # The image-platform annotation changes no generation, so it keys the cache too.
        key = (int(meta.get("generation") or 0),
               annotations_of(body).get(desired.IMAGE_PLATFORM_ANNOTATION))
        hit = self.parsed.get(uid)
        if hit is None or hit[0] != key or not uid:
            hit = (key, campaign_of(body, self.config.jobs.images(), jobset=self.config.jobs.jobset))
            self.parsed[uid] = hit
        return hit[1]

    def runner_image(self, c: desired.Campaign) -> str:
        """The image of the campaign's pods where a target names none (checked by campaign())."""
        return c.spec.image or self.config.jobs.images()[c.spec.accelerator.type]


def now_text() -> str:
    return rfc3339(datetime.now(UTC))


class Refused(kopf.PermanentError):
    """A campaign the operator will make no Job for; `reason` becomes its Stalled condition's."""

    def __init__(self, message: str, reason: str = "InvalidSpec") -> None:
        super().__init__(message)
        self.reason = reason


def campaign_of(body: FuzzCampaign, images: dict[str, str] | None = None,
                jobset: bool = True) -> desired.Campaign:
    """The parsed campaign; Refused (before any Job is made) for a spec the schema refuses,
    a TPU slice GKE cannot run, a multi-host slice on a cluster without JobSet (`jobset`
    False), or (given the configured runner images) an image of another platform than the
    campaign's."""
    meta = body["metadata"]
    try:
        spec = parse_spec(body.get("spec") or {})
        tpu_slice = desired.tpu_slice(spec)  # a TPU slice GKE cannot run is refused before any Job
    except (SpecError, tpu.TopologyError) as e:
        raise Refused(str(e)) from None
    if tpu_slice is not None and tpu_slice.multi_host and not jobset:
        raise Refused(desired.jobset_unavailable(spec, tpu_slice), "JobSetUnavailable")
    if desired.group_hosts(spec) > 1 and not jobset:
        raise Refused(desired.hosts_unavailable(spec), "JobSetUnavailable")
    if images is not None:
        declared = annotations_of(body).get(desired.IMAGE_PLATFORM_ANNOTATION)
        try:
            desired.runner_image(spec, images, declared)
        except desired.ImageError as e:
            raise Refused(str(e), "ImagePlatformMismatch") from None
    return desired.Campaign(name=meta["name"], namespace=meta["namespace"],
                            uid=meta.get("uid", ""), spec=spec,
                            priority_class=(meta.get("labels") or {}).get(desired.PRIORITY_LABEL))


def object_ref(obj: BugSignature, kind: str) -> ObjectRef:
    """What kopf.event needs of an object read from the API."""
    meta = obj["metadata"]
    return {"apiVersion": API_VERSION, "kind": kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "uid": meta.get("uid", "")}}


def campaign_ref(c: desired.Campaign) -> ObjectRef:
    """What kopf.event needs of a campaign, from its parsed form (no API read)."""
    return {"apiVersion": API_VERSION, "kind": "FuzzCampaign",
            "metadata": {"name": c.name, "namespace": c.namespace, "uid": c.uid}}


async def peering_status(rt: Runtime) -> list[dict[str, PeerEntry]]:
    """The status (identity -> entry) of every peering object this replica takes part in:
    the ClusterKopfPeering cluster-wide, else the KopfPeering of each watched namespace."""
    name = rt.config.peering.name
    wheres: list[str | None] = list(rt.config.namespaces) or [None]
    out = []
    for namespace in wheres:
        plural = "kopfpeerings" if namespace else "clusterkopfpeerings"
        obj = await rt.api.get(path("kopf.dev/v1", plural, namespace, name), KopfPeering)

        out.append(dict((obj or {}).get("status") or {}))
    return out


async def refresh_leadership(rt: Runtime) -> None:
    """Whether this replica acts now, by kopf's rule on the peering objects: the periodic
    work and /healthz follow it. Standalone, it always acts."""
    if rt.config.peering.standalone:
        return
    now = datetime.now(UTC)
    statuses = await peering_status(rt)
    acting = all(leadership.leading(s, rt.identity, rt.priority, now) for s in statuses)
    if rt.liveness.act(acting, time.monotonic()):
        log.info("peering.acting" if acting else "peering.standby", identity=rt.identity,
                 priority=rt.priority)


async def heartbeat(rt: Runtime) -> None:
    """Prove the operator works: one cheap API read per roll-up interval (also tells
    /healthz whether campaigns exist, whose roll-ups must then keep coming), and read the
    peering objects: whether this replica leads."""
    namespace = rt.config.namespaces[0] if rt.config.namespaces else None
    while True:
        if rt.kube is not None:
            try:
                data = await rt.kube.request("GET", path(API_VERSION, "fuzzcampaigns", namespace),
                                             params={"limit": "1"})
                rt.liveness.api_answered(time.monotonic())
                rt.liveness.campaigns = bool(data.get("items"))
                await refresh_leadership(rt)
            except (TimeoutError, ApiError, OSError, aiohttp.ClientError) as e:
                rt.liveness.api_failed()
                log.warning("heartbeat.failed", error=str(e))
        await asyncio.sleep(rt.config.rollup_interval)
