"""What people and other programs hand the operator, broken: a webhook Secret whose URL is not
one, a worker report written by another version (or garbage), a FuzzCampaign the schema
refuses, BugSignature edits (state transitions, a fixedIn that is no version). Each gets a
clear condition or Event; nothing already found is lost; the operator keeps going."""

from __future__ import annotations

import base64
import json

import pytest
from xla_sentinel.cluster.report import WorkerReport, report_from_object
from xla_sentinel_operator.kube import path

from .conftest import ALERT_SECRET, API, campaign, create, eventually
from .workers import Worker, finding

SIG = "0123456789abcdef"
SIGS = f"{API}/bugsignatures"


def events(api, ns: str, reason: str) -> list[dict]:
    return [e for e in api.all("v1/events", ns) if e.get("reason") == reason]


def status(api, ns: str, name: str = "nightly") -> dict:
    return (api.get(f"{API}/fuzzcampaigns", ns, name) or {}).get("status") or {}


@pytest.mark.parametrize("url", ["not a url", "ftp://127.0.0.1/alerts", "http://"])
async def test_a_webhook_secret_that_is_no_url_is_named_and_findings_still_count(
        api, ns, client, start_operator, worker_kubeconfig, url):
    await start_operator()
    await create(client, {"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": ALERT_SECRET, "namespace": ns},
                          "data": {"url": base64.b64encode(url.encode()).decode()}})
    fc = await create(client, campaign(ns, workers=1, alerts={
        "teams": ["t"], "webhookSecretRef": {"name": ALERT_SECRET}}))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(SIG, 1))

    sig = await eventually(lambda: (s := api.get(SIGS, ns, f"sig-{SIG}")) and
                           (s.get("status") or {}).get("alertError") and s)
    assert f"{ALERT_SECRET}" in sig["status"]["alertError"]
    assert "URL" in sig["status"]["alertError"]
    event = (await eventually(lambda: events(api, ns, "AlertWebhookInvalid")))[0]
    assert ALERT_SECRET in event["message"]
    # The operator goes on: the next finding is counted.
    await w.find(finding(SIG, 2))
    await eventually(lambda: (api.get(SIGS, ns, f"sig-{SIG}")["status"]).get("count") == 2)
    await eventually(lambda: status(api, ns).get("findingsTotal") == 2)


def test_a_report_from_a_newer_worker_is_read_for_what_it_shares():
    newer = {"worker": "main-0", "programs": 12, "executions": 48, "elapsed_s": 3.0,
             "attempts": 1, "a_field_of_tomorrow": {"x": 1},
             "signatures": {SIG: {"verdict": "mismatch", "count": 2, "first_seen": "t",
                                  "last_seen": "t", "samples": [], "another_new_field": 1}}}
    report = report_from_object({"spec": {"report": json.dumps(newer)}})
    assert isinstance(report, WorkerReport)
    assert (report.programs, report.signatures[SIG].count) == (12, 2)


@pytest.mark.parametrize("text", ["{not json", json.dumps([1, 2]),
                                  json.dumps({"worker": "main-0", "programs": "many"}),
                                  json.dumps({"worker": "main-0", "signatures": {SIG: {"count": -3}}})])
def test_a_report_that_is_not_one_is_refused_by_the_reader(text):
    assert report_from_object({"spec": {"report": text}}) is None


async def test_an_unreadable_report_is_an_event_and_the_other_workers_still_count(
        api, ns, client, start_operator, worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=2))
    good = await Worker(worker_kubeconfig, fc, "main-0").start()
    await good.find(finding(SIG, 1))
    await good.progress(5)
    bad = await Worker(worker_kubeconfig, fc, "main-1").start()
    name = bad.reporter.name
    api.patch(f"{API}/workerreports", ns, name, {"spec": {"report": json.dumps(
        {"worker": "main-1", "programs": "many"})}})

    event = (await eventually(lambda: events(api, ns, "ReportUnreadable")))[0]
    assert name in event["message"]
    st = await eventually(lambda: status(api, ns).get("programs") == 5 and status(api, ns))
    assert st["findingsTotal"] == 1


async def test_a_campaign_the_schema_refuses_stalls_with_the_reason(api, ns, client, start_operator):
    await start_operator()
    # The CRD cannot see option names (docs/operator.md); the campaign schema can.
    await create(client, campaign(ns, targets=[{"name": "fast", "options": {"fast_math": True}}]))
    stalled = await eventually(lambda: next((c for c in status(api, ns).get("conditions", [])
                                             if c["type"] == "Stalled" and c["status"] == "True"), None))
    assert stalled["reason"] == "InvalidSpec"
    assert "spec.targets[0].options.fast_math" in stalled["message"]
    assert api.all("batch/v1/jobs", ns) == []


async def test_signature_state_edits_by_people_are_kept_and_a_bad_fixed_in_is_named(
        api, ns, client, start_operator, worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(SIG, 1))
    await eventually(lambda: api.get(SIGS, ns, f"sig-{SIG}"))
    sig_path = path(API, "bugsignatures", ns, f"sig-{SIG}")

    await client.patch(sig_path, {"spec": {"state": "triaged"}})
    await w.find(finding(SIG, 2))
    await eventually(lambda: (api.get(SIGS, ns, f"sig-{SIG}").get("status") or {}).get("count") == 2)
    assert api.get(SIGS, ns, f"sig-{SIG}")["spec"]["state"] == "triaged"  # a count is no regression

    await client.patch(sig_path, {"spec": {"state": "fixed", "fixedIn": "banana"}})
    event = (await eventually(lambda: events(api, ns, "InvalidFixedIn")))[0]
    assert "banana" in event["message"]
    await w.find(finding(SIG, 3))
    await eventually(lambda: (api.get(SIGS, ns, f"sig-{SIG}").get("status") or {}).get("count") == 3)
    code, answer = api.request("PATCH", f"/apis/{API}/namespaces/{ns}/bugsignatures/sig-{SIG}",
                               {"spec": {"state": "gone"}}, "application/merge-patch+json")
    assert code == 422 and 'Unsupported value: "gone"' in answer["message"]
