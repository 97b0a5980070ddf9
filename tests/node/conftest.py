"""Fixtures for the end-to-end tests on the real node (tests/controlplane/node.py): one
control plane and one real node per session (kubelet, kube-scheduler and containerd running
the images `make images` built), shared by every test here.

A kernel feature the node needs and this machine lacks skips these tests, naming it
(NodeUnsupported); a missing build (`make control-plane`, `make node-deps`, `make images`)
fails them, since a skip would hide an image or a node that never ran.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane, ControlPlaneError
from controlplane.kit import Api
from controlplane.node import NodeUnsupported, RealNode, built_images

UID = 10001  # the images' USER and the chart's runAsUser
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}


@pytest.fixture(scope="session")
def images() -> dict[str, dict[str, Any]]:
    try:
        return built_images()
    except ControlPlaneError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(tmp_path_factory.mktemp("controlplane")).start()
    yield cp
    cp.stop()


@pytest.fixture(scope="session")
def node(control_plane: ControlPlane, images: dict[str, dict[str, Any]],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    n = RealNode(control_plane, [Path(r["archive"]) for r in images.values()],
                 root=tmp_path_factory.mktemp("node"))
    try:
        n.start()
    except NodeUnsupported as e:
        pytest.skip(f"no real node on this machine: {e}")
    yield n
    n.stop()


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> Api:
    return Api(control_plane)


@pytest.fixture
def restricted_ns(api: Api, node: RealNode) -> Iterator[str]:
    """A fresh namespace that enforces Pod Security `restricted` (the API server's own
    PodSecurity admission)."""
    name = f"n-{uuid.uuid4().hex[:8]}"
    api.create("v1/namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": name, "labels": RESTRICTED}})
    wait_for(lambda: api.get("v1/serviceaccounts", name, "default"), 60, "default ServiceAccount")
    yield name
    api.delete("v1/namespaces", None, name)


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout:.0f} s; last: {last!r}")


def restricted_pod(name: str, image: str, command: list[str], **container: Any) -> dict[str, Any]:
    """A pod the `restricted` profile admits, as the chart's pods are: non-root uid 10001,
    no privilege escalation, no capabilities, RuntimeDefault seccomp, read-only root."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "main", "image": image, "imagePullPolicy": "IfNotPresent",
                                     "command": command,
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "readOnlyRootFilesystem": True,
                                                         "capabilities": {"drop": ["ALL"]}},
                                     **container}]}}


def terminated(api: Api, ns: str, name: str, timeout: float = 180) -> dict[str, Any]:
    """The pod's container's `terminated` state, once the kubelet reports it."""
    def state() -> dict[str, Any] | None:
        pod = api.get("v1/pods", ns, name) or {}
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return statuses[0]["state"].get("terminated") if statuses else None
    return wait_for(state, timeout, f"pod {ns}/{name} terminated")
