"""The chart on the real node, as a platform engineer installs it: `helm install` with the
images `make images` built (by tag, imagePullPolicy IfNotPresent), into a namespace that
enforces Pod Security `restricted`; the operator runs as pods of the chart's Deployment
(two replicas, peering) from its image; a FuzzCampaign applied with kubectl runs its worker
in the runner image as uid 10001 on a read-only root; the worker's reports roll up into the
campaign's status. Then the faults a node brings: an operator pod deleted is replaced by its
Deployment and the campaign loop still works.

The campaign is examples/k8s-quickstart.yaml made small for a 2-core CI machine: one worker,
8 programs, requests of 100m CPU and 512Mi instead of 4 workers x (1 CPU, 2Gi) for 2000
programs, and no alert route (no Alertmanager in this namespace)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from controlplane.cluster import ControlPlane
from controlplane.kit import CHART, Api, kubectl
from controlplane.node import RealNode
from tools import REPO_ROOT, helm_path
from xla_sentinel_operator.desired import CAMPAIGN_LABEL

from .conftest import UID, wait_for

pytestmark = pytest.mark.xdist_group("real-node")
API = "xlasentinel.dev/v1alpha1"
RELEASE = "xs"
QUICKSTART = REPO_ROOT / "examples" / "k8s-quickstart.yaml"


def image_values(images: dict[str, dict[str, Any]]) -> list[str]:
    """--set flags naming the built images by registry, repository and tag."""
    sets = ["images.pullPolicy=IfNotPresent"]
    registries = set()
    for key, target in (("operator", "operator"), ("runner.cpu", "runner-cpu")):
        name, tag = images[target]["ref"].rsplit(":", 1)
        registry, repository = name.rsplit("/", 1)
        registries.add(registry)
        sets += [f"images.{key}.repository={repository}", f"images.{key}.tag={tag}"]
    assert len(registries) == 1, registries  # the chart has one registry for all images
    return [*sets, f"images.registry={registries.pop()}"]


def small_quickstart(ns: str) -> dict[str, Any]:
    """The quickstart's FuzzCampaign, sized for CI (see the module docstring)."""
    (campaign,) = [d for d in yaml.safe_load_all(QUICKSTART.read_text())
                   if d and d["kind"] == "FuzzCampaign"]
    campaign["metadata"]["namespace"] = ns
    spec = campaign["spec"]
    spec.pop("alerts")
    spec.update({"workers": 1, "budget": {"programs": 8}, "bisect": {"enabled": False},
                 "generator": {"minOps": 3, "maxOps": 8, "dtypes": ["f32"]},
                 "resources": {"requests": {"cpu": "100m", "memory": "512Mi"},
                               "limits": {"memory": "2Gi"}}})
    return campaign


def ready_operator_pods(api: Api, ns: str) -> list[dict[str, Any]]:
    pods = api.all("v1/pods", ns, {"app.kubernetes.io/component": "operator"})
    return [p for p in pods if p["metadata"].get("deletionTimestamp") is None and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])]


