"""The PrometheusRule's expressions parse as PromQL and ask only for series that exist: the
operator's own metrics (with the labels it gives them) and kube-state-metrics Job series."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import promql_parser
import pytest
import yaml
from xla_sentinel.cluster.report import CAMPAIGN_LABEL
from xla_sentinel_operator.metrics import Metrics

from .render import CI_VALUES, by_kind, render

MONITORING = next(p for p in CI_VALUES if p.name == "monitoring-values.yaml")
# kube-state-metrics series the rules join on (stable metrics of its Job collector).
KSM_METRICS = {"kube_job_labels", "kube_job_status_active", "kube_job_status_failed"}
ALERTS = {"XlaSentinelNewSignature", "XlaSentinelCampaignStalled", "XlaSentinelWorkerCrashLoop",
          "XlaSentinelAlertDeliveryFailing"}


def _operator_series() -> dict[str, tuple[str, ...]]:
    # Series name (with _total for counters) -> label names, from the operator's registry.
    # prometheus_client has no public listing of label names before samples exist.
    collectors = Metrics().registry._names_to_collectors
    return {name: tuple(c._labelnames) for name, c in collectors.items()}


def _rules() -> list[dict[str, Any]]:
    (rule,) = by_kind(render(MONITORING), "PrometheusRule")
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


def _walk(expr: Any) -> list[Any]:
    nodes: list[Any] = []
    promql_parser.walk(expr, pre_visit=lambda n: nodes.append(n))
    return nodes


def test_the_rule_set_covers_the_promised_alerts() -> None:
    assert {r["alert"] for r in _rules()} == ALERTS


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r["alert"])
def test_rule_parses_and_uses_only_existing_series(rule: dict[str, Any]) -> None:
    expr = promql_parser.parse(rule["expr"])
    series = _operator_series()
    names = {n.name for n in _walk(expr) if isinstance(n, promql_parser.VectorSelector)}
    for name in names:
        if name.startswith("kube_"):
            assert name in KSM_METRICS, name
        else:
            assert name in series, f"{name}: the operator exports no such metric"
    if "for" in rule:
        promql_parser.parse_duration(rule["for"])


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r["alert"])
def test_aggregations_over_operator_metrics_group_by_labels_they_have(rule: dict[str, Any]) -> None:
    series = _operator_series()
    for node in _walk(promql_parser.parse(rule["expr"])):
        if not isinstance(node, promql_parser.AggregateExpr) or node.modifier is None:
            continue
        inner = {n.name for n in _walk(node.expr) if isinstance(n, promql_parser.VectorSelector)}
        if len(inner) == 1 and next(iter(inner)) in series:
            assert set(node.modifier.labels) <= set(series[next(iter(inner))]), rule["alert"]


def test_kube_state_metrics_label_is_the_operators_campaign_label() -> None:
    # kube-state-metrics exposes a Job label l as label_<l with non-alphanumerics as _>.
    expected = "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", CAMPAIGN_LABEL)
    joins = [r["expr"] for r in _rules() if "kube_job_labels" in r["expr"]]
    assert joins
    for expr in joins:
        assert set(re.findall(r"label_[a-z_]+_campaign", expr)) == {expected}


def test_service_monitor_keeps_the_operators_namespace_label() -> None:
    (monitor,) = by_kind(render(MONITORING), "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    # The operator labels series with the campaign's namespace; without honorLabels
    # Prometheus would overwrite it with the operator pod's namespace.
    assert endpoint["honorLabels"] is True
    assert endpoint["path"] == "/metrics"
    promql_parser.parse_duration(endpoint["interval"])


def test_promtool_accepts_the_rendered_rules(tmp_path) -> None:
    """Prometheus's own checker (Debian's prometheus package, `make system-deps`) reads the
    rule groups the chart renders, as Prometheus loads them."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run `make system-deps`"
    (rule,) = by_kind(render(MONITORING), "PrometheusRule")
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    done = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in done.stdout
