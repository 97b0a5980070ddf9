"""Alertmanager's client contract on a real Alertmanager: the operator sends the firing
alert of every open BugSignature again before it ends (endsAt a few re-send intervals
ahead, not a week), so an Alertmanager restart loses nothing for long, and Alertmanager,
which knows a re-sent alert by its labels, notifies its receiver once; a fixed signature's
alert is resolved and no longer re-sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from controlplane.kit import chart_operator_flags
from xla_sentinel_operator.config import AlertingConfig
from xla_sentinel_operator.kube import path

from .alertmanager import Alertmanager
from .conftest import API, eventually
from .test_signatures import webhook_campaign
from .workers import Worker, finding

SIG, SIG2 = "0123456789abcdef", "00000000000000bb"
RESEND = 2.0  # seconds; alerts end 4 re-sends later

# One group per namespace, flushed every second, repeated only after an hour: any second
# notification within the test is a duplicate, unless it carries a new alert.
CONFIG = """\
route:
  receiver: team
  group_by: [namespace]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: team
    webhook_configs:
      - url: {url}
        send_resolved: true
"""


class Notifications:
    """Alertmanager's webhook receiver: the notifications people would get."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        self.received.append(await request.json())
        return web.Response(text="ok")

    async def start(self) -> Notifications:
        app = web.Application()
        app.router.add_post("/notify", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/notify"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def alerts(self, i: int) -> dict[str, str]:
        """signature -> status (firing, resolved) of the i-th notification."""
        return {a["labels"]["signature"]: a["status"] for a in self.received[i]["alerts"]}


@pytest.fixture
async def notifications() -> AsyncIterator[Notifications]:
    n = await Notifications().start()
    yield n
    await n.close()


def firing(am: Alertmanager, ns: str) -> dict[str, dict[str, Any]]:
    """signature -> alert, of the alerts Alertmanager holds active for this namespace."""
    return {a["labels"]["signature"]: a for a in am.alerts() if a["labels"].get("namespace") == ns}


async def test_open_alerts_survive_an_alertmanager_restart_and_notify_once(
        api, ns, client, start_operator, worker_kubeconfig, notifications):
    am = Alertmanager(CONFIG.format(url=notifications.url))
    try:
        op = await start_operator(alerting={"resend_interval": RESEND})
        fc = await webhook_campaign(client, ns, am.alerts_url)
        w = await Worker(worker_kubeconfig, fc, "main-0").start()
        await w.find(finding(SIG, 1))

        alert = (await eventually(lambda: firing(am, ns)))[SIG]
        ends = datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00"))
        assert ends < datetime.now(UTC) + timedelta(hours=1)  # not a week: re-sent instead
        await eventually(lambda: len(notifications.received) == 1)
        assert notifications.alerts(0) == {SIG: "firing"}

        am.restart()  # it keeps no alerts across a restart, only its notification log
        # Back with the next re-send, with the labels it had: the same alert.
        back = (await eventually(lambda: firing(am, ns), timeout=30))[SIG]
        assert back["labels"] == alert["labels"] and back["fingerprint"] == alert["fingerprint"]
        # Alertmanager has flushed the group holding it (it asked its notification log,
        # which survived the restart, whether anyone was told)...
        await eventually(lambda: am.metric("alertmanager_nflog_queries_total") >= 1, timeout=30)
        # ...and told no one again: the next notification is the next bug's, with both.
        await w.find(finding(SIG2, 2))
        await eventually(lambda: len(notifications.received) >= 2, timeout=30)
        assert notifications.alerts(1) == {SIG: "firing", SIG2: "firing"}

        # Fixed: resolved at once, and not re-sent (the other bug still is).
        await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"), {"spec": {"state": "fixed"}})
        await eventually(lambda: SIG not in firing(am, ns), timeout=30)
        resent = op.runtime.metrics.alerts_resent._value.get()
        await eventually(lambda: op.runtime.metrics.alerts_resent._value.get() >= resent + 2,
                         timeout=60)
        assert set(firing(am, ns)) == {SIG2}
        await eventually(lambda: any(notifications.alerts(i).get(SIG) == "resolved"
                                     for i in range(len(notifications.received))), timeout=30)
        assert [notifications.alerts(i) for i in range(2)] == [
            {SIG: "firing"}, {SIG: "firing", SIG2: "firing"}]
        assert all(notifications.alerts(i).get(SIG) != "firing"
                   for i in range(2, len(notifications.received)))
    finally:
        am.stop()


def test_the_chart_sets_the_resend_interval():
    # No cluster: the flags the chart's Deployment passes.
    assert float(chart_operator_flags()["--alert-resend-interval"]) == AlertingConfig.resend_interval
    assert chart_operator_flags("alerts.resendInterval=30")["--alert-resend-interval"] == "30"
