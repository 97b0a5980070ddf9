"""Prometheus metrics of the operator and the small HTTP server for /metrics, /healthz and
the read-only triage page of a namespace (/namespaces/NS, dashboard.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)
from xla_sentinel.report.html import CSP

from .kube import ApiError


class Metrics:
    """One registry per operator instance, so two operators in one process stay apart."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.signatures = Counter(
            "xlasentinel_bug_signatures_total",
            "Bug signatures that raised an alert-worthy event (new or regressed).",
            ["namespace", "verdict", "reason"], registry=self.registry)
        self.alerts_sent = Counter(
            "xlasentinel_alerts_sent_total", "Webhook alerts delivered.",
            ["reason"], registry=self.registry)
        self.alerts_resent = Counter(
            "xlasentinel_alerts_resent_total",
            "Firing alerts of open signatures sent again (Alertmanager's clients re-send "
            "what still fires).", registry=self.registry)
        self.alert_failures = Counter(
            "xlasentinel_alert_failures_total",
            "Webhook alerts that failed after every retry (retried later).",
            registry=self.registry)
        self.reports_ingested = Counter(
            "xlasentinel_reports_ingested_total", "Worker reports read.", registry=self.registry)
        self.programs = Gauge(
            "xlasentinel_campaign_programs", "Programs run by a campaign.",
            ["namespace", "campaign"], registry=self.registry)
        self.findings = Gauge(
            "xlasentinel_campaign_findings", "Findings of a campaign.",
            ["namespace", "campaign"], registry=self.registry)


@dataclass
class Liveness:
    """What /healthz judges: the operator's own proof of work, as monotonic seconds."""

    started: bool = False
    last_api_ok: float | None = None  # the last successful API call of the heartbeat
    last_rollup: float | None = None  # the last completed roll-up of any campaign
    campaigns: bool = False  # the heartbeat saw at least one FuzzCampaign
    acting: bool = False  # this replica leads (peering) or runs alone: it rolls up
    acting_since: float | None = None  # when it last began to act

    def act(self, acting: bool, now: float) -> bool:
        """Record whether this replica acts; True when that changed."""
        if acting and not self.acting:
            self.acting_since = now
        changed, self.acting = acting != self.acting, acting
        return changed

    def healthy(self, now: float, interval: float, intervals: int = 5,
                floor: float = 30.0) -> tuple[bool, str]:
        """Healthy while the API answered and, where campaigns exist and this replica acts,
        a roll-up finished within `intervals` roll-up intervals of the later of the last
        roll-up and the moment it began to act (and never less than `floor` seconds: a busy
        operator on a loaded node is slow, not dead, and a failed liveness probe restarts
        it). A standby replica (a paused peer) is judged by the API alone: it is meant to
        do nothing until the leader goes."""
        limit = max(interval * intervals, floor)
        if not self.started:
            return False, "starting"
        if self.last_api_ok is None or now - self.last_api_ok > limit:
            return False, "no successful API call recently"
        if not self.acting:
            return True, "standby"
        last = max((t for t in (self.last_rollup, self.acting_since) if t is not None),
                   default=None)
        if self.campaigns and (last is None or now - last > limit):
            return False, "roll-ups stopped"
        return True, "ok"


async def serve(metrics: Metrics, host: str, port: int,
                healthy: Callable[[], tuple[bool, str]],
                page: Callable[[str], Awaitable[str | None]] | None = None
                ) -> tuple[web.AppRunner, int]:
    """Start /metrics, /healthz and, given `page` (namespace -> HTML, None for one not
    served), /namespaces/NS; returns the runner (to clean up) and the bound port."""

    async def metrics_view(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health_view(_: web.Request) -> web.Response:
        ok, why = healthy()
        return web.json_response({"ok": ok, "reason": why}, status=200 if ok else 503)

    async def page_view(request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        try:
            text = await page(namespace) if page is not None else None
        except ApiError as e:
            return web.Response(status=502, text=f"the API server refused the read: {e}")
        if text is None:
            return web.Response(status=404, text=f"namespace {namespace} is not watched by this operator")
        # The page is self-contained; the policy makes the browser hold it to that.
        return web.Response(text=text, content_type="text/html", headers={
            "Content-Security-Policy": CSP, "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff"})

    app = web.Application()
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/healthz", health_view)
    app.router.add_get("/namespaces/{namespace}", page_view)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    # With port 0 the OS picks the port; aiohttp only exposes it on the server's socket.
    server = site._server
    bound = server.sockets[0].getsockname()[1] if isinstance(server, asyncio.Server) else port
    return runner, int(bound)
