"""The agent pod's sandbox container (issue 37; docs/agents.md "The sandbox container") on the
real node: the pod `agents.agent_pod` builds with the chart's default sandbox settings, run
by the real kubelet and containerd from the runner image `make images` built, in a namespace
that enforces restricted Pod Security.

Only the runtime container's command is the test's: instead of `xla-sentinel agent` (which
needs a model) a script that hands agent code to the sandbox container through the real
client, as the MCP server does (`Sandbox.detect()` finds the socket the pod names; the
exchange's `request` and `Sandbox.argv`'s client process), and prints what came back. The
sandbox container is the operator's own, `xla-sentinel sandbox-server` as a native sidecar.

Two substitutions, each for what this node lacks: the artifacts PVC is an emptyDir (no
storage provisioner here; the mounts, read-only in the sandbox, are the pod's own), and the
containers request 100m CPU instead of 1 (the node is this 2-core machine; the limits are
the chart's). The model's key comes from a Secret as the operator's agent Jobs take it
(spec.agents.credentialSecretRef), so the test can look for it from the sandbox side."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime
from typing import Any

from controlplane.cluster import ControlPlane
from controlplane.kit import Api, helm_template, kubectl
from controlplane.node import API_SERVICE_IP, RealNode
from xla_sentinel.agents.sandbox_exchange import SHARED_ENV, SOCKET_ENV
from xla_sentinel.spec.campaign import AGENT_CREDENTIAL_ENV
from xla_sentinel_operator import agents, desired
from xla_sentinel_operator.bodies import EnvVar
from xla_sentinel_operator.config import SandboxConfig
from xla_sentinel_operator.main import config_from_args

from .conftest import UID, wait_for

SLEEP_LIMIT_S = 2.0  # the sleeping run's own limit; the server kills it a grace second later
KEY_ENV = AGENT_CREDENTIAL_ENV["anthropic"]
MARKER = "written by the runtime"  # in its /tmp (its OUT) and on the artifacts volume
# What agent code tries in the sandbox container: its identity, the token, the writable
# places, the API server, the runtime's files, every process it can see (their command
# lines and environments, whole: a leaked key would be in them). Printed as one JSON line.
PROBE = """\
import json, os, socket
def processes():
    seen = {}
    for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace").split("\\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().decode(errors="replace").split("\\0")
        except OSError as e:
            cmdline, environ = [], [repr(e)]
        seen[pid] = {"cmdline": cmdline[:3], "environ": [v for v in environ if v]}
    return seen
def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return e.strerror
def writable(folder):
    try:
        with open(os.path.join(folder, "probe-written"), "w") as f:
            f.write("x")
        return True
    except OSError as e:
        return e.strerror
def api_server():
    try:
        socket.create_connection((os.environ["API_HOST"], int(os.environ["API_PORT"])), timeout=5).close()
        return "connected"
    except OSError as e:
        return repr(e)
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
                  "token": os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount"),
                  "root": writable("/"), "artifacts": writable("/artifacts"), "scratch": writable("/tmp"),
                  "work": writable("."), "api_server": api_server(),
                  "env": sorted(os.environ), "pid": os.getpid(), "processes": processes(),
                  "runtime_tmp": read("/tmp/runtime-only"), "artifacts_file": read("/artifacts/marker")}))
"""
# The runtime container's command: the real client, as the agent's MCP server uses it.
RUNTIME = f"""\
import json, os, subprocess, sys, time
from pathlib import Path
from xla_sentinel.agents.sandbox import Sandbox
from xla_sentinel.agents.sandbox_exchange import request
sandbox = Sandbox.detect()
token = Path({agents.TOKEN_MOUNT!r})
out = {{"kind": sandbox.kind, "uid": os.getuid(), "token": (token / "token").is_file()
       and len((token / "token").read_text()) > 100, "namespace": (token / "namespace").read_text()}}
out["api_host"] = os.environ["KUBERNETES_SERVICE_HOST"]
out["key"] = os.environ.get({KEY_ENV!r}, "")
Path("/tmp/runtime-only").write_text({MARKER!r})
Path("/artifacts/marker").write_text({MARKER!r})
work = Path("/tmp/probe")
work.mkdir()
out["probe"] = request(Path(sandbox.tool), [sys.executable, "-c", {PROBE!r}], work, seconds=60,
                       env={{"API_HOST": os.environ["KUBERNETES_SERVICE_HOST"],
                             "API_PORT": os.environ["KUBERNETES_SERVICE_PORT"]}})
