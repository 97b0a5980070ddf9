"""Least-privilege RBAC and the restricted Pod Security profile on every rendered pod."""

from __future__ import annotations

from typing import Any

import yaml

from .podsecurity import restricted_violations
from .render import CI_VALUES, by_kind, render

POD_OWNERS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod", "PodTemplate"}


def _pod_specs(objs: tuple[dict[str, Any], ...]) -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for o in objs:
        name = f"{o['kind']}/{o['metadata']['name']}"
        if o["kind"] == "Pod":
            specs.append((name, o["spec"]))
        elif o["kind"] == "CronJob":
            specs.append((name, o["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
        elif o["kind"] in POD_OWNERS:
            specs.append((name, o["spec"]["template"]["spec"] if o["kind"] != "PodTemplate"
                          else o["template"]["spec"]))
    return specs


def test_every_pod_template_meets_restricted(rendered: tuple[dict, ...]) -> None:
    pods = _pod_specs(rendered)
    assert pods, "the chart renders no pod template"
    for name, pod in pods:
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
        for vol in pod.get("volumes", []):
            assert "hostPath" not in vol, f"{name}: hostPath volume {vol['name']}"
        for c in pod.get("initContainers", []) + pod["containers"]:
            assert restricted_violations(pod, c) == [], f"{name}/{c['name']}"


def test_restricted_check_catches_a_privileged_container() -> None:
    pod = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}}
    container = {"securityContext": {"allowPrivilegeEscalation": True, "readOnlyRootFilesystem": True,
                                     "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}}
    assert restricted_violations(pod, container) == [
        "allowPrivilegeEscalation must be false",
        "capabilities.add may only hold NET_BIND_SERVICE",
    ]


def _rules(rendered: tuple[dict, ...]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}", r)
            for o in rendered if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]]


def test_rbac_has_no_wildcards_and_no_escalation(rendered: tuple[dict, ...]) -> None:
    rules = _rules(rendered)
    assert rules
    for where, r in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in r.get(field, []), f"{where}: wildcard in {field}"
        assert not {"escalate", "bind", "impersonate"} & set(r["verbs"]), where
        assert not {"roles", "clusterroles", "rolebindings", "clusterrolebindings"} & set(r["resources"]), where
    for o in rendered:
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            assert o["roleRef"]["name"] not in ("cluster-admin", "admin", "edit"), o["metadata"]["name"]


def _expected_secret_names(values_file: Any) -> set[str]:
    alerts = (yaml.safe_load(values_file.read_text()) or {}).get("alerts", {})
    return {r["webhookSecretRef"]["name"] for r in alerts.get("routes", [])} | set(
        alerts.get("extraSecretNames", []))


def test_secrets_are_readable_only_by_name(rendered: tuple[dict, ...], values_file: Any) -> None:
    secret_rules = [(w, r) for w, r in _rules(rendered) if "secrets" in r["resources"]]
    expected = _expected_secret_names(values_file)
    if not expected:
        assert secret_rules == []
    for where, r in secret_rules:
        assert r["resources"] == ["secrets"], where
        assert r["verbs"] == ["get"], where
        assert set(r["resourceNames"]) == expected, where


def test_webhook_secrets_of_routes_get_exactly_one_rule_per_namespace() -> None:
    objs = render(next(p for p in CI_VALUES if p.name == "networkpolicy-values.yaml"))
    namespaces = sorted(o["metadata"]["namespace"] for o in by_kind(objs, "Role")
                        if any("secrets" in r["resources"] for r in o["rules"]))
    assert namespaces == ["xla-fuzz", "xla-fuzz-nightly"]  # not the unwatched release namespace


def test_workers_may_only_write_worker_reports(rendered: tuple[dict, ...]) -> None:
    # Not ConfigMaps or Secrets: a worker's token reaches its report kind and nothing else.
    worker_roles = [o for o in by_kind(rendered, "Role") if o["metadata"]["name"].endswith("-worker")]
    assert worker_roles
    for role in worker_roles:
        assert role["rules"] == [{"apiGroups": ["xlasentinel.dev"], "resources": ["workerreports"],
                                  "verbs": ["get", "create", "patch"]}]


def test_the_operator_reads_no_configmaps(rendered: tuple[dict, ...]) -> None:
    # Only the agents' Role reads them: failure reports handed to a swarm (docs/agents.md),
    # get and list, nothing else.
    readers = [(w, r) for w, r in _rules(rendered) if "configmaps" in r["resources"]]
    assert readers and all(w.endswith("-agent") for w, _ in readers), readers
    assert all(r == {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
               for _, r in readers), readers
