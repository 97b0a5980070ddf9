"""What users apply is what kube-apiserver accepts: every object in examples/ and every
custom resource the chart renders for each CI values file passes the real API server's
validation (structural schema, strict fields, CEL compiled with its cost limits), through the
real kubectl; an invalid manifest is refused with the API server's own message; and a
campaign applied with kubectl is reconciled by the operator."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane.kit import CHART, RELEASE, RELEASE_NS, kubectl
from tools import REPO_ROOT, helm_path
from xla_sentinel.spec.campaign import campaign_from_data

from .conftest import API, eventually

EXAMPLES = sorted(p for p in (REPO_ROOT / "examples").glob("*.yaml")
                  if any(d and d.get("apiVersion") for d in yaml.safe_load_all(p.read_text())))
CI_VALUES = sorted((REPO_ROOT / "charts" / "xla-sentinel" / "ci").glob("*-values.yaml"))


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def ensure_namespaces(control_plane, objs: list[dict[str, Any]]) -> None:
    for ns in {o["metadata"].get("namespace") for o in objs} - {None}:
        kubectl(control_plane, "create", "namespace", ns)  # "AlreadyExists" is fine


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_is_accepted_by_the_api_server_and_reapplies(control_plane, api, example):
    objs = documents(example)
    ensure_namespaces(control_plane, objs)
    done = kubectl(control_plane, "apply", "-f", str(example))
    assert done.returncode == 0, done.stderr
    for doc in objs:
        assert doc["metadata"]["name"] in done.stdout
        if doc["kind"] == "FuzzCampaign":
            stored = api.get(f"{API}/fuzzcampaigns", doc["metadata"]["namespace"],
                             doc["metadata"]["name"])
            # The stored, defaulted spec is one the engine reads as the file reads.
            assert (campaign_from_data(stored, source="server").spec
                    == campaign_from_data(doc, source=example.name).spec)
    again = kubectl(control_plane, "apply", "-f", str(example))
    assert again.returncode == 0, again.stderr
    assert "created" not in again.stdout
    kubectl(control_plane, "delete", "--wait=false", "-f", str(example))


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_every_custom_resource_the_chart_renders_is_accepted(control_plane, values):
    rendered = subprocess.run([str(helm_path()), "template", RELEASE, str(CHART), "-n", RELEASE_NS,
                               "-f", str(values)], capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    ours = [d for d in yaml.safe_load_all(rendered.stdout)
            if d and d["apiVersion"].split("/")[0] in ("xlasentinel.dev", "kopf.dev")]
    if not ours:
        pytest.skip(f"{values.name} renders no custom resource")
    ensure_namespaces(control_plane, ours)
    done = kubectl(control_plane, "apply", "--dry-run=server", "-f", "-",
                   stdin=yaml.safe_dump_all(ours))
    assert done.returncode == 0, done.stderr


def test_invalid_manifest_is_refused_with_the_api_server_message(control_plane, api, ns, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": API, "kind": "FuzzCampaign",
                                   "metadata": {"name": "bad", "namespace": ns},
                                   "spec": {"accelerator": {"type": "tpu", "count": 4}}}))
    done = kubectl(control_plane, "apply", "-f", str(bad))
    assert done.returncode == 1
    assert ('spec.accelerator: Invalid value: "object": '
            "accelerator type tpu needs tpuAccelerator and tpuTopology") in done.stderr
    assert api.get(f"{API}/fuzzcampaigns", ns, "bad") is None


async def test_campaign_applied_with_kubectl_is_reconciled(control_plane, api, ns, start_operator):
    await start_operator()
    quickstart = documents(REPO_ROOT / "examples" / "k8s-quickstart.yaml")
    for doc in quickstart:
        doc["metadata"]["namespace"] = ns
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump_all(quickstart))
    assert done.returncode == 0, done.stderr
    (job,) = await eventually(lambda: api.all("batch/v1/jobs", ns))
    assert job["spec"]["completions"] == 4
    assert job["metadata"]["ownerReferences"][0]["name"] == "quickstart"
    got = kubectl(control_plane, "get", "fuzzcampaigns", "-n", ns,
                  "-o", "jsonpath={.items[*].metadata.name}")
    assert (got.returncode, got.stdout) == (0, "quickstart"), got.stderr
