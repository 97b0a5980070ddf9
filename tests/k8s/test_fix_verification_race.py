"""A BugSignature marked fixed before its status lists any campaign (a person or GitOps
applies it with `state: fixed`, or marks it fixed in the moment between the operator creating
it and writing its first hits): marking it fixed finds no campaign to run the verification
on, so the verification Job must start once the first campaign hits it, and exactly once,
with two peered operator replicas as the chart runs them. The real API server, the real
operator (kopf, peering), the real K8sReporter as the worker ServiceAccount."""

from __future__ import annotations

import asyncio

from xla_sentinel_operator.kube import path
from xla_sentinel_operator.signatures import verification_owed

from .conftest import API, create, eventually
from .test_bug_lifecycle import SIG, sig_of, worker_on
from .test_peering import PEERED, peers
from .test_signatures import webhook_campaign
from .workers import finding

REPRO = "/artifacts/nightly/main-0/findings/f1"


def verifiers(api, ns: str) -> list[dict]:
    return api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "verifier"})


async def test_a_signature_fixed_before_any_campaign_is_verified_once_one_hits_it(
        api, ns, client, start_operator, receiver, worker_kubeconfig):
    await start_operator(peering=PEERED)
    await eventually(lambda: len(peers(api, ns)) == 1)
    await start_operator(peering=PEERED)
    await eventually(lambda: len(peers(api, ns)) == 2)
    fc = await webhook_campaign(client, ns, receiver.url)
    await create(client, {"apiVersion": API, "kind": "BugSignature",
                          "metadata": {"name": f"sig-{SIG}", "namespace": ns},
                          "spec": {"signature": SIG, "verdict": "mismatch", "repro": REPRO,
                                   "state": "fixed", "fixedIn": "0.10.3"}})
    # The operator saw the fix (fixedAt) while no campaign was listed: nothing to run it on.
    await eventually(lambda: sig_of(api, ns).get("status", {}).get("fixedAt"))
    assert not sig_of(api, ns)["status"].get("campaigns")
    assert verifiers(api, ns) == []

    # The campaign's first hit (a runner older than the fix: counted, not a regression)
    # lists the campaign: the pending verification starts on its image.
    old = await worker_on(worker_kubeconfig, fc, "main-0", "0.10.2")
    await old.find(finding(SIG, 1))
    await eventually(lambda: sig_of(api, ns)["status"].get("campaigns") == ["nightly"])
    (job,) = await eventually(lambda: verifiers(api, ns))
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["worker", "--verify", REPRO]
    assert args[-4:] == ["--signature", SIG, "--fixed-in", "0.10.3"]

    # More hits, from this worker and another, and the fix marked again: still the one Job.
    other = await worker_on(worker_kubeconfig, fc, "main-1", "0.10.2")
    await old.find(finding(SIG, 2))
    await other.find(finding(SIG, 3))
    await eventually(lambda: sig_of(api, ns)["status"].get("count") == 3)
    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"), {"spec": {"state": "triaged"}})
    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"), {"spec": {"state": "fixed"}})
    await asyncio.sleep(2.0)
    assert [j["metadata"]["name"] for j in verifiers(api, ns)] == [job["metadata"]["name"]]
    assert sig_of(api, ns)["spec"]["state"] == "fixed"


def test_the_verification_is_owed_by_the_one_write_that_lists_a_fixed_signatures_first_campaign():
    fixed = {"state": "fixed", "repro": REPRO}
    listed = {"campaigns": ["nightly"]}
    assert verification_owed(fixed, {}, listed)
    assert verification_owed(fixed, {"campaigns": []}, listed)
    assert not verification_owed(fixed, listed, {"campaigns": ["nightly", "weekly"]})  # mark_fixed's
    assert not verification_owed({"state": "fixed"}, {}, listed)  # no bundle to run
    assert not verification_owed({"state": "triaged", "repro": REPRO}, {}, listed)
    assert not verification_owed(fixed, {}, {})