began = time.monotonic()
slept = subprocess.run(sandbox.argv(["sleep", "600"], work, seconds={SLEEP_LIMIT_S!r}),
                       capture_output=True, text=True, timeout=120)
out["sleep"] = {{"returncode": slept.returncode, "stderr": slept.stderr[-500:],
                "seconds": time.monotonic() - began}}
print("RESULT " + json.dumps(out), flush=True)
"""


def _chart_sandbox(*sets: str) -> SandboxConfig:
    """The operator's SandboxConfig as the chart sets it (its Deployment's flags): its
    defaults, or with these `--set` values."""
    (deployment,) = [o for o in helm_template(*sets) if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return config_from_args(container["args"][1:]).jobs.agent_sandbox


def _agent_pod(image: str, name: str, key_secret: str, *sets: str,
               runtime_script: str = RUNTIME) -> dict[str, Any]:
    """The agent pod the operator builds with the chart's values (`sets` besides its
    defaults), its runtime container running `runtime_script` (RUNTIME: the exchange's
    probe and the sleeping run)."""
    config = _chart_sandbox(*sets)
    assert config.container, "the chart's default is the sandbox container"
    env: list[EnvVar] = [{"name": "JAX_PLATFORMS", "value": "cpu"},
                         {"name": KEY_ENV, "valueFrom": {"secretKeyRef": {"name": key_secret, "key": "api-key"}}}]
    spec = agents.agent_pod(image, [], env, "default", "artifacts", config)
    (runtime,) = spec["containers"]
    runtime["command"], runtime["args"] = ["python3", "-c", runtime_script], []
    for container in [*spec["containers"], *spec["initContainers"]]:
        container["imagePullPolicy"] = "IfNotPresent"  # the image imported into containerd
        container["resources"]["requests"]["cpu"] = "100m"  # see the module's docstring
    (artifacts,) = [v for v in spec["volumes"] if v["name"] == "artifacts"]
    del artifacts["persistentVolumeClaim"]
    artifacts["emptyDir"] = {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_agent_code_runs_in_the_sandbox_container_as_another_uid_without_the_token(
        api: Api, control_plane: ControlPlane, node: RealNode, restricted_ns: str,
        images: dict[str, dict[str, Any]]) -> None:
    name = f"agent-{uuid.uuid4().hex[:6]}"
    key = f"sk-{uuid.uuid4().hex}"
    api.create("v1/secrets", restricted_ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key"},
                                             "data": {"api-key": base64.b64encode(key.encode()).decode()}})
    api.create("v1/pods", restricted_ns, _agent_pod(images["runner-cpu"]["ref"], name, "model-key"))

    def finished() -> dict[str, Any] | None:
        pod = api.get("v1/pods", restricted_ns, name) or {}
        return pod if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") else None

    pod = wait_for(finished, 150, f"agent pod {restricted_ns}/{name} finished", interval=1)
    result, runtime_log, sandbox_log, why = completed(control_plane, restricted_ns, pod, key)

    answer = result["probe"]
    assert answer["exit"] == 0, why
    seen = json.loads(answer["stdout"])
    assert (seen["uid"], seen["gid"]) == (agents.SANDBOX_UID, agents.SANDBOX_UID), seen
    assert seen["token"] is False, seen  # no token dir: nothing mounts it in the sandbox
    assert seen["root"] == "Read-only file system", seen
    assert seen["artifacts"] == "Read-only file system", seen
    assert seen["scratch"] is True and seen["work"] is True, seen
    # The runtime's /tmp (its OUT) is not the sandbox's; the artifacts volume is one for both.
    assert seen["runtime_tmp"] == "No such file or directory", seen
    assert seen["artifacts_file"] == MARKER, seen
    # Groups: its own, and the pod's fsGroup (the runtime's group: the pod-level fsGroup is
    # every container's supplementary group, which a container cannot opt out of); no other.
    fs_group = desired.POD_SECURITY["fsGroup"]
    assert set(seen["groups"]) <= {agents.SANDBOX_UID, fs_group}, seen["groups"]
    # Its own PID namespace: the server (PID 1, the image's entrypoint) and this run, none of
    # the runtime's processes; and the key in no process's command line or environment.
    processes = seen["processes"]
    assert "sandbox-server" in processes["1"]["cmdline"], processes
    assert sorted(processes) == sorted(["1", str(seen["pid"])]), processes
    assert key not in answer["stdout"] and key not in sandbox_log, processes
    # The server's own environment (the chart's three, the image's ENV, the kubelet's
    # KUBERNETES_* and HOSTNAME): none of the runtime's variables.
    server_env = {v.partition("=")[0] for v in processes["1"]["environ"]}
    assert {"JAX_PLATFORMS", "HOME", "TMPDIR"} <= server_env, server_env
    assert not {KEY_ENV, SOCKET_ENV, SHARED_ENV} & server_env, server_env
    # A cleared environment: none of the runtime's (the socket, the service address).
    assert not {"KUBERNETES_SERVICE_HOST", SOCKET_ENV, KEY_ENV} & set(seen["env"]), seen
    # The confinement the node gives: under the RuntimeDefault seccomp profile with no
    # capabilities, unshare is expected to be refused; then the run narrows itself to unix
    # sockets (agents/netfilter.py), since the pod's network is the runtime's too (no
    # NetworkPolicy can tell the containers apart): the API server is not reached, nor
    # anything else, without a policy engine. With namespaces there is no network either.
    confinement = answer["confinement"]
    print(f"\nconfinement on the real node: {confinement}; API server from the sandbox: "
          f"{seen['api_server']}; groups: {seen['groups']}; the server's environment: "
          f"{sorted(v.partition('=')[0] for v in processes['1']['environ'])}")
    assert f"confinement: {confinement}" in sandbox_log, why
    assert confinement.startswith(("seccomp", "unshare", "bwrap")), confinement
    assert seen["api_server"] != "connected", (confinement, seen)
    if confinement.startswith("seccomp"):
        assert seen["api_server"].startswith("PermissionError(1,"), seen  # EPERM: the socket itself refused
    assert result["api_host"] == API_SERVICE_IP, result  # `kubernetes`, the service tried

    # The run that outlives its limit: killed there, and the client dies of the same signal.
    slept = result["sleep"]
    assert slept["returncode"] == -9, slept
    assert f"killed at its limit of {SLEEP_LIMIT_S + 1}" in slept["stderr"], slept
    assert slept["seconds"] < SLEEP_LIMIT_S + 15, slept


def completed(control_plane: ControlPlane, ns: str, pod: dict[str, Any], key: str
              ) -> tuple[dict[str, Any], str, str, str]:
    """The finished agent pod `pod` completed as the chart means it to (the sidecar stopped
    once the runtime ended, on the kubelet's SIGTERM rather than the grace period), and its
    runtime container kept the token, uid 10001 and the model's `key`. Returns the runtime's
    RESULT, both containers' logs and the text to show on a failed assertion."""
    name = pod["metadata"]["name"]

    def logs(container: str) -> str:
        done = kubectl(control_plane, "logs", "-n", ns, name, "-c", container)
        assert done.returncode == 0, done.stderr
        return done.stdout

    runtime_log, sandbox_log = logs(agents.RUNTIME_CONTAINER), logs(agents.SANDBOX_CONTAINER)
    why = f"\nruntime:\n{runtime_log[-3000:]}\nsandbox:\n{sandbox_log[-3000:]}\nstatus: {pod['status']}"
    assert pod["status"]["phase"] == "Succeeded", why
    (runtime_state,) = [s["state"] for s in pod["status"]["containerStatuses"]]
    (sandbox_state,) = [s["state"] for s in pod["status"]["initContainerStatuses"]]
    assert runtime_state["terminated"]["exitCode"] == 0, why
    assert "terminated" in sandbox_state, why
    stopped_after = (_seconds(sandbox_state["terminated"]["finishedAt"])
                     - _seconds(runtime_state["terminated"]["finishedAt"]))
    assert 0 <= stopped_after < 20, (stopped_after, why)  # the grace period is 30 s
    (line,) = [ln for ln in runtime_log.splitlines() if ln.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    # The runtime container: the token (and its namespace), uid 10001, the pod's socket.
    assert result["kind"] == "container", why
    assert (result["uid"], result["token"], result["namespace"]) == (UID, True, ns), why
    assert result["key"] == key, why  # the model's key, from the Secret
    return result, runtime_log, sandbox_log, why
