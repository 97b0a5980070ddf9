"""Deleting with the operator stopped (uninstalled, scaled to zero, crash-looping): no
FuzzCampaign, BugSignature or namespace waits on it. The operator puts no finalizer on
anything (no kopf timer, daemon or mandatory on.delete handler), removes the one older
versions left, and the garbage collector removes a campaign's children by owner reference.
The real API server, garbage collector and namespace controller."""

from __future__ import annotations

from .conftest import API, campaign, create, eventually
from .workers import Worker, finding

SIG = "0123456789abcdef"
FC, SIGS, REPORTS = f"{API}/fuzzcampaigns", f"{API}/bugsignatures", f"{API}/workerreports"
OLD_FINALIZER = "xlasentinel.dev/cleanup"  # what earlier versions put on every object


def worker_jobs(api, ns: str) -> list[dict]:
    return api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "worker"})


async def served_campaign_and_signature(api, ns, client, start_operator, worker_kubeconfig,
                                        **spec):
    """A campaign and a signature the operator has handled every way it does (reconciled,
    rolled up, ingested, alerted), then the operator stopped."""
    op = await start_operator()
    fc = await create(client, campaign(ns, workers=1, **spec))
    await eventually(lambda: worker_jobs(api, ns))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(SIG, 1))
    await eventually(lambda: (api.get(FC, ns, "nightly").get("status") or {}).get("findingsTotal") == 1)
    await eventually(lambda: ((api.get(SIGS, ns, f"sig-{SIG}") or {}).get("status") or {})
                     .get("alertKey") == "new")
    await op.stop()


async def test_campaign_and_signature_deleted_with_the_operator_stopped_go_at_once(
        api, ns, client, start_operator, worker_kubeconfig):
    await served_campaign_and_signature(api, ns, client, start_operator, worker_kubeconfig)
    for kind, name in ((FC, "nightly"), (SIGS, f"sig-{SIG}")):
        assert not api.get(kind, ns, name)["metadata"].get("finalizers"), kind

    assert api.delete(FC, ns, "nightly") == 200
    assert api.delete(SIGS, ns, f"sig-{SIG}") == 200
    await eventually(lambda: api.get(FC, ns, "nightly") is None and api.get(SIGS, ns, f"sig-{SIG}") is None)
    # Its Jobs and reports name it as owner: the garbage collector takes them.
    await eventually(lambda: api.all("batch/v1/jobs", ns) == [] and api.all(REPORTS, ns) == [])


async def test_a_namespace_with_campaigns_and_signatures_goes_with_the_operator_stopped(
        api, ns, client, start_operator, worker_kubeconfig):
    # Waiting in a Kueue queue (its Job suspended), no bisector: no pod. The namespace
    # controller deletes pods first, and here a Pending pod of a running Job stayed, Failed,
    # with the Job controller's tracking finalizer once its namespace was terminating (no
    # kubelet runs it): not this operator's doing, nor its to change.
    await served_campaign_and_signature(api, ns, client, start_operator, worker_kubeconfig,
                                        queueName="cpu-queue", bisect={"enabled": False})
    assert api.all("batch/v1/jobs", ns) and api.all(REPORTS, ns) and api.all("v1/pods", ns) == []
    assert api.delete("v1/namespaces", None, ns) == 200
    # The namespace controller deletes everything in it, then the namespace.
    await eventually(lambda: api.get("v1/namespaces", None, ns) is None, timeout=180, interval=1)


async def test_the_finalizer_of_an_older_version_is_removed(api, ns, client, start_operator):
    for obj in (campaign(ns, workers=1),
                {"apiVersion": API, "kind": "BugSignature",
                 "metadata": {"name": f"sig-{SIG}", "namespace": ns},
                 "spec": {"signature": SIG, "verdict": "crash", "state": "triaged"}}):
        obj["metadata"]["finalizers"] = [OLD_FINALIZER]
        await create(client, obj)
    op = await start_operator()
    await eventually(lambda: not api.get(FC, ns, "nightly")["metadata"].get("finalizers")
                     and not api.get(SIGS, ns, f"sig-{SIG}")["metadata"].get("finalizers"))
    await op.stop()
    api.delete(FC, ns, "nightly")
    api.delete(SIGS, ns, f"sig-{SIG}")
    await eventually(lambda: api.get(FC, ns, "nightly") is None and api.get(SIGS, ns, f"sig-{SIG}") is None)
