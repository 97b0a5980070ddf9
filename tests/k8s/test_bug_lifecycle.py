"""The bug lifecycle on the real API server with the real operator: a fix marked with the
version that fixes it (regression only on that version or later), the fix verification
Job and its result, and bisector results that refine a signature or reopen a fixed one.
Job results are written as the worker ServiceAccount, exactly as the Jobs' pods write them,
under the name of the Job they come from; a worker's forged result under its own name is
refused (ResultRefused) and changes nothing."""

from __future__ import annotations

import asyncio

from xla_sentinel.cluster.report import CAMPAIGN_LABEL, label_value, result_object
from xla_sentinel.cluster.reporter import write_result
from xla_sentinel_operator.desired import ROLE_LABEL, SIGNATURE_LABEL
from xla_sentinel_operator.followups import RESULT_WRITERS
from xla_sentinel_operator.kube import path

from .conftest import API, campaign, create, eventually
from .test_signatures import events, webhook_campaign
from .workers import Worker, finding, reports_api

SIG = "0123456789abcdef"
REFINED = "fedcba9876543210"
SIGS = f"{API}/bugsignatures"


def sig_of(api, ns: str, signature: str = SIG) -> dict:
    return api.get(SIGS, ns, f"sig-{signature}") or {}


async def worker_on(kubeconfig, fc: dict, worker: str, jaxlib: str) -> Worker:
    w = Worker(kubeconfig, fc, worker)
    w.reporter.versions = {"jax": jaxlib, "jaxlib": jaxlib, "image": f"runner:{jaxlib}"}
    return await w.start()


def result_job(api, fc: dict, kind: str, key: str, signature: str) -> str:
    """The Job a result comes from, as the operator labels it (a suspended stand-in: its pod
    is this test); the result object must carry its name (followups.result_problem)."""
    meta = fc["metadata"]
    role = RESULT_WRITERS[kind][0]
    name = f"{meta['name']}-{role}-{key}".lower()
    if api.get("batch/v1/jobs", meta["namespace"], name) is None:
        api.create("batch/v1/jobs", meta["namespace"], {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {CAMPAIGN_LABEL: meta["name"], ROLE_LABEL: role,
                                                  SIGNATURE_LABEL: label_value(signature)}},
            "spec": {"suspend": True, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "runner", "image": "runner:test"}]}}}})
    return name


async def post_result(api, kubeconfig, fc: dict, kind: str, key: str, result: dict,
                      name: str | None = None) -> None:
    """Write a result as the Job's pod does: under its Job's name (that of a stand-in Job
    unless `name` is given)."""
    meta = fc["metadata"]
    name = name or result_job(api, fc, kind, key, result[RESULT_WRITERS[kind][1]])
    obj = result_object(namespace=meta["namespace"], campaign=meta["name"],
                        campaign_uid=meta["uid"], kind=kind, key=key, result=result, name=name)
    await asyncio.to_thread(write_result, reports_api(kubeconfig), obj)


