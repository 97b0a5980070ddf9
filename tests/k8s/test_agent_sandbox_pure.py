"""The agent pod with its sandbox container (agents.agent_pod): what the runtime holds and
the sandbox does not. Pure: the pod spec as the operator builds it, no API (the chart's
side, the NetworkPolicy and RuntimeClass value, is tests/chart/test_agent_sandbox.py;
the sandbox server's own behaviour is tests/agents/test_sandbox_container.py)."""

from __future__ import annotations

from typing import Any

import pytest
from xla_sentinel.agents.sandbox_exchange import SHARED_ENV, SOCKET_ENV
from xla_sentinel.cli.main import build_parser
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import agents, desired
from xla_sentinel_operator.config import SandboxConfig
from xla_sentinel_operator.main import config_from_args

SECRET = {"name": "model-key", "key": "api-key"}
ON = SandboxConfig(
    container=True, runtime_class="gvisor", cpu="3", memory="6Gi", max_seconds=120.0
)


def pod_of(sandbox: SandboxConfig, **spec: Any) -> dict[str, Any]:
    c = desired.Campaign(
        name="nightly",
        namespace="fuzz",
        uid="u-1",
        spec=parse_spec(
            {"agents": {"roles": [{"role": "fix"}], "credentialSecretRef": SECRET}, **spec}
        ),
    )
    (job,) = agents.agent_jobs(c, default_image="runner:1", sandbox=sandbox)
    return job["spec"]["template"]["spec"]


