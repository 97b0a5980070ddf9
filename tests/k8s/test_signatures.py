"""Findings from workers (the real reporter, as the chart's worker ServiceAccount) become
BugSignatures on the real API server: one alert per new signature (Event, metric, webhook in
Alertmanager's v2 form), counts without alerts for known ones, a second alert on regression,
a resolved alert when fixed, retries that deliver once, and ingestion that catches up."""

from __future__ import annotations

import asyncio
import base64

import aiohttp
from controlplane.kit import RELEASE
from xla_sentinel.cluster.reporter import K8sReporter
from xla_sentinel_operator.kube import path

from .conftest import API, Receiver, campaign, create, eventually
from .workers import Worker, finding, reports_api

SIG = "0123456789abcdef"
SIGS = f"{API}/bugsignatures"


async def webhook_campaign(client, ns: str, receiver_url: str, **spec) -> dict:
    await create(client, {"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": "alert-hook", "namespace": ns},
                          "data": {"url": base64.b64encode(receiver_url.encode()).decode()}})
    return await create(client, campaign(ns, workers=2, alerts={
        "teams": ["xla-cpu"], "webhookSecretRef": {"name": "alert-hook"}}, **spec))


def sig_status(api, ns: str) -> dict:
    """The signature's status; empty until it exists and has one (no KeyError while polling)."""
    return (api.get(SIGS, ns, f"sig-{SIG}") or {}).get("status") or {}


def events(api, ns: str, kind: str) -> list[dict]:
    return [e for e in api.all("v1/events", ns) if e.get("involvedObject", {}).get("kind") == kind]


