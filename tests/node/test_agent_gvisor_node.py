"""The agent pod under gVisor on the real node (issue 37; docs/agents.md "The sandbox
container"): the pod of tests/node/test_agent_sandbox_node.py, built with the chart's value
`agents.runtimeClassName=gvisor`, run by the real kubelet and containerd through gVisor's
containerd shim and runsc (`make gvisor`): the RuntimeClass `gvisor`, handler `runsc`, that
RealNode.runtime_class creates, as a GKE Sandbox node pool has it. Every other pod of the
suite runs on runc.

The runtime container's script is that test's, plus one more run handed to the sandbox
container: what kernel agent code sees there. The same substitutions (an emptyDir for the
artifacts PVC, 100m CPU requests) for what this node lacks; and one for the gVisor node:
runsc shares unix sockets through the host (`host-uds`, RealNode._runsc_runtime) where GKE
gives the pod's emptyDirs as gVisor-internal shared mounts.

What gVisor changes, as the sandbox server finds it: runsc loads no OCI seccomp profile
(RuntimeDefault is ignored without its oci-seccomp flag) and its kernel grants the sandbox
user (uid 10002, no capability) a user namespace, so the server confines each run with the
local sandbox's `unshare` mode instead of runc's seccomp filter: its own user, network,
mount and PID namespaces under a root of its own, inside gVisor's kernel."""

from __future__ import annotations

import base64
import json
import os
import uuid
from typing import Any

import pytest
from controlplane.cluster import ControlPlane, ControlPlaneError
from controlplane.kit import Api
from controlplane.node import API_SERVICE_IP, GVISOR_RUNTIME_CLASS, NodeUnsupported, RealNode
from xla_sentinel.agents.sandbox_exchange import SOCKET_ENV
from xla_sentinel_operator import agents

from .conftest import wait_for
from .test_agent_sandbox_node import KEY_ENV, MARKER, RUNTIME, SLEEP_LIMIT_S, _agent_pod, completed

# What agent code reports of its kernel in the sandbox container: the release, the kernel
# log (gVisor's own, made up by its Sentry), the network interfaces and its uid map.
KERNEL_PROBE = """\
import json, os, subprocess
log = subprocess.run(["dmesg"], capture_output=True, text=True)
with open("/proc/net/dev") as f:
    interfaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
with open("/proc/self/uid_map") as f:
    uid_map = " ".join(f.read().split())
print(json.dumps({"release": os.uname().release, "dmesg": log.stdout.splitlines()[:1],
                  "interfaces": interfaces, "uid_map": uid_map}))
"""
_PRINT = 'print("RESULT " + json.dumps(out), flush=True)\n'
_SLEEP = '["sleep", "600"]'
assert RUNTIME.endswith(_PRINT) and _SLEEP in RUNTIME
# The sleeping run names /bin/sleep: the unshare mode execs its command without a PATH
# search (agents/sandbox.py main: os.execve), so a bare "sleep" is not found there.
RUNTIME_GVISOR = RUNTIME.replace(_SLEEP, '["/bin/sleep", "600"]').removesuffix(_PRINT) + f"""\
out["release"] = os.uname().release
out["kernel"] = request(Path(sandbox.tool), [sys.executable, "-c", {KERNEL_PROBE!r}], work, seconds=60)
""" + _PRINT
SHIM_OOM = "failed to set OOM Score on shim"  # gVisor's shim, where root may not lower it


@pytest.fixture(scope="module")
def gvisor(node: RealNode) -> str:
    """The RuntimeClass `gvisor` on the node; a missing `make gvisor` fails the test, as a
    missing build fails the node's others."""
    try:
        return node.runtime_class()
    except ControlPlaneError as e:
        pytest.fail(str(e), pytrace=False)


def _shim_refused(api: Api, ns: str, name: str) -> str:
    """The kubelet's event saying gVisor's shim did not start for lack of CAP_SYS_RESOURCE
    (the stock shim sets its own oom_score_adj to -999 and gives up where the write is
    refused, as it is to this VM's root), or ''."""
    for event in api.all("v1/events", ns):
        message = event.get("message", "")
        if (event["involvedObject"].get("name") == name and SHIM_OOM in message
                and "permission denied" in message):
            return str(message)
    return ""


