"""The chart ships the project's CRDs unchanged and renders the campaigns its values ask for.
That kube-apiserver accepts every custom resource it renders is tests/k8s/test_manifests.py."""

from __future__ import annotations

from tools import REPO_ROOT
from xla_sentinel.spec.campaign import parse_spec

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


def test_chart_rendered_campaigns_read_as_engine_specs(rendered: tuple[dict, ...]) -> None:
    for obj in by_kind(rendered, "FuzzCampaign"):
        parse_spec(obj["spec"])  # the engine reads the same spec


def test_some_values_file_renders_a_campaign() -> None:
    assert any(by_kind(render(p), "FuzzCampaign") for p in CI_VALUES)


def test_kopf_peering_objects_are_rendered(rendered: tuple[dict, ...]) -> None:
    assert [o for o in rendered if o["apiVersion"] == "kopf.dev/v1"], "replicas need a peering object"
