"""Findings from simulated workers become BugSignatures: one alert per new signature
(Event, metric, webhook), counts without alerts for known ones, a second alert on regression."""

from __future__ import annotations

import base64

import aiohttp
from xla_sentinel_operator.kube import path

from .conftest import API, NS, Receiver, campaign, create, eventually
from .workers import Worker, finding

SIG = "0123456789abcdef"
SIGS = f"{API}/bugsignatures"


async def webhook_campaign(client, receiver_url: str, **spec) -> dict:
    await create(client, {"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": "alert-hook", "namespace": NS},
                          "data": {"url": base64.b64encode(receiver_url.encode()).decode()}})
    return await create(client, campaign(workers=2, alerts={
        "teams": ["xla-cpu"], "webhookSecretRef": {"name": "alert-hook"}}, **spec))


def sig_status(api) -> dict:
    """The signature's status; empty until it exists and has one (no KeyError while polling)."""
    return (api.get(SIGS, NS, f"sig-{SIG}") or {}).get("status") or {}


def events(api, kind: str) -> list[dict]:
    return [e for e in api.all("v1/events", NS) if e.get("involvedObject", {}).get("kind") == kind]


async def test_new_finding_creates_signature_event_metric_and_one_webhook(api, client, start_operator, receiver):
    op = await start_operator()
    fc = await webhook_campaign(client, receiver.url)
    w = await Worker(str(api.url), fc, "main-0").start()
    await w.find(finding(SIG, 1, op="reduce"))

    sig = await eventually(lambda: api.get(SIGS, NS, f"sig-{SIG}"))
    assert sig["spec"]["verdict"] == "mismatch" and sig["spec"]["culpritOp"] == "reduce"
    assert sig["spec"]["state"] == "new" and sig["spec"]["teams"] == ["xla-cpu"]
    assert sig["spec"]["repro"].startswith("/artifacts/nightly/main-0/findings/")
    (post,) = await eventually(lambda: receiver.posts)
    assert post["version"] == "4" and post["status"] == "firing"
    (alert,) = post["alerts"]
    assert alert["labels"]["signature"] == SIG and alert["labels"]["reason"] == "new"
    assert alert["labels"]["team"] == "xla-cpu"
    assert (await eventually(lambda: events(api, "BugSignature")))[0]["type"] == "Warning"
    campaign_event = (await eventually(lambda: events(api, "FuzzCampaign")))[0]
    assert campaign_event["reason"] == "NewBugSignature" and SIG in campaign_event["message"]
    await eventually(lambda: api.get(f"{API}/fuzzcampaigns", NS, "nightly").get("status", {}).get("lastAlertTime"))
    async with aiohttp.ClientSession() as http:
        text = await (await http.get(f"http://127.0.0.1:{op.runtime.metrics_port}/metrics")).text()
        health = await http.get(f"http://127.0.0.1:{op.runtime.metrics_port}/healthz")
    assert f'xlasentinel_bug_signatures_total{{namespace="{NS}",reason="new",verdict="mismatch"}} 1.0' in text
    assert 'xlasentinel_alerts_sent_total{reason="new"} 1.0' in text
    assert health.status == 200


async def test_seen_signature_counts_up_without_a_second_alert(api, client, start_operator, receiver):
    await start_operator()
    fc = await webhook_campaign(client, receiver.url)
    w0 = await Worker(str(api.url), fc, "main-0").start()
    w1 = await Worker(str(api.url), fc, "main-1").start()
    await w0.find(finding(SIG, 1))
    await eventually(lambda: receiver.posts)
    await w0.find(finding(SIG, 1))  # the same finding again: nothing new
    await w1.find(finding(SIG, 2), finding(SIG, 3))

    sig = await eventually(lambda: (s := api.get(SIGS, NS, f"sig-{SIG}") or {}).get("status", {}).get("count") == 3 and s)
    assert sig["status"]["hits"] == {"nightly/main-0": 1, "nightly/main-1": 2}
    assert sig["status"]["campaigns"] == ["nightly"]
    await eventually(lambda: api.get(f"{API}/fuzzcampaigns", NS, "nightly").get("status", {}).get("findingsTotal") == 3)
    assert len(receiver.posts) == 1
    assert len(events(api, "BugSignature")) == 1


