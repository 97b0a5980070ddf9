"""Prometheus metrics of the operator and the small HTTP server for /metrics and /healthz."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)


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


async def serve(metrics: Metrics, host: str, port: int,
                healthy: Callable[[], bool]) -> tuple[web.AppRunner, int]:
    """Start /metrics and /healthz; returns the runner (to clean up) and the bound port."""

    async def metrics_view(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health_view(_: web.Request) -> web.Response:
        ok = healthy()
        return web.json_response({"ok": ok}, status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/healthz", health_view)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    # With port 0 the OS picks the port; aiohttp only exposes it on the server's socket.
    bound = site._server.sockets[0].getsockname()[1] if site._server else port  # type: ignore[union-attr]
    return runner, int(bound)
