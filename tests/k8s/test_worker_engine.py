"""The worker entrypoint with the real engine (jax compiles, an injected miscompile) reporting
to the emulated API while the operator runs: what the shard's own summary.json says is what
the campaign status and the BugSignatures say."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from xla_sentinel.faults import fault_path

from .conftest import API, NS, campaign, create, eventually

SPEC = {"seed": 3, "workers": 1, "generator": {"minOps": 3, "maxOps": 12, "dtypes": ["f32"]},
        "targets": [{"name": "default"}, {"name": "O0"}],
        "references": ["f64_eager", "f64_jit", "eager"], "budget": {"programs": 8},
        "injectPasses": [fault_path("fusion_bf16_rounding")]}


async def test_worker_runs_its_shard_and_the_cluster_agrees_with_its_summary(api, client, start_operator, tmp_path):
    await start_operator()
    await create(client, campaign("e2e", **SPEC))
    (job,) = await eventually(lambda: api.all("batch/v1/jobs", NS))
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {**os.environ, "XLA_SENTINEL_NAMESPACE": NS, "JOB_COMPLETION_INDEX": "0",
           **{e["name"]: e["value"] for e in container["env"] if "value" in e}}
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; from xla_sentinel.worker_main import main; sys.exit(main(sys.argv[1:]))",
        "--api-server", str(api.url), "--out", str(tmp_path / "shard"), env=env)
    assert await asyncio.wait_for(worker.wait(), 240) == 0

    summary = json.loads((tmp_path / "shard" / "summary.json").read_text())
    total = sum(summary["findings"].values())
    assert total >= 1  # the injected miscompile was found
    st = await eventually(lambda: (s := api.get(f"{API}/fuzzcampaigns", NS, "e2e").get("status", {}))
                          .get("findingsTotal") == total and s.get("phase") == "Completed" and s)
    assert st["programs"] == summary["programs"] == 8
    assert st["findings"] == summary["findings"]
    assert st["signatures"] == len(summary["signatures"])
    sigs = await eventually(lambda: len(s := api.all(f"{API}/bugsignatures", NS)) == len(summary["signatures"])
                            and sum(x.get("status", {}).get("count", 0) for x in s) == total and s)
    assert {x["spec"]["signature"] for x in sigs} == {s["id"] for s in summary["signatures"]}
    assert {x["spec"]["versions"]["jaxlib"] for x in sigs} == {summary["jaxlib_version"]}
