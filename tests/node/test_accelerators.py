"""Accelerators as the real kubelet and kube-scheduler see them: the node's device plugin
(tests/controlplane/deviceplugin, the kubelet's own device-plugin stub) advertises 4
google.com/tpu and 2 nvidia.com/gpu chips, the node carries GKE's labels of a single-host
TPU v5e 2x2 pool, and here GKE's TPU taint. A pod that does not tolerate the taint stays
Pending; the operator's own TPU worker pod (rendered by xla_sentinel_operator/desired.py) is scheduled by
its nodeSelector and toleration, gets chips from the kubelet's Allocate and sees them with
the single-host slice's shape; chips are never shared, so a pod asking for more than are
left stays Pending. With the plugin run as one host of a multi-host v5e 2x4 slice, a pod's
environment says so (two hosts of 2x2 chips). When the kubelet restarts, the plugin serves and
registers again, and the new kubelet's Allocate is answered.

What is mocked: the chips. No TPU or GPU exists on this machine, so the plugin's devices are
names, their device nodes stand in as /dev/null, and the workload inside is the CPU runner
image reading its environment, not jax on a TPU. Everything that counts, places and
allocates them is the real kubelet, scheduler and containerd."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.kit import Api, kubectl
from controlplane.node import ACCELERATORS, TPU_LABELS, TPU_TAINT, RealNode
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired

from .conftest import restricted_pod, wait_for

TPU = desired.TPU_RESOURCE
# The slice's shape in a TPU container's environment (deviceplugin/main.go, tpuSlice), and
# TPU_WORKER_ID, which is the Job's to give (GKE's webhook, the operator's slice JobSet),
# never the node's.
SLICE_VARS = ("TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY", "TPU_HOST_BOUNDS",
              "TPU_CHIPS_PER_HOST_BOUNDS", "TPU_SKIP_MDS_QUERY", "TPU_WORKER_ID")
# The node's own: one host of 2x2 v5e chips is the whole slice.
SINGLE_HOST = {"TPU_ACCELERATOR_TYPE": "v5litepod-4", "TPU_TOPOLOGY": "2x2",
               "TPU_HOST_BOUNDS": "1,1,1", "TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1",
               "TPU_SKIP_MDS_QUERY": "true", "TPU_WORKER_ID": "-"}
# What the probe prints: the chips its environment names, the chip device nodes it has, and
# SLICE_VARS ('-' for one that is not set).
PROBE = ("import os, signal, stat, sys, time\n"
         "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"  # PID 1: no default action
         "devs = sorted(d for d in os.listdir('/dev') if d.startswith('accel')"
         " and stat.S_ISCHR(os.stat('/dev/' + d).st_mode))\n"
         "print('chips=' + os.environ.get('TPU_VISIBLE_CHIPS', '-'), 'devs=' + ','.join(devs),"
         f" *(v + '=' + os.environ.get(v, '-') for v in {SLICE_VARS!r}), flush=True)\n"
         "time.sleep(3600)\n")


@pytest.fixture(scope="module")
def tpu_node(api: Api, node: RealNode) -> Iterator[RealNode]:
    """The node with GKE's TPU taint, removed afterwards (the suite's other pods do not
    tolerate it)."""
    taints = api.get("v1/nodes", None, node.name)["spec"].get("taints") or []
    api.patch("v1/nodes", None, node.name, {"spec": {"taints": [*taints, TPU_TAINT]}})
    yield node
    now = api.get("v1/nodes", None, node.name)["spec"].get("taints") or []
    api.patch("v1/nodes", None, node.name,
              {"spec": {"taints": [t for t in now if t["key"] != TPU_TAINT["key"]]}})


def tpu_worker_pod(name: str, ns: str, image: str, chips: int) -> dict[str, Any]:
    """The worker pod of a single-host TPU v5e 2x2 campaign asking for `chips` chips, as
    the operator renders it (desired.worker_jobs: nodeSelector on GKE's TPU labels, the
    toleration, google.com/tpu in requests and limits, restricted security), with the
    probe as its command instead of the engine (no TPU for jax here)."""
    spec = parse_spec({"targets": [{"name": "default", "platform": "tpu"}],
                       "references": ["f64_numpy"], "workers": 1,
                       "accelerator": {"type": "tpu", "tpuAccelerator": TPU_LABELS[desired.TPU_ACCELERATOR],
                                       "tpuTopology": TPU_LABELS[desired.TPU_TOPOLOGY], "count": chips},
                       "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                     "limits": {"memory": "256Mi"}}})
    c = desired.Campaign(name=name, namespace=ns, uid="u-1", spec=spec)
    (job,) = desired.worker_jobs(c, default_image=image, service_account="default")
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {k: TPU_LABELS[k] for k in (desired.TPU_ACCELERATOR, desired.TPU_TOPOLOGY)}
    (container,) = pod["containers"]
    container.pop("args")
    container["command"] = ["python3", "-c", PROBE]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod}


def scheduled(api: Api, ns: str, name: str) -> dict[str, Any]:
    """The pod's PodScheduled condition, once the scheduler has written it."""
    def condition() -> dict[str, Any] | None:
        pod = api.get("v1/pods", ns, name) or {}
        return next((c for c in pod.get("status", {}).get("conditions") or []
                     if c["type"] == "PodScheduled"), None)
    return wait_for(condition, 60, f"pod {ns}/{name} seen by the scheduler")


