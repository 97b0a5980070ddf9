"""The chart's side of the agent sandbox (issue 37): the default-deny NetworkPolicy of agent
pods, evaluated for the connections an agent pod makes (as test_cluster_contract.py does for
workers), and the agents values reaching the operator, whose own SandboxConfig then builds
the pod (two containers, the RuntimeClass) that restricted Pod Security admits."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import agents, desired
from xla_sentinel_operator.config import SandboxConfig
from xla_sentinel_operator.main import config_from_args

from .podsecurity import restricted_violations
from .render import CI_VALUES, by_kind, helm, render, template_args
from .test_cluster_contract import KUBE_SYSTEM, Peer, allowed, selects

NP_VALUES = next(p for p in CI_VALUES if p.name == "networkpolicy-values.yaml")
DEFAULT_VALUES = next(p for p in CI_VALUES if p.name == "default-values.yaml")
NS = {"kubernetes.io/metadata.name": "xla-fuzz"}
KUBE_DNS = Peer("10.8.0.20", {"k8s-app": "kube-dns"}, KUBE_SYSTEM)
API_SERVER = Peer("172.16.0.2")  # networkpolicy-values.yaml's apiServer
HOSTED_MODEL = Peer("162.159.140.245")  # a hosted model API's address (api.openai.com's, say)
METADATA = Peer("169.254.169.254")
OTHER_POD = Peer("10.4.0.9", {"app": "anything"}, NS)
SECRET = {"name": "model-key", "key": "api-key"}


def _objects(*sets: str, values: Any = NP_VALUES) -> list[dict[str, Any]]:
    out = helm(*template_args(values, sets=sets))
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _policies(*sets: str) -> list[dict[str, Any]]:
    return [d for d in _objects(*sets) if d["kind"] == "NetworkPolicy"]


def _agent_job(sandbox: SandboxConfig, namespace: str = "xla-fuzz") -> dict[str, Any]:
    c = desired.Campaign(
        name="nightly",
        namespace=namespace,
        uid="u",
        spec=parse_spec(
            {
                "agents": {"roles": [{"role": "fix"}], "credentialSecretRef": SECRET},
                "artifacts": {"pvc": "a"},
            }
        ),
    )
    (job,) = agents.agent_jobs(c, default_image="img", sandbox=sandbox)
    return job


def _labels(job: dict[str, Any]) -> dict[str, str]:
    return job["spec"]["template"]["metadata"]["labels"]


def _operator_sandbox(objs: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> SandboxConfig:
    """The SandboxConfig the chart's operator runs with: its Deployment's flags, parsed by
    the operator's own parser."""
    (deployment,) = by_kind(tuple(objs), "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "operator"
    return config_from_args(container["args"][1:]).jobs.agent_sandbox


AGENT = _labels(_agent_job(SandboxConfig(container=True)))


@pytest.mark.parametrize(
    ("case", "peer", "port", "protocol", "want"),
    [
        ("kube-dns", KUBE_DNS, 53, "UDP", True),
        ("kube-dns over TCP", KUBE_DNS, 53, "TCP", True),
        ("the API server: task Leases, its WorkerReport", API_SERVER, 443, "TCP", True),
        ("a hosted model API over HTTPS", HOSTED_MODEL, 443, "TCP", True),
        ("the same address on another port", HOSTED_MODEL, 80, "TCP", False),
        ("the metadata server (tokens of the node's identity)", METADATA, 80, "TCP", False),
        ("another pod of the namespace", OTHER_POD, 8080, "TCP", False),
        ("the API server on a port it does not listen on", API_SERVER, 10250, "TCP", False),
    ],
)
def test_agent_pods_reach_only_dns_the_api_server_and_the_model(case, peer, port, protocol, want):
    assert allowed(_policies(), "egress", AGENT, NS, peer, port, protocol) is want, case


def test_agent_pods_take_no_connection_and_each_watched_namespace_has_the_policy():
    policies = _policies()
    for ns in ("xla-fuzz", "xla-fuzz-nightly"):
        mine = [
            p["metadata"]["name"]
            for p in policies
            if p["metadata"]["namespace"] == ns and selects(p["spec"]["podSelector"], AGENT)
        ]
        assert mine == ["xs-xla-sentinel-agent"], ns
    for peer in (
        OTHER_POD,
        Peer("10.4.0.10", {"xlasentinel.dev/role": "agent", "xlasentinel.dev/campaign": "x"}, NS),
    ):
        assert not allowed(policies, "ingress", AGENT, NS, peer, 8000)
    # Workers are not agents: their own policy, untouched by this one.
    worker = desired.worker_jobs(
        desired.Campaign(name="n", namespace="xla-fuzz", uid="u", spec=parse_spec({})),
        default_image="img",
    )[0]
    assert allowed(policies, "egress", _labels(worker), NS, METADATA, 80)


def test_a_model_endpoint_in_the_cluster_narrows_the_egress_to_it():
    """An in-cluster model server (a vLLM Service, say): its namespace as the peer and its
    port; nothing on the internet any more."""
    model_ns = {"kubernetes.io/metadata.name": "models"}
    policies = _policies(
        "agents.modelEndpoint.cidrs=null",
        "agents.modelEndpoint.ports={8000}",
        "agents.modelEndpoint.to[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=models",
    )
    vllm = Peer("10.4.1.7", {"app": "vllm"}, model_ns)
    assert allowed(policies, "egress", AGENT, NS, vllm, 8000)
    assert not allowed(policies, "egress", AGENT, NS, HOSTED_MODEL, 443)
    assert not allowed(
        policies,
        "egress",
        AGENT,
        NS,
        Peer("10.4.1.8", {"app": "x"}, {"kubernetes.io/metadata.name": "o"}),
        8000,
    )
    assert allowed(policies, "egress", AGENT, NS, API_SERVER, 443)


def test_vertex_logins_open_the_metadata_server_only_when_asked():
    assert allowed(_policies("agents.metadataServer=true"), "egress", AGENT, NS, METADATA, 80)


def test_the_operator_builds_the_sandboxed_agent_pod_from_the_charts_values():
    objs = _objects(
        "agents.runtimeClassName=gvisor",
        "agents.sandbox.memory=6Gi",
        "agents.sandbox.maxSeconds=120",
        values=DEFAULT_VALUES,
    )
    config = _operator_sandbox(objs)
    assert config == SandboxConfig(
        container=True, runtime_class="gvisor", cpu="2", memory="6Gi", max_seconds=120.0
    )
    pod = _agent_job(config)["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "gvisor"
    assert [c["name"] for c in pod["initContainers"]] == ["sandbox"]
    assert pod["initContainers"][0]["resources"]["limits"]["memory"] == "6Gi"
    # Campaign namespaces may enforce restricted Pod Security: both containers meet it.
    for container in [*pod["containers"], *pod["initContainers"]]:
        assert restricted_violations(pod, container) == [], container["name"]
    # The default: the sandbox container on, no RuntimeClass; `off` is one container.
    default = _operator_sandbox(render(DEFAULT_VALUES))
    assert default.container and default.runtime_class == ""
    off = _operator_sandbox(_objects("agents.sandbox.mode=off", values=DEFAULT_VALUES))
    assert not off.container


@pytest.mark.parametrize(
    "setting",
    [
        "agents.sandbox.mode=yes",
        "agents.runtimeClassName=GVisor",
        "agents.modelEndpoint.ports={0}",
        "agents.sandbox.maxSeconds=0",
    ],
)
def test_the_schema_refuses_bad_agent_values(setting):
    out = helm(*template_args(DEFAULT_VALUES, sets=(setting,)))
    assert out.returncode != 0 and "values" in out.stderr.lower(), (setting, out.stderr[-500:])


def test_the_two_container_agent_job_is_a_valid_job() -> None:
    """The schema the API server serves (strict: no unknown field), for the operator's Job."""
    import kubernetes_validate

    from .render import KUBE_VERSION

    job = _agent_job(SandboxConfig(container=True, runtime_class="gvisor"))
    kubernetes_validate.validate(job, KUBE_VERSION, strict=True)
