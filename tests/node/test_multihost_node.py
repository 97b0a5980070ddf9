"""A 2-host CPU campaign as one JobSet on the real node (docs/spmd.md, "In the cluster"):
two pods of the runner image, 2 virtual devices each, host 0's pod running the campaign
and host 1's serving it over TCP, jax.distributed's coordinator and gloo's collectives
between the two pods' own network namespaces, host 0 reached at JobSet's headless Service
name through the node's CoreDNS. The JobSet is the operator's rendering
(desired.worker_jobs), run by JobSet's real controller (tests/controlplane/jobset.py) and
the control plane's Job controller; its FuzzCampaign exists (owner of the JobSet and the
report) but no operator runs: the WorkerReport is read as the worker wrote it.

NetworkPolicy: tests/node/test_networkpolicy_node.py runs this module's JobSet under the
chart's policies with kube-router enforcing them."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane.cluster import ControlPlane
from controlplane.jobset import JobSetController
from controlplane.kit import Api, apply, kubectl
from controlplane.node import RealNode
from xla_sentinel.cluster.report import writer_name
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, jobsets

from .conftest import wait_for

API = "xlasentinel.dev/v1alpha1"
CRDS = Path(__file__).resolve().parents[2] / "crds"
JOBSETS = f"{jobsets.API_VERSION}/{jobsets.PLURAL}"


def spec(programs: int) -> dict[str, Any]:
    # Every program partitioned over the 4 devices (2 hosts x 2): each runs on the group.
    return {"workers": 1, "seed": 35, "targets": [{"name": "default"}], "references": ["f64_numpy"],
            "generator": {"devices": 4, "sharded": 1.0},
            "accelerator": {"type": "cpu", "hosts": 2}, "budget": {"programs": programs},
            "bisect": {"enabled": False},
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "3Gi"}}}


@pytest.fixture
def slice_ns(control_plane: ControlPlane, api: Api, restricted_ns: str) -> Iterator[str]:
    """The namespace with JobSet's controller, the CRDs, and the worker's RBAC."""
    apply(control_plane, [doc for f in ("fuzzcampaign.yaml", "workerreport.yaml")
                          for doc in yaml.safe_load_all((CRDS / f).read_text()) if doc])
    for crd in ("fuzzcampaigns", "workerreports"):
        wait_for(lambda c=crd: kubectl(control_plane, "wait", "--for=condition=Established",
                                       f"crd/{c}.xlasentinel.dev", "--timeout=5s").returncode == 0,
                 60, f"CRD {crd}")
    apply(control_plane, [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "worker", "namespace": restricted_ns},
         "rules": [{"apiGroups": ["xlasentinel.dev"], "resources": ["workerreports"],
                    "verbs": ["get", "list", "create", "update", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "worker", "namespace": restricted_ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "worker"},
         "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": restricted_ns}]}])
    controller = JobSetController(control_plane, [restricted_ns]).start()
    try:
        yield restricted_ns
    finally:
        controller.stop()


def start_campaign(api: Api, ns: str, image: str, name: str, programs: int) -> tuple[dict[str, Any], str]:
    """The FuzzCampaign object and its one JobSet, as the operator renders it."""
    body = {"apiVersion": API, "kind": "FuzzCampaign", "metadata": {"name": name}, "spec": spec(programs)}
    made = api.create(f"{API}/fuzzcampaigns", ns, body)
    c = desired.Campaign(name=name, namespace=ns, uid=made["metadata"]["uid"], spec=parse_spec(spec(programs)))
    (js,) = desired.worker_jobs(c, default_image=image, service_account="default")
    api.create(JOBSETS, ns, js)
    return js, js["metadata"]["name"]


def host_pods(api: Api, ns: str, name: str) -> dict[int, dict[str, Any]]:
    pods = api.all("v1/pods", ns, {"jobset.sigs.k8s.io/jobset-name": name})
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return {int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]): p for p in live}


def jobset_condition(api: Api, ns: str, name: str) -> str | None:
    js = api.get(JOBSETS, ns, name) or {}
    for cond in (js.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond["type"] in ("Completed", "Failed"):
            return str(cond["type"])
    return None


def status_restarts(api: Api, ns: str, name: str) -> int:
    return int(((api.get(JOBSETS, ns, name) or {}).get("status") or {}).get("restarts") or 0)


def reports(api: Api, ns: str) -> dict[str, dict[str, Any]]:
    out = {}
    for r in api.all(f"{API}/workerreports", ns):
        report = r["spec"]["report"]
        out[r["metadata"]["name"]] = json.loads(report) if isinstance(report, str) else report
    return out


def logs(cp: ControlPlane, ns: str, pod: str) -> str:
    done = kubectl(cp, "logs", "-n", ns, pod)
    return done.stdout + done.stderr


def diagnose(cp: ControlPlane, api: Api, ns: str, name: str) -> str:
    lines = [json.dumps((api.get(JOBSETS, ns, name) or {}).get("status"))]
    events = kubectl(cp, "get", "events", "-n", ns, "-o", "custom-columns=OBJ:.involvedObject.name,REASON:.reason,MSG:.message")
    lines.append(events.stdout[-4000:])
    for p in api.all("v1/pods", ns):
        st = (p["status"].get("containerStatuses") or [{}])[0]
        lines.append(f"pod {p['metadata']['name']} {p['status'].get('phase')} {json.dumps(st.get('state'))[:600]}")
    for h, p in sorted(host_pods(api, ns, name).items()):
        lines.append(f"--- host {h} {p['metadata']['name']} {p['status'].get('phase')}:\n"
                     + logs(cp, ns, p["metadata"]["name"])[-3000:])
    return "\n".join(lines)


@pytest.mark.timeout(900)  # the JobSet's own wait (420 s) and its diagnosis, not the default 600 s
def test_a_two_host_campaign_runs_as_one_jobset_of_two_pods_and_host_0_reports_once(
        control_plane: ControlPlane, api: Api, node: RealNode, slice_ns: str,
        images: dict[str, dict[str, Any]]) -> None:
    programs = 4
    _, name = start_campaign(api, slice_ns, images["runner-cpu"]["ref"], "mh", programs)
    try:
        done = wait_for(lambda: jobset_condition(api, slice_ns, name) or (status_restarts(api, slice_ns, name) and "restarted"),
                        420, f"JobSet {name} finished", interval=2)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnose(control_plane, api, slice_ns, name)}") from None
    pods = host_pods(api, slice_ns, name)
    assert done == "Completed", diagnose(control_plane, api, slice_ns, name)
    assert sorted(pods) == [0, 1]
    # Two pods, two network namespaces: the group's traffic crossed the bridge.
    assert pods[0]["status"]["podIP"] != pods[1]["status"]["podIP"]
    host1 = logs(control_plane, slice_ns, pods[1]["metadata"]["name"])
    assert "host 1/2: jax.distributed up" in host1 and "4 devices" in host1, host1[-2000:]
    assert f"{jobsets.hostnames(name, 2)[0]}:8483" in host1, host1[-2000:]  # host 0 by its DNS name
    # One report, host 0's, with every program: hosts 1..N-1 write none.
    got = reports(api, slice_ns)
    assert list(got) == [writer_name(pods[0]["metadata"]["name"])], got.keys()
    (report,) = got.values()
    assert report["programs"] == programs and report["attempts"] == 1, report
    # Every program ran on the group too: a group that never formed would be hangs.
    verdicts = {s.get("verdict") for s in report["signatures"].values()}
    assert "hang" not in verdicts, report["signatures"]
    api.delete(f"{API}/fuzzcampaigns", slice_ns, "mh")


@pytest.mark.timeout(2000)  # two attempts of the slice, each up to the waits below
def test_a_killed_host_restarts_the_slice_and_nothing_is_lost_or_doubled(
        control_plane: ControlPlane, api: Api, node: RealNode, slice_ns: str,
        images: dict[str, dict[str, Any]]) -> None:
    programs = 16
    _, name = start_campaign(api, slice_ns, images["runner-cpu"]["ref"], "mh-kill", programs)

    def serving() -> dict[str, Any] | None:
        """Host 1's pod once its host process has joined the group and programs ran."""
        pods = host_pods(api, slice_ns, name)
        done = [r for r in reports(api, slice_ns).values() if r["programs"] >= 2]
        if 1 not in pods or not done:
            return None
        statuses = pods[1]["status"].get("containerStatuses") or []
        return pods[1] if statuses and statuses[0].get("containerID") else None

    try:
        victim = wait_for(serving, 600, "host 1 serving and 2 programs reported", interval=1)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnose(control_plane, api, slice_ns, name)}") from None
    container = victim["status"]["containerStatuses"][0]["containerID"]
    os.kill(node.container_pid(container), signal.SIGKILL)  # the whole container goes

    def restarted() -> int:
        js = api.get(JOBSETS, slice_ns, name) or {}
        return int((js.get("status") or {}).get("restarts") or 0)

    try:
        wait_for(restarted, 300, "JobSet restarting the slice")
        done = wait_for(lambda: jobset_condition(api, slice_ns, name), 900, f"JobSet {name} finished", interval=2)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnose(control_plane, api, slice_ns, name)}") from None
    assert done == "Completed", diagnose(control_plane, api, slice_ns, name)
    assert restarted() == 1
    pods = host_pods(api, slice_ns, name)
    assert all(p["metadata"]["labels"][jobsets.RESTART_LABEL] == "1" for p in pods.values())
    mine = {k: v for k, v in reports(api, slice_ns).items() if "mh-kill" in k}
    (report,) = mine.values()
    # Both attempts wrote the one report; the replay counted by maximum, not summed.
    assert report["attempts"] == 2 and report["programs"] == programs, report
    assert "hang" not in {s.get("verdict") for s in report["signatures"].values()}, report["signatures"]
    api.delete(f"{API}/fuzzcampaigns", slice_ns, "mh-kill")
