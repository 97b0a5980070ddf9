"""The chart lints and renders with every CI values file into objects Kubernetes accepts."""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest

from .render import CI_VALUES, KUBE_VERSION, by_kind, helm, render

# Kinds from CRDs; kubernetes-validate knows only built-in kinds. Ours and kopf.dev's are
# checked against crds/ (test_custom_resources); monitoring.coreos.com ones in test_monitoring.
FOREIGN_KINDS = {"ServiceMonitor", "PrometheusRule", "KopfPeering", "ClusterKopfPeering",
                 "FuzzCampaign", "BugSignature"}


def test_ci_values_cover_the_deployment_shapes() -> None:
    assert {p.name for p in CI_VALUES} >= {
        "default-values.yaml", "tpu-values.yaml", "gpu-values.yaml",
        "monitoring-values.yaml", "networkpolicy-values.yaml",
    }


def test_helm_lint_strict(values_file: Path) -> None:
    out = helm("lint", "--strict", str(values_file.parent.parent), "-f", str(values_file))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout


def test_every_builtin_object_is_valid_kubernetes(rendered: tuple[dict, ...]) -> None:
    checked, invalid = 0, []
    for obj in rendered:
        if obj["kind"] in FOREIGN_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            invalid.append(f"{obj['kind']}/{obj['metadata']['name']}: {e.message}")
        checked += 1
    assert invalid == []
    assert checked >= 10


def test_strict_validation_rejects_an_unknown_field() -> None:
    # Guards the check above: a misspelt field must not pass as valid.
    deployment = copy.deepcopy(by_kind(render(CI_VALUES[0]), "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSION, strict=True)


def test_object_names_are_unique(rendered: tuple[dict, ...]) -> None:
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in rendered]
    assert len(keys) == len(set(keys))


def test_monitoring_objects_render_only_when_enabled() -> None:
    kinds = {p.name: {o["kind"] for o in render(p)} for p in CI_VALUES}
    assert not kinds["default-values.yaml"] & {"ServiceMonitor", "PrometheusRule", "NetworkPolicy"}
    assert {"ServiceMonitor", "PrometheusRule"} <= kinds["monitoring-values.yaml"]
    assert "NetworkPolicy" in kinds["networkpolicy-values.yaml"]