async def test_new_finding_creates_signature_event_metric_and_one_alert(api, ns, client, start_operator,
                                                                        receiver, worker_kubeconfig):
    op = await start_operator()
    fc = await webhook_campaign(client, ns, receiver.url)
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(SIG, 1, op="reduce"))

    sig = await eventually(lambda: api.get(SIGS, ns, f"sig-{SIG}"))
    assert sig["spec"]["verdict"] == "mismatch" and sig["spec"]["culpritOp"] == "reduce"
    assert sig["spec"]["state"] == "new" and sig["spec"]["teams"] == ["xla-cpu"]
    assert sig["spec"]["repro"].startswith("/artifacts/nightly/main-0/findings/")
    (post,) = await eventually(lambda: receiver.posts)
    (alert,) = post  # Alertmanager's v2 API takes an array of alerts
    assert alert["labels"]["signature"] == SIG and alert["labels"]["reason"] == "new"
    assert alert["labels"]["team"] == "xla-cpu"
    assert alert["startsAt"] and alert["endsAt"] > alert["startsAt"]
    assert (await eventually(lambda: events(api, ns, "BugSignature")))[0]["type"] == "Warning"
    campaign_event = (await eventually(lambda: events(api, ns, "FuzzCampaign")))[0]
    assert campaign_event["reason"] == "NewBugSignature" and SIG in campaign_event["message"]
    await eventually(lambda: api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status", {}).get("lastAlertTime"))
    async with aiohttp.ClientSession() as http:
        text = await (await http.get(f"http://127.0.0.1:{op.runtime.metrics_port}/metrics")).text()

        async def healthy() -> bool:
            # 503 until the first heartbeat has reached the API (a probe's initial delay).
            return (await http.get(f"http://127.0.0.1:{op.runtime.metrics_port}/healthz")).status == 200

        await eventually(healthy)
    assert f'xlasentinel_bug_signatures_total{{namespace="{ns}",reason="new",verdict="mismatch"}} 1.0' in text
    assert 'xlasentinel_alerts_sent_total{reason="new"} 1.0' in text


async def test_seen_signature_counts_up_without_a_second_alert(api, ns, client, start_operator,
                                                               receiver, worker_kubeconfig):
    await start_operator()
    fc = await webhook_campaign(client, ns, receiver.url)
    w0 = await Worker(worker_kubeconfig, fc, "main-0").start()
    w1 = await Worker(worker_kubeconfig, fc, "main-1").start()
    await w0.find(finding(SIG, 1))
    await eventually(lambda: receiver.posts)
    await w0.find(finding(SIG, 1))  # the same finding again: nothing new
    await w1.find(finding(SIG, 2), finding(SIG, 3))

    sig = await eventually(lambda: (s := api.get(SIGS, ns, f"sig-{SIG}") or {}).get("status", {}).get("count") == 3 and s)
    assert sig["status"]["hits"] == {"nightly/main-0": 1, "nightly/main-1": 2}
    assert sig["status"]["campaigns"] == ["nightly"]
    await eventually(lambda: api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status", {}).get("findingsTotal") == 3)
    assert len(receiver.posts) == 1
    assert len(events(api, ns, "BugSignature")) == 1


async def test_restarted_worker_pod_loses_no_finding_and_counts_nothing_twice(
        api, ns, client, start_operator, worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))
    first = await Worker(worker_kubeconfig, fc, "main-0").start()
    await first.find(finding(SIG, 1), finding(SIG, 2))
    await first.progress(7)
    # The pod dies here; the Job starts a new pod for the same index, which replays the
    # same shard from its start, so it finds 1 and 2 again before anything new.
    second = await Worker(worker_kubeconfig, fc, "main-0").start()
    await second.find(finding(SIG, 1), finding(SIG, 2), finding(SIG, 3))
    await second.progress(3)

    st = await eventually(lambda: (s := api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status", {}))
                          .get("findingsTotal") == 3 and s)
    assert st["programs"] == 7  # the replay's 3 programs are not new work
    assert st["workerSummary"][0]["attempts"] == 2
    await eventually(lambda: sig_status(api, ns).get("count") == 3)


async def test_fixed_signature_resolves_then_regresses_and_alerts_again(
        api, ns, client, start_operator, receiver, worker_kubeconfig):
    await start_operator()
    fc = await webhook_campaign(client, ns, receiver.url)
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(SIG, 1))
    await eventually(lambda: len(receiver.posts) == 1)

    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"), {"spec": {"state": "fixed"}})
    await eventually(lambda: sig_status(api, ns).get("fixedAt"))
    (resolved,) = (await eventually(lambda: len(receiver.posts) == 2 and receiver.posts))[1]
    (firing,) = receiver.posts[0]
    assert resolved["labels"] == firing["labels"]  # the same alert, now ended
    assert resolved["endsAt"] < firing["endsAt"]
    await w.find(finding(SIG, 2))

    await eventually(lambda: len(receiver.posts) == 3)
    sig = api.get(SIGS, ns, f"sig-{SIG}")
    assert sig["spec"]["state"] == "fixed" and sig["status"]["state"] == "regressed"
    assert sig["status"]["regressions"] == 1 and sig["status"]["alertKey"] == "regressed-1"
    assert receiver.posts[2][0]["labels"]["reason"] == "regressed"
    await w.find(finding(SIG, 3))  # still regressed: counted, not re-alerted
    await eventually(lambda: sig_status(api, ns)["count"] == 3)
    assert len(receiver.posts) == 3
    # People answer the regression with a new fixedIn: fixed again, the alert resolved.
    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"), {"spec": {"fixedIn": "0.10.9"}})
    await eventually(lambda: sig_status(api, ns).get("fixedAt") and "state" not in sig_status(api, ns))
    await eventually(lambda: len(receiver.posts) == 4)
    assert receiver.posts[3][0]["labels"] == receiver.posts[2][0]["labels"]  # resolved


async def test_webhook_failures_are_retried_with_backoff_and_deliver_once(
        api, ns, client, start_operator, worker_kubeconfig):
    flaky = await Receiver(fail_first=4).start()  # 3 attempts per try: the first try fails
    try:
        await start_operator()
        fc = await webhook_campaign(client, ns, flaky.url)
        w = await Worker(worker_kubeconfig, fc, "main-0").start()
        await w.find(finding(SIG, 1))
        await eventually(lambda: flaky.posts)
        await eventually(lambda: sig_status(api, ns).get("alertKey") == "new")
        assert flaky.attempts == 5  # 3 refused + 1 refused on the timer's retry + 1 delivered
        assert len(flaky.posts) == 1
    finally:
        await flaky.close()


async def test_a_report_that_failed_to_ingest_is_caught_up_later(api, ns, client, start_operator,
                                                                 worker_kubeconfig):
    """The operator's RBAC loses `create` on BugSignatures for a while (a bad chart upgrade):
    the API server refuses with 403, and once the Role is right again the operator catches up
    on the report it failed to ingest."""
    role = api.get("rbac.authorization.k8s.io/v1/roles", ns, f"{RELEASE}-xla-sentinel-operator")
    rules = role["rules"]
    crippled = [{**r, "verbs": [v for v in r["verbs"] if v != "create"]}
                if "bugsignatures" in r.get("resources", []) else r for r in rules]
    api.patch("rbac.authorization.k8s.io/v1/roles", ns, role["metadata"]["name"], {"rules": crippled})
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(SIG, 1))
    await eventually(lambda: status_of(api, ns).get("findingsTotal") == 1)
    assert api.get(SIGS, ns, f"sig-{SIG}") is None  # refused: the outage did happen

    api.patch("rbac.authorization.k8s.io/v1/roles", ns, role["metadata"]["name"], {"rules": rules})
    sig = await eventually(lambda: api.get(SIGS, ns, f"sig-{SIG}"), timeout=60)
    await eventually(lambda: sig_status(api, ns).get("count") == 1)
    assert sig["spec"]["verdict"] == "mismatch"