def security(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    return {**pod["securityContext"], **container["securityContext"]}


def test_the_token_is_mounted_into_the_runtime_only():
    pod = pod_of(ON, artifacts={"pvc": "fuzz-artifacts"})
    assert pod["automountServiceAccountToken"] is False
    (runtime,) = pod["containers"]
    (sandbox,) = pod["initContainers"]
    assert (runtime["name"], sandbox["name"]) == ("runtime", "sandbox")
    token_volumes = {
        v["name"]
        for v in pod["volumes"]
        if "projected" in v and any("serviceAccountToken" in s for s in v["projected"]["sources"])
    }
    assert token_volumes == {"kube-api-access"}
    runtime_mounts = {m["name"]: m for m in runtime["volumeMounts"]}
    assert runtime_mounts["kube-api-access"]["mountPath"] == agents.TOKEN_MOUNT
    assert runtime_mounts["kube-api-access"]["readOnly"] is True
    assert not token_volumes & {m["name"] for m in sandbox["volumeMounts"]}
    # The client library's in-cluster login needs the CA and the namespace beside the token.
    (volume,) = (v for v in pod["volumes"] if v["name"] == "kube-api-access")
    kinds = {k for s in volume["projected"]["sources"] for k in s}
    assert kinds == {"serviceAccountToken", "configMap", "downwardAPI"}


def test_the_sandbox_runs_as_another_uid_with_nothing_of_the_runtimes():
    pod = pod_of(ON, artifacts={"pvc": "fuzz-artifacts"})
    (runtime,), (sandbox,) = pod["containers"], pod["initContainers"]
    run_sec, box_sec = security(pod, runtime), security(pod, sandbox)
    assert run_sec["runAsUser"] != box_sec["runAsUser"] and box_sec["runAsUser"] != 0
    assert box_sec["runAsNonRoot"] is True and box_sec["readOnlyRootFilesystem"] is True
    assert box_sec["allowPrivilegeEscalation"] is False and box_sec["privileged"] is False
    assert box_sec["capabilities"] == {"drop": ["ALL"]}
    assert box_sec["seccompProfile"] == {"type": "RuntimeDefault"}
    # No secret and none of the runtime's variables: only the sandbox's own plain values.
    assert all("valueFrom" not in e for e in sandbox["env"]) and "envFrom" not in sandbox
    assert {e["name"] for e in sandbox["env"]} == {"JAX_PLATFORMS", "HOME", "TMPDIR"}
    assert any(
        "secretKeyRef" in e.get("valueFrom", {}) for e in runtime["env"]
    )  # the model's key stays here
    # Artifacts read-only there, writable only on its scratch and the exchange.
    mounts = {m["name"]: m for m in sandbox["volumeMounts"]}
    assert mounts["artifacts"]["readOnly"] is True
    assert set(mounts) == {"exchange", "sandbox-tmp", "artifacts"}
    assert {m["mountPath"] for m in sandbox["volumeMounts"] if not m.get("readOnly")} == {
        agents.EXCHANGE_MOUNT,
        "/tmp",
    }
    # The runtime's tmp (its OUT: the claims ledger, transcripts) is not the sandbox's.
    assert "tmp" not in mounts
    scratch = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in scratch["sandbox-tmp"] and "emptyDir" in scratch["exchange"]
    assert sandbox["resources"]["limits"] == {"cpu": "3", "memory": "6Gi"}


def test_the_runtime_reaches_the_sandbox_through_the_shared_socket():
    pod = pod_of(ON, artifacts={"pvc": "fuzz-artifacts"})
    (runtime,), (sandbox,) = pod["containers"], pod["initContainers"]
    env = {e["name"]: e.get("value") for e in runtime["env"]}
    assert env[SOCKET_ENV] == agents.SANDBOX_SOCKET and env[SHARED_ENV] == desired.ARTIFACTS_MOUNT
    # A native sidecar: started first, stopped when the runtime ends, so the Job completes.
    assert sandbox["restartPolicy"] == "Always"
    args = build_parser().parse_args(sandbox["args"])  # the CLI's own parser takes them
    assert args.socket == agents.SANDBOX_SOCKET and args.own_container and args.run_seconds == 120.0
    assert args.fn.__name__ == "_cmd_sandbox_server"
    assert pod["runtimeClassName"] == "gvisor"
    # The index failure policy names the runtime (its exit 1 or 2 is final), not the sidecar.
    c = desired.Campaign(
        name="n",
        namespace="f",
        uid="u",
        spec=parse_spec({"agents": {"roles": [{"role": "fix"}], "credentialSecretRef": SECRET}}),
    )
    (job,) = agents.agent_jobs(c, default_image="i", sandbox=ON)
    rule = job["spec"]["podFailurePolicy"]["rules"][1]
    assert rule["onExitCodes"]["containerName"] == runtime["name"]


def test_without_artifacts_the_sandbox_mounts_none_and_shares_nothing_else():
    pod = pod_of(ON)
    (runtime,), (sandbox,) = pod["containers"], pod["initContainers"]
    assert "artifacts" not in {m["name"] for m in sandbox["volumeMounts"]}
    assert SHARED_ENV not in {e["name"] for e in runtime["env"]}


def test_sandbox_off_is_the_one_container_pod():
    pod = pod_of(SandboxConfig(container=False))
    assert "initContainers" not in pod and "automountServiceAccountToken" not in pod
    assert "runtimeClassName" not in pod
    (runtime,) = pod["containers"]
    assert SOCKET_ENV not in {e["name"] for e in runtime["env"]}
    # A RuntimeClass applies with or without the sandbox container.
    assert pod_of(SandboxConfig(container=False, runtime_class="gvisor"))["runtimeClassName"] == "gvisor"


def test_the_operator_takes_its_sandbox_choice_from_its_flags():
    """The sandbox container is the default, with or without the chart: a bare operator
    builds no agent pod whose code runs beside the model's key and the token."""
    assert config_from_args([]).jobs.agent_sandbox == SandboxConfig()
    assert SandboxConfig().container
    assert "initContainers" in pod_of(SandboxConfig())
    got = config_from_args(["--agent-sandbox=container", "--agent-runtime-class=gvisor",
                            "--agent-sandbox-cpu=3", "--agent-sandbox-memory=6Gi",
                            "--agent-sandbox-seconds=120"]).jobs.agent_sandbox
    assert got == ON
    assert not config_from_args(["--agent-sandbox=off"]).jobs.agent_sandbox.container
    for bad in ("--agent-sandbox=yes", "--agent-sandbox-seconds=0"):
        with pytest.raises(SystemExit):
            config_from_args([bad])