def unschedulable(api: Api, ns: str, name: str) -> str:
    """The scheduler's message for a pod it cannot place; fails if it places it."""
    cond = scheduled(api, ns, name)
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
    assert api.get("v1/pods", ns, name)["status"]["phase"] == "Pending"
    return str(cond["message"])


def probe_output(cp: ControlPlane, api: Api, ns: str, name: str) -> dict[str, str]:
    """What the running probe printed: {'chips': ..., 'devs': ...}."""
    wait_for(lambda: (api.get("v1/pods", ns, name) or {}).get("status", {}).get("phase") == "Running",
             180, f"pod {ns}/{name} Running")

    def line() -> str | None:
        logs = kubectl(cp, "logs", "-n", ns, name)
        return logs.stdout.strip() if logs.returncode == 0 and "chips=" in logs.stdout else None
    text = wait_for(line, 60, f"pod {ns}/{name} printing its chips")
    return dict(part.split("=", 1) for part in text.split())


def tpu_request(pod: dict[str, Any], chips: int, tolerate: bool) -> dict[str, Any]:
    container = pod["spec"]["containers"][0]
    container["resources"] = {"requests": {TPU: str(chips)}, "limits": {TPU: str(chips)}}
    if tolerate:
        pod["spec"]["tolerations"] = [{"key": TPU, "operator": "Exists", "effect": "NoSchedule"}]
    return pod


def test_node_advertises_the_device_plugins_chips_with_gkes_tpu_labels(api: Api, node: RealNode
                                                                        ) -> None:
    n = api.get("v1/nodes", None, node.name)
    for name, count in ACCELERATORS.items():
        assert n["status"]["capacity"][name] == str(count), n["status"]["capacity"]
        assert n["status"]["allocatable"][name] == str(count), n["status"]["allocatable"]
    assert {k: n["metadata"]["labels"].get(k) for k in TPU_LABELS} == TPU_LABELS


def test_tpu_pod_without_the_toleration_stays_pending(
        api: Api, tpu_node: RealNode, restricted_ns: str, images: dict[str, dict[str, Any]]) -> None:
    pod = tpu_request(restricted_pod("untolerated", images["runner-cpu"]["ref"], ["true"]), 1,
                      tolerate=False)
    api.create("v1/pods", restricted_ns, pod)
    message = unschedulable(api, restricted_ns, "untolerated")
    assert "1 node(s) had untolerated taint" in message, message
    # The taint it does not tolerate is GKE's TPU taint, the node's only one.
    taints = api.get("v1/nodes", None, tpu_node.name)["spec"]["taints"]
    assert [{k: t.get(k) for k in TPU_TAINT} for t in taints] == [TPU_TAINT], taints