async def test_fixed_in_a_version_regresses_only_from_that_version_and_is_verified(
        api, ns, client, start_operator, receiver, worker_kubeconfig):
    await start_operator()
    fc = await webhook_campaign(client, ns, receiver.url)
    old = await worker_on(worker_kubeconfig, fc, "main-0", "0.10.2")
    await old.find(finding(SIG, 1))
    await eventually(lambda: len(receiver.posts) == 1)
    assert sig_of(api, ns)["status"]["seenOn"][0]["jaxlib"] == "0.10.2"

    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"),
                       {"spec": {"state": "fixed", "fixedIn": "0.10.3"}})
    # Marking it fixed runs its repro on the campaign's image: a verification Job.
    (job,) = await eventually(lambda: api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "verifier"}))
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["worker", "--verify"] and args[-2:] == ["--fixed-in", "0.10.3"]
    await eventually(lambda: len(receiver.posts) == 2)  # the resolved alert

    await old.find(finding(SIG, 2))  # still on 0.10.2: the fix has not reached it
    await eventually(lambda: sig_of(api, ns)["status"]["count"] == 2)
    new = await worker_on(worker_kubeconfig, fc, "main-1", "0.10.3")
    await asyncio.sleep(1.0)
    assert sig_of(api, ns)["spec"]["state"] == "fixed" and len(receiver.posts) == 2
    await new.find(finding(SIG, 3))  # on the fixing version: a regression
    await eventually(lambda: len(receiver.posts) == 3)
    sig = sig_of(api, ns)
    # Recorded in status; the spec stays people's (or their GitOps tool's).
    assert sig["spec"]["state"] == "fixed" and sig["status"]["state"] == "regressed"
    assert sig["status"]["regressedGeneration"] == sig["metadata"]["generation"]
    assert sig["status"]["regressions"] == 1
    (alert,) = receiver.posts[2]
    assert alert["labels"]["reason"] == "regressed"
    assert alert["annotations"]["seen_on"] == "0.10.2,0.10.3"

    # The verification Job's pod reports the repro still failing on the new image.
    await post_result(api, worker_kubeconfig, fc, "verification", SIG, name=job["metadata"]["name"], result={
        "signature": SIG, "result": "still-failing", "exitCode": 1, "image": "runner:0.10.3",
        "fixedIn": "0.10.3", "evidence": "max rel error 0.5", "versions": {"jaxlib": "0.10.3"}})
    verification = await eventually(lambda: sig_of(api, ns)["status"].get("verification"))
    assert verification["result"] == "still-failing" and verification["evidence"] == "max rel error 0.5"
    assert [e for e in events(api, ns, "BugSignature") if e["reason"] == "FixNotVerified"]


async def test_a_bisection_refines_its_signature_and_a_recurring_bug_reopens_it(
        api, ns, client, start_operator, receiver, worker_kubeconfig):
    await start_operator()
    fc = await webhook_campaign(client, ns, receiver.url)
    w = await worker_on(worker_kubeconfig, fc, "main-0", "0.10.2")
    await w.find(finding(SIG, 1, op="add"))
    await eventually(lambda: len(receiver.posts) == 1)
    localized = {"candidate": SIG, "signature": REFINED, "status": "localized",
                 "culprit_op": "reduce", "fusion_kind": "kLoop", "culprit_pass": "algsimp",
                 "reduced_ops": 3, "original_ops": 21, "repro": "/artifacts/nightly/main-0/b/repro",
                 "versions": {"jaxlib": "0.10.2"}, "job": "nightly-bisect-1"}
    await post_result(api, worker_kubeconfig, fc, "bisection", "f1", {**localized, "finding": "f1"})

    refined = await eventually(lambda: sig_of(api, ns, REFINED).get("status", {}).get("alertKey") and
                               sig_of(api, ns, REFINED))
    assert (refined["spec"]["culpritOp"], refined["spec"]["culpritPass"]) == ("reduce", "algsimp")
    assert refined["spec"]["repro"] == "/artifacts/nightly/main-0/b/repro"
    assert refined["status"]["refinedFrom"] == [SIG]
    candidate = sig_of(api, ns)["status"]
    assert candidate["refinedTo"] == REFINED and candidate["bisection"]["reducedOps"] == 3
    (alert,) = receiver.posts[1]  # the refined bug's alert carries what the bisector found
    assert alert["labels"]["signature"] == REFINED and alert["labels"]["culprit_op"] == "reduce"
    assert (alert["annotations"]["culprit_pass"], alert["annotations"]["reduced_ops"]) == ("algsimp", "3")

    await client.patch(path(API, "bugsignatures", ns, f"sig-{REFINED}"),
                       {"spec": {"state": "fixed", "fixedIn": "0.10.3"}})
    await eventually(lambda: sig_of(api, ns, REFINED).get("status", {}).get("fixedAt"))
    # The same bug found again, from another finding, on 0.10.4: the signature reopens.
    await post_result(api, worker_kubeconfig, fc, "bisection", "f2",
                      {**localized, "finding": "f2", "versions": {"jaxlib": "0.10.4"}})
    # One write, of the status subresource (followups._count_refined): the spec is not the
    # operator's to write.
    reopened = await eventually(lambda: (s := sig_of(api, ns, REFINED))["status"].get("state") == "regressed"
                                and s)
    assert reopened["spec"]["state"] == "fixed"
    assert reopened["status"]["regressions"] == 1 and reopened["status"]["count"] == 2
    assert len(api.all(SIGS, ns)) == 2  # no second copy of the bug
    await eventually(lambda: receiver.posts[-1][0]["labels"]["reason"] == "regressed")


