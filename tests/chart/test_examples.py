"""Every built-in object in examples/ is valid for Kubernetes (kubernetes-validate, strict),
and every campaign reads the same through the engine's schema, so `kubectl apply -f
examples/...` and `xla-sentinel run` both work. The real API server's verdict on each
example is tests/k8s/test_manifests.py."""

from __future__ import annotations

import math
from typing import Any

import kubernetes_validate
import pytest
import yaml
from tools import REPO_ROOT
from xla_sentinel.spec.campaign import campaign_from_data, load_campaign

from .render import KUBE_VERSION

EXAMPLES = REPO_ROOT / "examples"
SHIPPED = ["cpu", "gpu", "tpu-v5e", "tpu-v6e", "cross-version", "replay"]


def _documents() -> list[tuple[str, dict[str, Any]]]:
    """(file#index, object) for every Kubernetes object in examples/*.yaml."""
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc and "kind" in doc:
                docs.append((f"{path.name}#{i}", doc))
    return docs


DOCUMENTS = _documents()


def test_the_documented_examples_exist() -> None:
    names = {where.split("#")[0] for where, doc in DOCUMENTS if doc["kind"] == "FuzzCampaign"}
    assert {f"campaign-{s}.yaml" for s in SHIPPED} <= names


@pytest.mark.parametrize("where,obj", DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_example_object_is_accepted(where: str, obj: dict[str, Any]) -> None:
    if not obj["apiVersion"].startswith("xlasentinel.dev/"):
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
    if obj["kind"] == "FuzzCampaign":
        campaign = campaign_from_data(obj, source=where)  # the engine reads the same spec
        assert campaign.name == obj["metadata"]["name"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_campaign_loads_as_a_local_campaign_file(name: str) -> None:
    path = EXAMPLES / f"campaign-{name}.yaml"
    assert load_campaign(path).name == yaml.safe_load(path.read_text())["metadata"]["name"]


def test_accelerator_examples_ask_for_their_hardware() -> None:
    def spec(name: str) -> object:
        return load_campaign(EXAMPLES / f"campaign-{name}.yaml").spec

    v5e, v6e, gpu = spec("tpu-v5e"), spec("tpu-v6e"), spec("gpu")
    assert (v5e.accelerator.tpuAccelerator, v5e.accelerator.tpuTopology) == ("tpu-v5-lite-podslice", "2x2")
    assert (v6e.accelerator.tpuAccelerator, v6e.accelerator.tpuTopology) == ("tpu-v6e-slice", "2x4")
    for s in (v5e, v6e):
        # A 2x2 slice has 4 chips, a 2x4 host 8: the pod must request all of them.
        chips = math.prod(int(d) for d in s.accelerator.tpuTopology.split("x"))
        assert s.accelerator.count == chips
        assert s.resources["limits"]["google.com/tpu"] == str(chips)
        assert {t.platform for t in s.targets} == {"tpu"}
    assert gpu.resources["limits"]["nvidia.com/gpu"] == str(gpu.accelerator.count)


def test_cross_version_example_runs_another_runner_image() -> None:
    spec = load_campaign(EXAMPLES / "campaign-cross-version.yaml").spec
    assert [t.name for t in spec.targets if t.image] == ["jaxlib_0_4_30"]


def test_replay_example_reads_traces_not_generated_programs() -> None:
    spec = load_campaign(EXAMPLES / "campaign-replay.yaml").spec
    assert spec.traces and all(t.startswith("/artifacts/") for t in spec.traces)
    assert spec.artifacts.pvc  # the traces live on the artifacts volume