def test_operator_tpu_worker_pod_runs_with_its_chips_and_chips_are_not_shared(
        control_plane: ControlPlane, api: Api, tpu_node: RealNode, restricted_ns: str,
        images: dict[str, dict[str, Any]]) -> None:
    image = images["runner-cpu"]["ref"]
    total = ACCELERATORS[TPU]
    # The operator's worker pod takes 3 of the node's 4 chips.
    api.create("v1/pods", restricted_ns, tpu_worker_pod("worker", restricted_ns, image, total - 1))
    first = probe_output(control_plane, api, restricted_ns, "worker")
    chips = first["chips"].split(",")
    assert len(chips) == total - 1 and len(set(chips)) == total - 1, first
    assert first["devs"] == ",".join(sorted(f"accel{c}" for c in chips)), first
    assert {v: first[v] for v in SLICE_VARS} == SINGLE_HOST, first
    assert api.get("v1/pods", restricted_ns, "worker")["spec"]["nodeName"] == tpu_node.name

    # Two more chips than are left: Pending, for want of google.com/tpu.
    api.create("v1/pods", restricted_ns, tpu_worker_pod("greedy", restricted_ns, image, 2))
    message = unschedulable(api, restricted_ns, "greedy")
    assert f"Insufficient {TPU}" in message, message

    # The last chip goes to a pod of its own, and it is not one of the worker's.
    api.create("v1/pods", restricted_ns, tpu_worker_pod("last", restricted_ns, image, 1))
    last = probe_output(control_plane, api, restricted_ns, "last")
    assert len(last["chips"].split(",")) == 1 and last["chips"] not in chips, (first, last)
    assert sorted([*chips, last["chips"]]) == [str(i) for i in range(total)]
    assert api.get("v1/pods", restricted_ns, "greedy")["status"]["phase"] == "Pending"

    # Chips come back when a pod ends: the greedy pod fits once the worker is gone.
    api.request("DELETE", f"/api/v1/namespaces/{restricted_ns}/pods/worker", {"gracePeriodSeconds": 0})
    freed = probe_output(control_plane, api, restricted_ns, "greedy")
    assert len(freed["chips"].split(",")) == 2 and last["chips"] not in freed["chips"].split(","), freed


def test_device_plugin_serves_a_restarted_kubelet(
        control_plane: ControlPlane, api: Api, tpu_node: RealNode, restricted_ns: str,
        images: dict[str, dict[str, Any]]) -> None:
    # The new kubelet removes the plugin's sockets: node.restart returns once the plugin has
    # served again (the stub's Restart) and registered again, and the chips are allocatable.
    tpu_node.restart()
    # The restarted server answers the new kubelet's Allocate.
    got = _all_chips(control_plane, api, restricted_ns, "after", images)
    assert {v: got[v] for v in SLICE_VARS} == SINGLE_HOST, got


def _all_chips(control_plane: ControlPlane, api: Api, ns: str, name: str,
               images: dict[str, dict[str, Any]]) -> dict[str, str]:
    """What a pod given every chip of the node saw (the probe's output), its chips and
    device nodes checked: all of them."""
    total = ACCELERATORS[TPU]
    pod = tpu_request(restricted_pod(name, images["runner-cpu"]["ref"], ["python3", "-c", PROBE]),
                      total, tolerate=True)
    api.create("v1/pods", ns, pod)
    got = probe_output(control_plane, api, ns, name)
    assert got["chips"] == ",".join(str(i) for i in range(total)), got
    assert got["devs"] == ",".join(f"accel{i}" for i in range(total)), got
    return got


@pytest.fixture
def multi_host_node(tpu_node: RealNode) -> Iterator[RealNode]:
    """The node as one host of a multi-host TPU v5e 2x4 slice (two VMs of 2x2 chips, GKE's
    ct5lp-hightpu-4t pool of that topology): its device plugin run again with that topology,
    and afterwards with the node's own single-host 2x2 again."""
    tpu_node.restart_device_plugin(tpu_topology="2x4")
    try:
        yield tpu_node
    finally:
        tpu_node.restart_device_plugin()


def test_multi_host_slice_host_gets_the_slices_shape_at_allocate(
        control_plane: ControlPlane, api: Api, multi_host_node: RealNode, restricted_ns: str,
        images: dict[str, dict[str, Any]]) -> None:
    # A slice's host takes all of its chips, as a multi-host slice's pods must on GKE.
    got = _all_chips(control_plane, api, restricted_ns, "host", images)
    # The same host's chips (2,2,1), now one of two hosts along y: an 8-chip slice.
    assert {v: got[v] for v in SLICE_VARS} == {
        **SINGLE_HOST, "TPU_ACCELERATOR_TYPE": "v5litepod-8", "TPU_TOPOLOGY": "2x4",
        "TPU_HOST_BOUNDS": "1,2,1"}, got
    assert api.get("v1/pods", restricted_ns, "host")["spec"]["nodeName"] == multi_host_node.name
