"""The real node itself: kubelet registers it, runs the runner image through containerd as
the chart runs pods (uid 10001, read-only root), reports exit codes, refuses what Pod
Security `restricted` refuses, and the kernel OOM-kills a container over its memory limit."""

from __future__ import annotations

from typing import Any

from controlplane.cluster import VERSION
from controlplane.kit import Api
from controlplane.node import RealNode

from .conftest import UID, restricted_pod, terminated


def test_node_registers_ready_with_kubelet_and_containerd_of_the_build(api: Api, node: RealNode
                                                                        ) -> None:
    info = api.get("v1/nodes", None, node.name)["status"]["nodeInfo"]
    assert info["kubeletVersion"] == VERSION  # the k8s.io/kubernetes module of the API server
    assert info["containerRuntimeVersion"].startswith("containerd://1.7.")


def test_pod_runs_the_runner_image_as_10001_on_a_read_only_root_and_its_exit_code_is_seen(
        api: Api, restricted_ns: str, images: dict[str, dict[str, Any]]) -> None:
    # Exit 0 would hide a check that was never reached: each failure has its own code, and
    # success is 42, which only the last line returns.
    script = (
        "import os, sys\n"
        f"sys.exit(3) if (os.getuid(), os.getgid()) != ({UID}, {UID}) else None\n"
        "try:\n    open('/written', 'w')\nexcept OSError as e:\n"
        "    sys.exit(42 if e.errno == 30 else 4)\n"  # EROFS
        "sys.exit(5)\n")
    pod = restricted_pod("probe", images["runner-cpu"]["ref"], ["python3", "-c", script])
    api.create("v1/pods", restricted_ns, pod)
    state = terminated(api, restricted_ns, "probe")
    assert state["exitCode"] == 42, state
    assert api.get("v1/pods", restricted_ns, "probe")["spec"]["nodeName"] == "node-real"


def test_restricted_namespace_refuses_a_pod_that_runs_as_root(
        api: Api, restricted_ns: str, images: dict[str, dict[str, Any]]) -> None:
    pod = restricted_pod("root", images["runner-cpu"]["ref"], ["true"])
    pod["spec"]["securityContext"] = {"runAsUser": 0}
    code, answer = api.request("POST", f"/api/v1/namespaces/{restricted_ns}/pods", pod)
    assert code == 403, answer
    assert 'violates PodSecurity "restricted:latest"' in answer["message"]
    assert "runAsNonRoot" in answer["message"]


def test_container_over_its_memory_limit_is_oom_killed_by_the_kernel(
        api: Api, restricted_ns: str, images: dict[str, dict[str, Any]]) -> None:
    # 256 MiB of touched pages against a 64 MiB limit: the memory cgroup's OOM killer, not
    # Python's MemoryError (no rlimit), ends it with SIGKILL.
    script = "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
    pod = restricted_pod("hog", images["runner-cpu"]["ref"], ["python3", "-c", script],
                         resources={"requests": {"memory": "64Mi"}, "limits": {"memory": "64Mi"}})
    api.create("v1/pods", restricted_ns, pod)
    state = terminated(api, restricted_ns, "hog")
    assert state["exitCode"] == 137, state
    assert state["reason"] == "OOMKilled", state
