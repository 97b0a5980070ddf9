"""The chart ships the project's CRDs unchanged, and every custom resource it renders is one
the API server would accept (schema, unknown fields, CEL rules)."""

from __future__ import annotations

from tools import REPO_ROOT
from xla_sentinel.campaign import parse_spec
from xla_sentinel_operator.crd_validation import validate

from .render import CHART, CI_VALUES, by_kind, render

CRDS = REPO_ROOT / "crds"
OWN_GROUP = "xlasentinel.dev"


def test_chart_crds_are_byte_identical_to_the_project_crds() -> None:
    project = {p.name: p.read_bytes() for p in sorted(CRDS.glob("*.yaml"))}
    chart = {p.name: p.read_bytes() for p in sorted((CHART / "crds").glob("*.yaml"))}
    assert project, "crds/ holds no CRD"
    assert sorted(chart) == sorted(project), "run `make chart-sync`"
    for name in project:
        assert chart[name] == project[name], f"charts/xla-sentinel/crds/{name} is stale: run `make chart-sync`"


def test_rendered_release_installs_every_crd(rendered: tuple[dict, ...]) -> None:
    names = {o["metadata"]["name"] for o in by_kind(rendered, "CustomResourceDefinition")}
    assert {"fuzzcampaigns.xlasentinel.dev", "bugsignatures.xlasentinel.dev",
            "kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev"} <= names


def test_chart_rendered_campaigns_are_accepted(rendered: tuple[dict, ...]) -> None:
    for obj in rendered:
        if obj["apiVersion"].startswith(f"{OWN_GROUP}/"):
            assert validate(obj, CRDS) == [], obj["metadata"]["name"]
            parse_spec(obj["spec"])  # the engine reads the same spec


def test_some_values_file_renders_a_campaign() -> None:
    assert any(by_kind(render(p), "FuzzCampaign") for p in CI_VALUES)


def test_crd_validation_rejects_a_campaign_the_cel_rules_forbid() -> None:
    # Guards the check above: a TPU campaign without a topology must not pass.
    campaign = {"apiVersion": f"{OWN_GROUP}/v1alpha1", "kind": "FuzzCampaign",
                "metadata": {"name": "bad-tpu"},
                "spec": {"accelerator": {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice"}}}
    assert validate(campaign, CRDS) == ["spec.accelerator: accelerator type tpu needs tpuAccelerator and tpuTopology"]


def test_kopf_peering_objects_are_accepted(rendered: tuple[dict, ...]) -> None:
    peerings = [o for o in rendered if o["apiVersion"] == "kopf.dev/v1"]
    assert peerings, "replicas need a peering object"
    for obj in peerings:
        assert validate(obj, CRDS) == [], obj["metadata"]["name"]
