"""The chart and the operator agree: the Deployment's flags parse with the operator's own
parser and point at the chart's port, namespaces, peering and worker ServiceAccount; the
worker pods the operator builds are the ones the chart's NetworkPolicy and RBAC expect."""

from __future__ import annotations

from typing import Any

import yaml
from tools import REPO_ROOT
from xla_sentinel.cluster.report import CAMPAIGN_LABEL
from xla_sentinel.spec.campaign import load_campaign
from xla_sentinel_operator import desired
from xla_sentinel_operator.main import config_from_args

from .podsecurity import restricted_violations
from .render import CHART, CI_VALUES, NAMESPACE, by_kind, render


def _operator_container(objs: tuple[dict, ...]) -> dict[str, Any]:
    (deployment,) = by_kind(objs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _worker_sa(objs: tuple[dict, ...]) -> str:
    return next(o["metadata"]["name"] for o in by_kind(objs, "ServiceAccount")
                if o["metadata"]["name"].endswith("-worker"))


def test_operator_flags_parse_and_match_the_chart(rendered: tuple[dict, ...]) -> None:
    container = _operator_container(rendered)
    assert container["args"][0] == "operator"
    config = config_from_args(container["args"][1:])
    (port,) = container["ports"]
    assert config.metrics.port == port["containerPort"]
    assert container["livenessProbe"]["httpGet"]["port"] == port["name"]
    # Liveness judges the process, readiness the API server too: an unreachable API server
    # (a control-plane upgrade) must not restart every operator pod (metrics.Liveness.alive).
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert config.jobs.service_account == _worker_sa(rendered)
    peering_kinds = {o["kind"] for o in rendered if o["apiVersion"] == "kopf.dev/v1"}
    # kopf uses ClusterKopfPeering when cluster-wide, KopfPeering per namespace otherwise.
    if config.namespaces:
        assert peering_kinds == {"KopfPeering"}
        peering_ns = {o["metadata"]["namespace"] for o in by_kind(rendered, "KopfPeering")}
        assert peering_ns == set(config.namespaces)
    else:
        assert peering_kinds == {"ClusterKopfPeering"}
    assert {o["metadata"]["name"] for o in rendered if o["apiVersion"] == "kopf.dev/v1"} == {config.peering.name}


def test_default_install_watches_its_own_namespace_with_the_cpu_runner() -> None:
    config = config_from_args(_operator_container(render(CI_VALUES[0]))["args"][1:])
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert config.namespaces == [NAMESPACE]
    assert config.jobs.runner_image == f"ghcr.io/xla-sentinel/xla-sentinel-runner:{app_version}"


def test_metrics_service_and_monitor_reach_the_operator_port() -> None:
    objs = render(next(p for p in CI_VALUES if p.name == "monitoring-values.yaml"))
    config = config_from_args(_operator_container(objs)["args"][1:])
    assert config.namespaces == []  # clusterWide
    (service,) = by_kind(objs, "Service")
    (monitor,) = by_kind(objs, "ServiceMonitor")
    assert service["spec"]["ports"][0]["port"] == config.metrics.port
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


def _worker_pod(objs: tuple[dict, ...], namespace: str) -> dict[str, Any]:
    """The pod template of a worker Job the operator would create with the chart's flags."""
    config = config_from_args(_operator_container(objs)["args"][1:])
    spec = load_campaign(REPO_ROOT / "examples" / "campaign-cpu.yaml").spec
    campaign = desired.Campaign(name="cpu-continuous", namespace=namespace, uid="u-1", spec=spec)
    (job,) = desired.worker_jobs(campaign, default_image=config.jobs.runner_image,
                                 service_account=config.jobs.service_account)
    return job["spec"]["template"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    ok = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    for e in selector.get("matchExpressions", []):
        if e["operator"] == "Exists":
            ok &= e["key"] in labels
        elif e["operator"] == "In":
            ok &= labels.get(e["key"]) in e["values"]
    return ok


def test_worker_network_policy_selects_the_operators_worker_pods() -> None:
    objs = render(next(p for p in CI_VALUES if p.name == "networkpolicy-values.yaml"))
    pod = _worker_pod(objs, "xla-fuzz")
    policies = [o for o in by_kind(objs, "NetworkPolicy") if o["metadata"]["namespace"] == "xla-fuzz"]
    assert [p["metadata"]["name"] for p in policies if _selects(p["spec"]["podSelector"], pod["metadata"]["labels"])] \
        == ["xs-xla-sentinel-worker"]
    assert CAMPAIGN_LABEL in pod["metadata"]["labels"]


def test_worker_pods_run_as_the_chart_worker_account_in_every_watched_namespace() -> None:
    objs = render(next(p for p in CI_VALUES if p.name == "networkpolicy-values.yaml"))
    config = config_from_args(_operator_container(objs)["args"][1:])
    for namespace in config.namespaces:
        pod = _worker_pod(objs, namespace)
        account = pod["spec"]["serviceAccountName"]
        accounts = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in by_kind(objs, "ServiceAccount")}
        assert (namespace, account) in accounts
        bindings = [b for b in by_kind(objs, "RoleBinding") if b["metadata"]["namespace"] == namespace
                    and {"kind": "ServiceAccount", "name": account, "namespace": namespace} in b["subjects"]]
        assert [b["roleRef"]["name"] for b in bindings] == ["xs-xla-sentinel-worker"]


def test_worker_pods_meet_restricted_pod_security() -> None:
    # Campaign namespaces labelled pod-security.kubernetes.io/enforce=restricted admit only
    # such pods; the runner image expects a writable /tmp beside its read-only root.
    pod = _worker_pod(render(CI_VALUES[0]), NAMESPACE)["spec"]
    for container in pod["containers"]:
        assert restricted_violations(pod, container) == [], container["name"]
        assert "/tmp" in {m["mountPath"] for m in container.get("volumeMounts", [])}