@pytest.fixture(scope="module")
def release(control_plane: ControlPlane, node: RealNode, api: Api,
            images: dict[str, dict[str, Any]]) -> Iterator[str]:
    """`helm install` of the chart into a fresh `restricted` namespace; both operator
    replicas Ready. Yields the namespace."""
    ns = "xs-real"
    api.create("v1/namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": ns, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    helm = [str(helm_path()), "--kubeconfig", str(control_plane.kubeconfig_path)]
    done = subprocess.run([*helm, "install", RELEASE, str(CHART), "-n", ns,
                           *[a for s in image_values(images) for a in ("--set", s)]],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    try:
        wait_for(lambda: len(ready_operator_pods(api, ns)) == 2, 300, "two Ready operator pods")
    except AssertionError as e:
        # What the operator said before it died: an image older than the chart's flags, say.
        logs = kubectl(control_plane, "logs", "-n", ns, "--previous", "--tail=5",
                       "-l", "app.kubernetes.io/component=operator")
        raise AssertionError(f"{e}\noperator pods' last words:\n{logs.stdout}{logs.stderr}") from None
    yield ns
    subprocess.run([*helm, "uninstall", RELEASE, "-n", ns], capture_output=True, timeout=300)
    api.delete("v1/namespaces", None, ns)


def test_operator_runs_as_pods_of_the_chart_from_its_image(api: Api, release: str,
                                                           images: dict[str, dict[str, Any]]
                                                           ) -> None:
    pods = ready_operator_pods(api, release)
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {images["operator"]["ref"]}
    assert {p["spec"]["containers"][0]["imagePullPolicy"] for p in pods} == {"IfNotPresent"}
    for p in pods:
        (status,) = p["status"]["containerStatuses"]
        assert status["imageID"].startswith("sha256:") or "@sha256:" in status["imageID"]
        assert status["restartCount"] == 0, status  # it started, and stayed up


def test_applied_campaign_runs_its_worker_in_the_runner_image_and_rolls_up(
        control_plane: ControlPlane, api: Api, release: str,
        images: dict[str, dict[str, Any]]) -> None:
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(small_quickstart(release)))
    assert done.returncode == 0, done.stderr

    def status() -> dict[str, Any]:
        return (api.get(f"{API}/fuzzcampaigns", release, "quickstart") or {}).get("status") or {}

    reports: set[str] = set()

    def completed() -> dict[str, Any] | None:
        reports.update(r["metadata"]["name"] for r in api.all(f"{API}/workerreports", release))
        st = status()
        return st if st.get("phase") == "Completed" else None

    st = wait_for(completed, 900, "campaign quickstart Completed", interval=1)
    assert st["programs"] == 8, st
    (worker,) = api.all("v1/pods", release, {"xlasentinel.dev/role": "worker"})
    assert worker["status"]["phase"] == "Succeeded", worker["status"]
    assert worker["spec"]["containers"][0]["image"] == images["runner-cpu"]["ref"]
    sc = worker["spec"]["securityContext"] | worker["spec"]["containers"][0].get("securityContext", {})
    assert sc.get("runAsUser") == UID and sc.get("readOnlyRootFilesystem") is True, sc
    (state,) = [s["state"]["terminated"] for s in worker["status"]["containerStatuses"]]
    assert state["exitCode"] == 0, state
    assert reports, "no WorkerReport was seen while the campaign ran"


def test_deleted_operator_pod_is_replaced_by_its_deployment(api: Api, release: str) -> None:
    before = {p["metadata"]["name"] for p in ready_operator_pods(api, release)}
    victim = sorted(before)[0]
    code, out = api.request("DELETE", f"/api/v1/namespaces/{release}/pods/{victim}")
    assert code == 200, out
    after = wait_for(lambda: len(pods := ready_operator_pods(api, release)) == 2
                     and victim not in {p["metadata"]["name"] for p in pods} and pods,
                     300, "a replacement operator pod Ready")
    assert len({p["metadata"]["name"] for p in after} - before) == 1


LONG_WORKERS = {"xlasentinel.dev/role": "worker", CAMPAIGN_LABEL: "long"}


def test_evicted_worker_gets_sigterm_exits_143_and_its_index_resumes(
        control_plane: ControlPlane, api: Api, release: str) -> None:
    campaign = small_quickstart(release)
    campaign["metadata"]["name"] = "long"
    campaign["spec"]["budget"] = {"continuous": True}
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(campaign))
    assert done.returncode == 0, done.stderr

    def status() -> dict[str, Any]:
        return (api.get(f"{API}/fuzzcampaigns", release, "long") or {}).get("status") or {}

    def running_worker() -> dict[str, Any] | None:
        pods = [p for p in api.all("v1/pods", release, LONG_WORKERS)
                if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
        return pods[0] if pods else None

    first = wait_for(running_worker, 300, "a Running worker pod of campaign long")
    wait_for(lambda: status().get("workers", {}).get("reporting") == 1, 300, "the worker reporting")
    name = first["metadata"]["name"]
    code, answer = api.request("POST", f"/api/v1/namespaces/{release}/pods/{name}/eviction",
                               {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": release}})
    assert code == 201, answer

    # kubelet stops the container with SIGTERM to its PID 1 (the worker), which exits 143.
    def terminated() -> dict[str, Any] | None:
        pod = api.get("v1/pods", release, name)
        if pod is None:
            return {"gone": True}
        statuses = pod["status"].get("containerStatuses") or []
        return statuses[0]["state"].get("terminated") if statuses else None

    state = wait_for(terminated, 120, f"evicted worker {name} terminated", interval=0.2)
    assert state.get("exitCode") == 143, state
    second = wait_for(lambda: (p := running_worker()) and p["metadata"]["uid"] != first["metadata"]["uid"]
                      and p, 300, "a new worker pod for the index")
    assert second["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    (job,) = api.all("batch/v1/jobs", release, LONG_WORKERS)
    assert not job["status"].get("completedIndexes") and not job["status"].get("failed"), job["status"]
    api.delete(f"{API}/fuzzcampaigns", release, "long")
