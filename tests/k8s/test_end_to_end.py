"""The whole loop on the real control plane, as a user meets it: `kubectl apply` a campaign ->
the operator's Indexed Job -> the Job controller's pod -> the fake node runs `xla-sentinel
worker` (the real engine, jax compiles, an injected miscompile) in the pod's environment and
identity -> worker reports -> status -> BugSignatures -> alerts in a real Alertmanager; the
same findings again raise no second alert. And the faults a cluster brings: a worker pod
evicted mid-shard (DisruptionTarget) does not complete its index and its work resumes."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from controlplane.kit import kubectl
from xla_sentinel.xla.faults import fault_path

from .alertmanager import Alertmanager
from .conftest import ALERT_SECRET, API, eventually

SPEC = {"seed": 3, "workers": 1, "generator": {"version": 1, "minOps": 3, "maxOps": 12, "dtypes": ["f32"]},
        "targets": [{"name": "default"}, {"name": "O0"}],
        "references": ["f64_eager", "f64_jit", "eager"], "budget": {"programs": 8},
        "injectPasses": [fault_path("fusion_bf16_rounding")],
        # Bisector pods would need the worker's findings on shared storage (a PVC or a
        # bucket); with the default emptyDir they cannot see them, so this loop leaves them off.
        "bisect": {"enabled": False},
        "alerts": {"teams": ["xla-cpu"], "webhookSecretRef": {"name": ALERT_SECRET}}}


@pytest.fixture
def alertmanager() -> Iterator[Alertmanager]:
    am = Alertmanager()
    yield am
    am.stop()


def apply_campaign(control_plane, ns: str, name: str, spec: dict) -> None:
    manifest = {"apiVersion": API, "kind": "FuzzCampaign",
                "metadata": {"name": name, "namespace": ns}, "spec": spec}
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert done.returncode == 0, done.stderr


def status(api, ns: str, name: str) -> dict:
    return (api.get(f"{API}/fuzzcampaigns", ns, name) or {}).get("status") or {}


def summary_of(node, campaign: str) -> dict:
    """The shard's summary.json, from the pod's artifacts volume on the fake node."""
    (path,) = Path(node.root).glob(f"*/volumes/artifacts/{campaign}/main-0/summary.json")
    return json.loads(path.read_text())


async def test_applied_campaign_runs_the_engine_in_a_pod_and_alerts_once_per_bug(
        control_plane, api, ns, start_operator, node, alertmanager):
    fake = node()
    op = await start_operator()
    api.create("v1/secrets", ns, {"apiVersion": "v1", "kind": "Secret",
                                  "metadata": {"name": ALERT_SECRET},
                                  "data": {"url": base64.b64encode(
                                      alertmanager.alerts_url.encode()).decode()}})
    apply_campaign(control_plane, ns, "e2e", SPEC)

    st = await eventually(lambda: status(api, ns, "e2e").get("phase") == "Completed"
                          and status(api, ns, "e2e"), timeout=400, interval=1)
    # The shard is done: its pod exits 0 (the summary is written just before).
    await eventually(lambda: [p["status"].get("phase") for p in api.all(
        "v1/pods", ns, {"xlasentinel.dev/role": "worker"})] == ["Succeeded"], timeout=120)
    summary = summary_of(fake, "e2e")
    total = sum(summary["findings"].values())
    assert total >= 1  # the injected miscompile was found, in a pod
    st = await eventually(lambda: (s := status(api, ns, "e2e")).get("findingsTotal") == total and s)
    assert st["programs"] == summary["programs"] == 8
    assert st["findings"] == summary["findings"]
    assert st["signatures"] == len(summary["signatures"])
    wanted = {s["id"] for s in summary["signatures"]}
    sigs = await eventually(lambda: len(s := api.all(f"{API}/bugsignatures", ns)) == len(wanted)
                            and sum(x.get("status", {}).get("count", 0) for x in s) == total and s)
    assert {x["spec"]["signature"] for x in sigs} == wanted
    assert {x["spec"]["versions"]["jaxlib"] for x in sigs} == {summary["jaxlib_version"]}

    def firing() -> list[dict]:
        return [a for a in alertmanager.alerts() if a["labels"].get("namespace") == ns]

    alerts = await eventually(lambda: len(firing()) == len(wanted) and firing())
    assert {a["labels"]["signature"] for a in alerts} == wanted
    assert {a["labels"]["reason"] for a in alerts} == {"new"}
    assert all(a["labels"]["team"] == "xla-cpu" for a in alerts)
    sent = op.runtime.metrics.alerts_sent.labels("new")._value.get()

    # The same campaign again (same seed): the same bugs, counted, and not alerted again.
    apply_campaign(control_plane, ns, "e2e-again", SPEC)
    await eventually(lambda: status(api, ns, "e2e-again").get("phase") == "Completed",
                     timeout=400, interval=1)
    await eventually(lambda: sum(x.get("status", {}).get("count", 0)
                                 for x in api.all(f"{API}/bugsignatures", ns)) == 2 * total)
    assert len(api.all(f"{API}/bugsignatures", ns)) == len(wanted)
    assert op.runtime.metrics.alerts_sent.labels("new")._value.get() == sent
    assert len(firing()) == len(wanted)


async def test_an_evicted_worker_does_not_complete_its_index_and_resumes(
        control_plane, api, ns, start_operator, node):
    node()
    await start_operator()
    spec = {**SPEC, "budget": {"continuous": True}, "alerts": {"teams": []}}
    spec.pop("injectPasses")
    apply_campaign(control_plane, ns, "long", spec)

    def running_pod() -> dict | None:
        pods = [p for p in api.all("v1/pods", ns, {"xlasentinel.dev/role": "worker"})
                if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
        return pods[0] if pods else None

    first = await eventually(running_pod, timeout=60)
    # Let the engine start and report, then evict the pod as a node drain or a preemption would.
    await eventually(lambda: status(api, ns, "long").get("workers", {}).get("reporting") == 1,
                     timeout=120, interval=0.5)
    code, answer = api.request(
        "POST", f"/api/v1/namespaces/{ns}/pods/{first['metadata']['name']}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction",
         "metadata": {"name": first["metadata"]["name"], "namespace": ns}})
    assert code == 201, answer

    # A new pod for the same index: the evicted one neither completed nor failed the index.
    second = await eventually(lambda: (p := running_pod()) and p["metadata"]["uid"] != first["metadata"]["uid"] and p,
                              timeout=120, interval=0.5)
    assert second["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    (job,) = api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "worker"})
    assert not job["status"].get("completedIndexes") and not job["status"].get("failedIndexes")
    assert not job["status"].get("failed")  # DisruptionTarget: ignored by the podFailurePolicy
    report = await eventually(
        lambda: (w := status(api, ns, "long").get("workerSummary")) and w[0]["attempts"] == 2 and w[0],
        timeout=120, interval=0.5)
    assert report["worker"] == "main-0"
    assert status(api, ns, "long")["phase"] == "Running"