def test_agent_code_runs_on_gvisors_kernel_in_namespaces_of_its_own(
        api: Api, control_plane: ControlPlane, node: RealNode, restricted_ns: str, gvisor: str,
        images: dict[str, dict[str, Any]]) -> None:
    name = f"agent-{uuid.uuid4().hex[:6]}"
    key = f"sk-{uuid.uuid4().hex}"
    api.create("v1/secrets", restricted_ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key"},
                                             "data": {"api-key": base64.b64encode(key.encode()).decode()}})
    pod = _agent_pod(images["runner-cpu"]["ref"], name, "model-key",
                     f"agents.runtimeClassName={GVISOR_RUNTIME_CLASS}", runtime_script=RUNTIME_GVISOR)
    assert pod["spec"]["runtimeClassName"] == gvisor  # the chart's value, through the operator
    api.create("v1/pods", restricted_ns, pod)

    def finished() -> dict[str, Any] | str | None:
        got = api.get("v1/pods", restricted_ns, name) or {}
        if got.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return got
        return _shim_refused(api, restricted_ns, name) or None

    done = wait_for(finished, 180, f"agent pod {restricted_ns}/{name} finished", interval=1)
    if isinstance(done, str):  # a machine's limit, not the chart's: skipped as NodeUnsupported is
        pytest.skip(f"no gVisor pod on this machine: {NodeUnsupported.__name__}: this root lacks "
                    f"CAP_SYS_RESOURCE and gVisor's containerd shim then refuses to start: {done}")

    # The pod completes under gVisor as under runc (test_agent_sandbox_node.completed).
    result, runtime_log, sandbox_log, why = completed(control_plane, restricted_ns, done, key)

    # gVisor's kernel, not this machine's: both containers (one sandbox per pod) and agent
    # code in its namespaces; its kernel log is gVisor's; one interface, a loopback.
    kernel = result["kernel"]
    assert kernel["exit"] == 0, (kernel, why)
    seen_kernel = json.loads(kernel["stdout"])
    host = os.uname().release
    assert result["release"].endswith("gvisor") and result["release"] != host, result["release"]
    assert seen_kernel["release"] == result["release"], seen_kernel
    assert "Starting gVisor" in seen_kernel["dmesg"][0], seen_kernel
    assert seen_kernel["interfaces"] == ["lo"], seen_kernel
    # Its root is the sandbox user's, mapped in a user namespace of its own: uid 0 there.
    assert seen_kernel["uid_map"] == f"0 {agents.SANDBOX_UID} 1", seen_kernel

    answer = result["probe"]
    assert answer["exit"] == 0, why
    confinement = answer["confinement"]
    # The server's confinement: the local sandbox's unshare mode (runc: the seccomp filter).
    assert confinement == "unshare", (confinement, why)
    assert f"confinement: {confinement}" in sandbox_log, why
    seen = json.loads(answer["stdout"])
    # uid 0 of its user namespace (uid_map above: the sandbox user); the pod's fsGroup is
    # not mapped there, so it shows as the overflow group.
    assert (seen["uid"], seen["gid"]) == (0, 0), seen
    assert set(seen["groups"]) <= {0, 65534}, seen["groups"]
    assert seen["token"] is False, seen
    # A root of its own (a tmpfs of this run, writable), the system's and the interpreter's
    # folders read-only in it, the work folder writable, a fresh /tmp: the artifacts volume
    # and the runtime's files are not there at all.
    assert seen["root"] is True and seen["scratch"] is True and seen["work"] is True, seen
    assert seen["artifacts"] == "No such file or directory", seen
    assert seen["artifacts_file"] == "No such file or directory", seen
    assert seen["runtime_tmp"] == "No such file or directory", seen
    # Its own PID namespace: PID 1 is the run itself; no server, no runtime process.
    assert seen["pid"] == 1 and sorted(seen["processes"]) == ["1"], seen["processes"]
    assert key not in answer["stdout"] and key not in sandbox_log and MARKER not in answer["stdout"], seen
    run_env = {v.partition("=")[0] for v in seen["processes"]["1"]["environ"]}
    assert not {"KUBERNETES_SERVICE_HOST", SOCKET_ENV, KEY_ENV} & (set(seen["env"]) | run_env), seen
    # Its own network namespace, whose loopback is down: not even a route to the API server.
    print(f"\nconfinement under gVisor: {confinement}; kernel {result['release']}; API server from "
          f"the sandbox: {seen['api_server']}; groups: {seen['groups']}")
    assert seen["api_server"].startswith("OSError(101,"), seen  # ENETUNREACH
    assert result["api_host"] == API_SERVICE_IP, result

    # The run that outlives its limit: killed there under gVisor too.
    slept = result["sleep"]
    assert slept["returncode"] == -9, slept
    assert f"killed at its limit of {SLEEP_LIMIT_S + 1}" in slept["stderr"], slept
    assert slept["seconds"] < SLEEP_LIMIT_S + 15, slept