async def test_a_bisection_that_confirms_its_signature_fills_in_the_culprit(
        api, ns, client, start_operator, worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(SIG, 1, op=None))
    await eventually(lambda: sig_of(api, ns).get("status", {}).get("count") == 1)
    await post_result(api, worker_kubeconfig, fc, "bisection", "f1", {
        "candidate": SIG, "signature": SIG, "finding": "f1", "status": "localized",
        "culprit_op": "dot", "fusion_kind": "kCustom", "culprit_pass": "xla_cpu_use_fusion_emitters",
        "repro": "/artifacts/nightly/main-0/f1/repro"})
    sig = await eventually(lambda: sig_of(api, ns)["spec"].get("culpritOp") and sig_of(api, ns))
    assert (sig["spec"]["culpritOp"], sig["spec"]["fusionKind"]) == ("dot", "kCustom")
    assert sig["spec"]["culpritPass"] == "xla_cpu_use_fusion_emitters"
    assert sig["status"]["bisection"]["status"] == "localized" and "refinedTo" not in sig["status"]


async def test_a_new_runner_image_is_checked_against_the_fixed_signatures(
        api, ns, client, start_operator, worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=1, image="runner:1"))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(SIG, 1))
    await eventually(lambda: sig_of(api, ns).get("status", {}).get("count") == 1)
    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"),
                       {"spec": {"state": "fixed", "fixedIn": "0.10.3"}})

    def verifier_images() -> list[str]:
        return sorted(j["spec"]["template"]["spec"]["containers"][0]["image"]
                      for j in api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "verifier"}))

    await eventually(lambda: verifier_images() == ["runner:1"])
    await client.patch(path(API, "fuzzcampaigns", ns, "nightly"), {"spec": {"image": "runner:2"}})
    await eventually(lambda: verifier_images() == ["runner:1", "runner:2"])


async def test_a_result_not_from_its_job_is_refused_and_changes_nothing(
        api, ns, client, start_operator, receiver, worker_kubeconfig):
    await start_operator()
    fc = await webhook_campaign(client, ns, receiver.url)
    w = await worker_on(worker_kubeconfig, fc, "main-0", "0.10.2")
    await w.find(finding(SIG, 1))
    await eventually(lambda: len(receiver.posts) == 1)
    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"),
                       {"spec": {"state": "fixed", "fixedIn": "0.10.3"}})
    (job,) = await eventually(lambda: api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "verifier"}))
    verified = {"signature": SIG, "result": "verified", "exitCode": 0, "image": "runner:test",
                "fixedIn": "0.10.3", "evidence": "", "versions": {"jaxlib": "0.10.3"}}
    # A worker marks the fix verified under its own report's name (all the admission policy
    # lets it write), then under a worker Job's: no verifier Job of that name, refused.
    await post_result(api, worker_kubeconfig, fc, "verification", "forged", verified,
                      name="nightly-main-0123456789-0")
    forged = (await eventually(lambda: [e for e in events(api, ns, "FuzzCampaign")
                                        if e["reason"] == "ResultRefused"]))[0]
    assert "no Job of that name" in forged["message"]
    # Nor does a bisector's result for another signature pass as this one's verification.
    other = result_job(api, fc, "bisection", "b1", REFINED)
    await post_result(api, worker_kubeconfig, fc, "verification", "b1", verified, name=other)
    await eventually(lambda: any("is no verifier" in e["message"] for e in events(api, ns, "FuzzCampaign")
                                 if e["reason"] == "ResultRefused"))
    await asyncio.sleep(1.0)
    assert "verification" not in sig_of(api, ns)["status"]
    # The operator's own verifier Job's result is taken.
    await post_result(api, worker_kubeconfig, fc, "verification", SIG, verified,
                      name=job["metadata"]["name"])
    assert (await eventually(lambda: sig_of(api, ns)["status"].get("verification")))["result"] == "verified"
