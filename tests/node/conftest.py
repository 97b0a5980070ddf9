"""Fixtures for the end-to-end tests on the real node (tests/controlplane/node.py): one
control plane and one real node (kubelet, kube-scheduler and containerd running the images
`make images` built), shared by every test here.

A kernel feature the node needs and this machine lacks skips these tests, naming it
(NodeUnsupported); a missing build (`make control-plane`, `make node-deps`, `make images`)
fails them, since a skip would hide an image or a node that never ran.

The node is one per machine (NODE_LOCK), and another pytest session on the machine (another
checkout's `make test`, a developer's run beside CI) may hold it: the wait for it happens
before the first test here starts, outside pytest-timeout's budget for that test, says whom
it waits for, and gives up after NODE_WAIT_S (XLA_SENTINEL_NODE_WAIT_S), failing the tests
here with the holder's name. The node, its control plane and the lock are package-scoped:
given back as soon as the tests here are done, not at the end of the session.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane, ControlPlaneError
from controlplane.kit import Api
from controlplane.node import NODE_LOCK, NodeBusy, NodeUnsupported, RealNode, built_images

UID = 10001  # the images' USER and the chart's runAsUser
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}
# Long enough for another session's node tests, short of hanging CI for ever on a
# `make dev-cluster` left running.
NODE_WAIT_S = float(os.environ.get("XLA_SENTINEL_NODE_WAIT_S") or 1800)
GAVE_UP = pytest.StashKey[str]()


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's wrapper: not timed
def pytest_runtest_protocol(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, object, object]:
    if (not NODE_LOCK.held and GAVE_UP not in item.config.stash
            and "node_lock" in item.fixturenames):
        capture = item.config.pluginmanager.getplugin("capturemanager")

        def say(line: str) -> None:
            with capture.global_and_fixture_disabled():  # shown now, not at the session's end
                print(f"\n{item.nodeid}: {line}", file=sys.stderr, flush=True)

        try:
            NODE_LOCK.acquire(timeout=NODE_WAIT_S, progress=say)
        except NodeBusy as e:
            item.config.stash[GAVE_UP] = str(e)
    return (yield)


@pytest.fixture(scope="package")
def node_lock(request: pytest.FixtureRequest) -> Iterator[None]:
    """The machine's node, taken by pytest_runtest_protocol before this test's timeout
    started; given back (if RealNode.stop has not) on every way out, a skip included."""
    busy = ""
    try:
        NODE_LOCK.acquire(timeout=0)
    except NodeBusy as e:
        busy = request.config.stash.get(GAVE_UP, str(e))
    if busy:  # failed outside the except: one message, not the 0 s try chained to it
        pytest.fail(busy, pytrace=False)
    yield
    NODE_LOCK.release()


@pytest.fixture(scope="session")
def images() -> dict[str, dict[str, Any]]:
    try:
        return built_images()
    except ControlPlaneError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="package")
def control_plane(node_lock: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(tmp_path_factory.mktemp("controlplane")).start()
    yield cp
    cp.stop()


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="module")
def policy_engine(node: RealNode) -> Iterator[RealNode]:
    """The node with NetworkPolicy enforced by kube-router's network policy controller, for
    the tests of one module; stopped (its iptables chains and ipsets removed) after them, so
    the other modules' pods run with no engine, as before. A missing build (`make
    policy-engine`, Debian's ipset) fails the tests that asked for it."""
    try:
        node.start_policy_engine()
    except ControlPlaneError as e:
        pytest.fail(str(e), pytrace=False)
    yield node
    node.stop_policy_engine()


@pytest.fixture(scope="package")
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