async def test_killed_worker_pod_loses_no_finding(api, client, start_operator):
    await start_operator()
    fc = await create(client, campaign(workers=1))
    first = await Worker(str(api.url), fc, "main-0").start()
    await first.find(finding(SIG, 1), finding(SIG, 2))
    await first.progress(7)
    # The pod dies here; the Job starts a new pod for the same index, which replays the
    # same shard from its start, so it finds 1 and 2 again before anything new.
    second = await Worker(str(api.url), fc, "main-0").start()
    await second.find(finding(SIG, 1), finding(SIG, 2), finding(SIG, 3))
    await second.progress(3)

    st = await eventually(lambda: (s := api.get(f"{API}/fuzzcampaigns", NS, "nightly").get("status", {}))
                          .get("findingsTotal") == 3 and s)
    assert st["programs"] == 7  # the replay's 3 programs are not new work
    assert st["workerSummary"][0]["attempts"] == 2
    await eventually(lambda: sig_status(api).get("count") == 3)


async def test_fixed_signature_seen_again_regresses_and_alerts_again(api, client, start_operator, receiver):
    await start_operator()
    fc = await webhook_campaign(client, receiver.url)
    w = await Worker(str(api.url), fc, "main-0").start()
    await w.find(finding(SIG, 1))
    await eventually(lambda: len(receiver.posts) == 1)

    await client.patch(path(API, "bugsignatures", NS, f"sig-{SIG}"), {"spec": {"state": "fixed"}})
    await eventually(lambda: sig_status(api).get("fixedAtCount") == 1)
    await w.find(finding(SIG, 2))

    await eventually(lambda: len(receiver.posts) == 2)
    sig = api.get(SIGS, NS, f"sig-{SIG}")
    assert sig["spec"]["state"] == "regressed"
    assert sig["status"]["regressions"] == 1 and sig["status"]["alertKey"] == "regressed-1"
    assert receiver.posts[1]["alerts"][0]["labels"]["reason"] == "regressed"
    await w.find(finding(SIG, 3))  # still regressed: counted, not re-alerted
    await eventually(lambda: sig_status(api)["count"] == 3)
    assert len(receiver.posts) == 2


async def test_webhook_failures_are_retried_with_backoff_and_deliver_once(api, client, start_operator):
    flaky = await Receiver(fail_first=4).start()  # 3 attempts per try: the first try fails
    try:
        await start_operator()
        fc = await webhook_campaign(client, flaky.url)
        w = await Worker(str(api.url), fc, "main-0").start()
        await w.find(finding(SIG, 1))
        await eventually(lambda: flaky.posts)
        await eventually(lambda: sig_status(api).get("alertKey") == "new")
        assert flaky.attempts == 5  # 3 refused + 1 refused on the timer's retry + 1 delivered
        assert len(flaky.posts) == 1
    finally:
        await flaky.close()


async def test_a_report_that_failed_to_ingest_is_caught_up_later(api, client, start_operator):
    await start_operator()
    fc = await create(client, campaign(workers=1))
    api.fail("POST", "bugsignatures", times=1)  # the report event's ingestion fails mid-way
    w = await Worker(str(api.url), fc, "main-0").start()
    await w.find(finding(SIG, 1))

    sig = await eventually(lambda: api.get(SIGS, NS, f"sig-{SIG}"))
    await eventually(lambda: sig_status(api).get("count") == 1)
    assert sig["spec"]["verdict"] == "mismatch"
    assert not api._failures[("POST", "bugsignatures")]  # the outage did happen