def status_of(api, ns: str) -> dict:
    return (api.get(f"{API}/fuzzcampaigns", ns, "nightly") or {}).get("status") or {}


async def test_a_new_revision_counts_afresh_and_totals_add_up(api, ns, client, start_operator,
                                                              worker_kubeconfig):
    """After a spec change the same worker reports into a new object (keyed by revision):
    its re-found findings count again (so a fixed bug can regress on a new image) and the
    campaign's totals add both revisions up, each counted once."""
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))

    def reporter(rev: str) -> K8sReporter:
        return K8sReporter(reports_api(worker_kubeconfig), namespace=ns, campaign="nightly",
                           campaign_uid=fc["metadata"]["uid"], worker="main-0", revision=rev,
                           progress_interval=0.0)

    old, new = reporter("rev1"), reporter("rev2")
    for r, n in ((old, 2), (new, 3)):
        await asyncio.to_thread(r.start)
        for i in range(n):
            await asyncio.to_thread(r.finding, finding(SIG, i))
        await asyncio.to_thread(r.progress, {"programs": 10 * n, "executions": 0, "elapsed_s": 1.0})
    again = reporter("rev1")  # a restarted pod of the old revision replays its findings
    await asyncio.to_thread(again.start)
    for i in range(2):
        await asyncio.to_thread(again.finding, finding(SIG, i))

    names = sorted(o["metadata"]["name"] for o in api.all(f"{API}/workerreports", ns))
    assert names == ["nightly-report-rev1-main-0", "nightly-report-rev2-main-0"]
    sig = await eventually(lambda: sig_status(api, ns).get("count") == 5 and sig_status(api, ns))
    assert sig["hits"] == {"nightly/rev1/main-0": 2, "nightly/rev2/main-0": 3}
    st = await eventually(lambda: status_of(api, ns).get("programs") == 50 and status_of(api, ns))
    assert st["findingsTotal"] == 5 and st["signatures"] == 1
    assert [(w["revision"], w["findings"]) for w in st["workerSummary"]] == [("rev1", 2), ("rev2", 3)]
