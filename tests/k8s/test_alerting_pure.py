"""Alert delivery: the Alertmanager v2 body, the resolving alert of a fixed bug, which
answers are retried, and the per-receiver token bucket (a loopback receiver, no API)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web
from xla_sentinel_operator import alerting, signatures
from xla_sentinel_operator.alerting import Delivery

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def sig(**status) -> dict:
    return {"metadata": {"name": "sig-aa", "namespace": "fuzz"},
            "spec": {"signature": "00000000000000aa", "verdict": "mismatch", "state": "new"},
            "status": status}


def test_starts_at_is_always_rfc3339_even_without_seen_times():
    for status in ({}, {"firstSeen": "garbage"}, {"firstSeen": "2026-11-29T11:00:00+00:00"}):
        (alert,) = signatures.alerts(sig(**status), "new", now=NOW)
        assert RFC3339.fullmatch(alert["startsAt"]) and RFC3339.fullmatch(alert["endsAt"])
        assert alert["startsAt"] <= "2026-11-29T12:00:00Z"
    (alert,) = signatures.alerts(sig(), "new", now=NOW)
    assert "generatorURL" not in alert  # no empty URL for Alertmanager's uri check


def test_a_regression_starts_when_it_was_seen_again():
    (alert,) = signatures.alerts(sig(firstSeen="2026-11-01T00:00:00Z", lastSeen="2026-11-29T11:00:00Z"),
                                 "regressed-1", now=NOW)
    assert alert["startsAt"] == "2026-11-29T11:00:00Z" and alert["labels"]["severity"] == "critical"


def test_resolving_alert_ends_now_with_the_labels_of_the_firing_one():
    s = sig(firstSeen="2026-11-29T10:00:00Z")
    (firing,) = signatures.alerts(s, "new", now=NOW)
    (resolved,) = signatures.alerts(s, "new", now=NOW, resolved=True)
    assert resolved["labels"] == firing["labels"]  # Alertmanager matches alerts by labels
    assert resolved["endsAt"] == "2026-11-29T12:00:00Z" < firing["endsAt"]


def test_resolve_is_due_once_after_the_bug_is_marked_fixed():
    assert signatures.due_resolve({"state": "fixed"}, {"alertKey": "new"}) == "new"
    assert signatures.due_resolve({"state": "fixed"}, {"alertKey": "new", "resolvedKey": "new"}) is None
    assert signatures.due_resolve({"state": "fixed"}, {}) is None  # never alerted: nothing to end
    assert signatures.due_resolve({"state": "triaged"}, {"alertKey": "new"}) is None


def test_only_rate_limits_and_server_errors_are_retryable():
    assert alerting.retryable(429) and alerting.retryable(500) and alerting.retryable(503)
    assert not any(alerting.retryable(s) for s in (400, 401, 403, 404, 409, 422))


def test_token_bucket_lets_a_burst_through_then_paces():
    bucket = alerting.TokenBucket(rate=0.5, burst=3)
    assert [bucket.take(100.0) for _ in range(4)] == [True, True, True, False]
    assert not bucket.take(101.0)  # half a token
    assert bucket.take(102.0)
    assert not bucket.take(102.0)


def test_limiter_keeps_one_bucket_per_receiver():
    limiter = alerting.Limiter(rate=0.0, burst=1)
    assert limiter.allow("http://a", now=0.0) and limiter.allow("http://b", now=0.0)
    assert not limiter.allow("http://a", now=50.0)


async def serve(statuses: list[int]) -> tuple[web.AppRunner, str, list]:
    seen: list = []

    async def post(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.Response(status=statuses[min(len(seen), len(statuses)) - 1])

    app = web.Application()
    app.router.add_post("/api/v2/alerts", post)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/api/v2/alerts", seen


@pytest.mark.parametrize(("statuses", "outcome", "posts"), [
    ([200], Delivery.SENT, 1),
    ([400], Delivery.REJECTED, 1),           # a client error is never retried
    ([404], Delivery.REJECTED, 1),
    ([503, 429, 200], Delivery.SENT, 3),
    ([500], Delivery.FAILED, 3),             # every attempt, then left for the retry timer
])
async def test_post_retries_only_retryable_answers(statuses, outcome, posts):
    runner, url, seen = await serve(statuses)
    try:
        body = signatures.alerts(sig(), "new", now=NOW)
        assert await alerting.post_alerts(url, body, attempts=3, backoff=0.01) is outcome
        assert len(seen) == posts and seen[0] == body  # the v2 array itself
    finally:
        await runner.cleanup()


async def test_unreachable_receiver_fails_and_throttled_receiver_is_not_called():
    runner, url, seen = await serve([200])
    try:
        limiter = alerting.Limiter(rate=0.0, burst=1)
        assert await alerting.post_alerts(url, [], limiter=limiter) is Delivery.SENT
        assert await alerting.post_alerts(url, [], limiter=limiter) is Delivery.THROTTLED
        assert len(seen) == 1
    finally:
        await runner.cleanup()
    assert await alerting.post_alerts(url, [], attempts=2, backoff=0.01) is Delivery.FAILED


def test_open_signatures_are_resent_until_fixed():
    # The key sent last, while the bug is open: new, triaged (people know, it still fires)
    # and regressed.
    for state in ("new", "triaged", "regressed"):
        assert signatures.resend_key({"state": state}, {"alertKey": "new"}) == "new"
    assert signatures.resend_key({"state": "new"}, {}) is None  # never sent: the retry's
    assert signatures.resend_key({"state": "fixed"}, {"alertKey": "new"}) is None
    # Fixed, resolved, then regressed: the old key stays resolved until the new one is sent.
    reopened = {"alertKey": "new", "resolvedKey": "new", "regressions": 1}
    assert signatures.resend_key({"state": "regressed"}, reopened) is None
    assert signatures.due_alert({"state": "regressed"}, reopened) == "regressed-1"
    assert signatures.resend_key({"state": "regressed"}, {**reopened, "alertKey": "regressed-1"}) == "regressed-1"


def test_a_firing_alert_ends_a_few_resend_intervals_ahead_not_a_week():
    hold = signatures.DEFAULT_HOLD
    assert hold == timedelta(minutes=4)  # 4 x the 60 s default: below a week, above a missed send
    (alert,) = signatures.alerts(sig(), "new", now=NOW, hold=timedelta(seconds=40))
    assert alert["endsAt"] == "2026-11-29T12:00:40Z"


def test_resent_and_resolving_alerts_keep_the_labels_first_sent():
    s = sig(firstSeen="2026-11-29T10:00:00Z")
    (first,) = signatures.alerts(s, "new", now=NOW)
    assert "culprit_op" not in first["labels"]
    # Recorded with the key (notify.maybe_alert), then a bisection fills in the culprit and
    # someone edits the teams: the alert must stay the same alert for Alertmanager.
    s["status"]["alertLabels"] = signatures.alert_labels(s, "new")
    s["spec"].update(culpritOp="dot", teams=["xla-gpu"])
    (again,) = signatures.alerts(s, "new", now=NOW)
    (resolved,) = signatures.alerts(s, "new", now=NOW, resolved=True)
    assert again["labels"] == resolved["labels"] == first["labels"]
    assert again["annotations"]["summary"].endswith("in dot")  # annotations follow the spec
    # A new key (a regression) is a new alert: labels from the spec as it is now.
    (regressed,) = signatures.alerts(s, "regressed-1", now=NOW)
    assert regressed["labels"]["culprit_op"] == "dot" and regressed["labels"]["team"] == "xla-gpu"


@pytest.mark.parametrize(("url", "receiver"), [
    ("https://hooks.slack.com/services/T000/B000/XXXX", "Slack webhook"),
    ("https://events.pagerduty.com/v2/enqueue", "PagerDuty webhook"),
    ("https://chat.googleapis.com/v1/spaces/AAA/messages?key=k", "Google Chat webhook"),
])
def test_a_chat_webhook_where_an_alertmanager_belongs_is_named(url, receiver):
    """The operator speaks Alertmanager's API only; a Slack or PagerDuty URL would refuse
    every alert, so it is refused at once with the receiver to use instead."""
    problem = alerting.url_problem(url)
    assert problem is not None and receiver in problem
    assert "Alertmanager receiver" in problem
    assert alerting.url_problem("http://alertmanager.monitoring:9093/api/v2/alerts") is None


def test_a_secret_may_name_every_instance_of_an_ha_alertmanager():
    assert alerting.webhook_urls(" http://am-0:9093/api/v2/alerts,http://am-1:9093/api/v2/alerts\n"
                                 "http://am-2:9093/api/v2/alerts ") == [
        "http://am-0:9093/api/v2/alerts", "http://am-1:9093/api/v2/alerts",
        "http://am-2:9093/api/v2/alerts"]
    assert alerting.urls_problem(["http://am-0/x", "ftp://am-1/x"]) == "'ftp://am-1/x' is not an http(s) URL"
    assert alerting.urls_problem([]) is not None
    F, S, R, T = Delivery.FAILED, Delivery.SENT, Delivery.REJECTED, Delivery.THROTTLED
    assert [alerting.combined(o) for o in ([S, S], [S, F], [R, S], [R, R], [T, S])] == [S, F, S, R, T]


async def test_every_alertmanager_instance_gets_each_alert():
    runners, urls, seen = [], [], []
    for statuses in ([200], [200], [503, 200]):
        runner, url, got = await serve(statuses)
        runners.append(runner), urls.append(url), seen.append(got)
    try:
        body = signatures.alerts(sig(), "new", now=NOW)
        assert await alerting.post_to_all(urls, body, attempts=2, backoff=0.01) is Delivery.SENT
        assert [len(s) for s in seen] == [1, 1, 2] and all(s[-1] == body for s in seen)
    finally:
        for r in runners:
            await r.cleanup()


async def test_an_open_bug_keeps_firing_after_the_campaigns_that_found_it_are_deleted():
    import base64

    from xla_sentinel_operator import notify
    from xla_sentinel_operator.config import Config, MetricsConfig
    from xla_sentinel_operator.runtime import Runtime

    runner_a, url_a, seen_a = await serve([200])
    runner_b, url_b, seen_b = await serve([200])

    class Secrets:
        """The one API read of a re-send: the webhook Secret (no cluster here)."""

        async def get(self, url_path, shape=None):
            assert url_path.endswith("/secrets/am")
            value = base64.b64encode(f"{url_a},{url_b}".encode()).decode()
            return {"metadata": {"name": "am"}, "data": {"url": value}}

    rt = Runtime(Config(metrics=MetricsConfig(port=None)))
    rt.kube = Secrets()  # type: ignore[assignment]
    try:
        # Its campaigns are gone (nightly, pruned by Argo CD): no campaign routes it; the
        # route its last alert took does.
        opened = sig(alertKey="new", campaigns=["nightly-1206"],
                     alertRoute={"secretName": "am", "secretKey": "url"})
        assert await notify.resend(rt, [opened], campaigns={}) == 2
        assert len(seen_a) == len(seen_b) == 1
        assert seen_a[0][0]["labels"]["signature"] == "00000000000000aa"
        # Without the remembered route (a signature alerted by an older operator) it cannot.
        assert await notify.resend(rt, [sig(alertKey="new", campaigns=["nightly-1206"])], campaigns={}) == 0
    finally:
        await runner_a.cleanup()
        await runner_b.cleanup()
