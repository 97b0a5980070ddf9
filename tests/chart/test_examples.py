"""Every FuzzCampaign manifest in examples/ is accepted by the engine's schema and by the
API server's (CRD schema plus CEL rules), so `kubectl apply -f examples/...` just works."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from tools import REPO_ROOT
from xla_sentinel.campaign import load_campaign
from xla_sentinel_operator.crd_validation import validate

EXAMPLES = REPO_ROOT / "examples"
CRDS = REPO_ROOT / "crds"
SHIPPED = ["cpu", "gpu", "tpu-v5e", "tpu-v6e", "cross-version", "replay"]


def _manifests() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.yaml")
                  if (yaml.safe_load(p.read_text()) or {}).get("kind") == "FuzzCampaign")


def test_the_documented_examples_exist() -> None:
    names = {p.name for p in _manifests()}
    assert {f"campaign-{s}.yaml" for s in SHIPPED} <= names


@pytest.mark.parametrize("path", _manifests(), ids=lambda p: p.stem)
def test_example_is_a_valid_campaign_and_resource(path: Path) -> None:
    campaign = load_campaign(path)
    obj = yaml.safe_load(path.read_text())
    assert obj["apiVersion"] == "xlasentinel.dev/v1alpha1"
    assert campaign.name == obj["metadata"]["name"]
    assert validate(obj, CRDS) == []


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
