"""Prometheus metrics of the operator and the small HTTP server for /metrics, /healthz and
the read-only triage page of a namespace (/namespaces/NS, dashboard.py)."""

from __future__ import annotations

import asyncio
import hmac
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
        self.report_backlog = Gauge(
            "xlasentinel_report_backlog",
            "Worker reports whose ingestion waits or runs (thousands after a restart, "
            "draining; a steady rise means ingestion falls behind the writers).",
            registry=self.registry)
        self.programs = Gauge(
            "xlasentinel_campaign_programs", "Programs run by a campaign.",
            ["namespace", "campaign"], registry=self.registry)
        self.findings = Gauge(
            "xlasentinel_campaign_findings", "Findings of a campaign.",
            ["namespace", "campaign"], registry=self.registry)
        # The agent swarm (agents.converge_waves, from the campaign's task Leases).
        self.agent_tokens = Gauge(
            "xlasentinel_agent_tokens_spent", "Model tokens a campaign's agents spent, all tasks.",
            ["namespace", "campaign"], registry=self.registry)
        self.agent_usd = Gauge(
            "xlasentinel_agent_usd_spent", "Dollars a campaign's agents spent (genai-prices' offline prices; "
            "a model it does not know counts no dollars).", ["namespace", "campaign"], registry=self.registry)
        self.agent_tasks_dropped = Gauge(
            "xlasentinel_agent_tasks_dropped", "Agent tasks dropped after their last failed attempt.",
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
    api_down: bool = False  # the heartbeat's last API call failed
    api_back: float | None = None  # when the API answered again after failing

    def api_answered(self, now: float) -> None:
        """The heartbeat's API call succeeded. After an outage the roll-ups get their whole
        limit again from now: they could not run while the API was away."""
        if self.api_down:
            self.api_back = now
        self.api_down = False
        self.last_api_ok = now

    def api_failed(self) -> None:
        self.api_down = True

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
        return self._rollups(now, limit)

    def _rollups(self, now: float, limit: float) -> tuple[bool, str]:
        last = max((t for t in (self.last_rollup, self.acting_since, self.api_back)
                    if t is not None), default=None)
        if self.campaigns and (last is None or now - last > limit):
            return False, "roll-ups stopped"
        return True, "ok"

    def alive(self, now: float, interval: float, intervals: int = 5,
              floor: float = 30.0) -> tuple[bool, str]:
        """What the liveness probe judges (/livez): healthy() without the API server. An
        unreachable API server (a control-plane upgrade, a network partition) makes the
        replica unready, and a restart would not bring the API back: it would only lose
        the watches' state and the lease, on every replica at once. Stopped roll-ups while
        the API answers are this process's own fault, and a restart may cure them."""
        limit = max(interval * intervals, floor)
        if not self.started:
            return False, "starting"
        api_ok = self.last_api_ok is not None and now - self.last_api_ok <= limit
        if not api_ok:
            return True, "API server unreachable (unready, not restarted)"
        if not self.acting:
            return True, "standby"
        return self._rollups(now, limit)


async def serve(metrics: Metrics, host: str, port: int,
                healthy: Callable[[], tuple[bool, str]],
                alive: Callable[[], tuple[bool, str]] | None = None
                ) -> tuple[web.AppRunner, int]:
    """Start /metrics, /healthz (readiness, also /readyz) and /livez (liveness: `alive`,
    `healthy` when not given); returns the runner (to clean up) and the bound port."""

    async def metrics_view(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health_view(_: web.Request) -> web.Response:
        ok, why = healthy()
        return web.json_response({"ok": ok, "reason": why}, status=200 if ok else 503)

    async def live_view(_: web.Request) -> web.Response:
        ok, why = (alive or healthy)()
        return web.json_response({"ok": ok, "reason": why}, status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/healthz", health_view)
    app.router.add_get("/readyz", health_view)
    app.router.add_get("/livez", live_view)
    return await _start(app, host, port)


def bearer_ok(header: str | None, token_file: str | None) -> bool:
    """Whether a request's Authorization header carries the token in `token_file` (always,
    without a file). The file is read at each request: a rotated Secret applies at once; an
    unreadable or empty one lets no one in."""
    if token_file is None:
        return True
    try:
        with open(token_file, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError:
        return False
    scheme, _, given = (header or "").partition(" ")
    return (bool(token) and scheme == "Bearer"
            and hmac.compare_digest(given.strip().encode(), token.encode()))


async def serve_page(host: str, port: int, page: Callable[[str], Awaitable[str | None]],
                     token_file: str | None = None) -> tuple[web.AppRunner, int]:
    """Start the triage page, /namespaces/NS (`page`: namespace -> HTML, None for one not
    served), on a port of its own, asking for the bearer token in `token_file` if given."""

    async def page_view(request: web.Request) -> web.Response:
        if not bearer_ok(request.headers.get("Authorization"), token_file):
            return web.Response(status=401, text="a bearer token is required",
                                headers={"WWW-Authenticate": "Bearer"})
        namespace = request.match_info["namespace"]
        try:
            text = await page(namespace)
        except ApiError as e:
            return web.Response(status=502, text=f"the API server refused the read: {e}")
        if text is None:
            return web.Response(status=404, text=f"namespace {namespace} is not watched by this operator")
        # The page is self-contained; the policy makes the browser hold it to that.
        return web.Response(text=text, content_type="text/html", headers={
            "Content-Security-Policy": CSP, "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff"})

    app = web.Application()
    app.router.add_get("/namespaces/{namespace}", page_view)
    return await _start(app, host, port)


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    # With port 0 the OS picks the port; aiohttp only exposes it on the server's socket.
    server = site._server
    bound = server.sockets[0].getsockname()[1] if isinstance(server, asyncio.Server) else port
    return runner, int(bound)
