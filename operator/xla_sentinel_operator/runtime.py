"""The state one operator shares across its handlers and workflows (API client, metrics,
locks, what it has ingested), and the few helpers every workflow uses.

One Runtime per operator, never module-level state, so tests can run several operators
(restart, two replicas) in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf
import structlog
from xla_sentinel.spec.campaign import API_VERSION, SpecError, parse_spec

from . import alerting, dashboard, desired, tpu
from .config import Config
from .kube import ApiError, Kube, path
from .metrics import Liveness, Metrics, serve

# Read-modify-write attempts of one object before the conflict is raised to kopf's retry.
CONFLICT_ATTEMPTS = 5
log = structlog.get_logger("xla_sentinel_operator")


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
        self.limiter = alerting.Limiter(rate=self.config.alerting.rate,
                                        burst=self.config.alerting.burst)

    @property
    def api(self) -> Kube:
        if self.kube is None:
            raise RuntimeError("not logged in yet")
        return self.kube

    async def start(self) -> None:
        """Serve /metrics, /healthz and the triage page (unless the port is None) and start
        the heartbeat; called once kopf has logged in."""
        m = self.config.metrics
        if m.port is not None:
            self._runner, self.metrics_port = await serve(
                self.metrics, m.host, m.port, self.healthy,
                page=lambda ns: dashboard.render(self.api, ns, self.config.namespaces))
        self._heartbeat = asyncio.create_task(heartbeat(self))
        self.liveness.started = True

    async def close(self) -> None:
        """Stop what start() began and close the API client."""
        self.liveness.started = False
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        if self._runner is not None:
            await self._runner.cleanup()
        if self.kube is not None:
            await self.kube.close()

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


def object_ref(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """What kopf.event needs of an object read from the API."""
    meta = obj["metadata"]
    return {"apiVersion": API_VERSION, "kind": kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "uid": meta.get("uid", "")}}


def campaign_ref(c: desired.Campaign) -> dict[str, Any]:
    """What kopf.event needs of a campaign, from its parsed form (no API read)."""
    return {"apiVersion": API_VERSION, "kind": "FuzzCampaign",
            "metadata": {"name": c.name, "namespace": c.namespace, "uid": c.uid}}


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
