"""Platform-default runner images on the real control plane: a TPU or GPU campaign without
spec.image gets its platform's image (the operator's --tpu/--gpu-runner-image, from the
chart's images.runner values), and one naming an image of another platform stalls with
reason ImagePlatformMismatch before any Job exists (so before any chip is held)."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import API, campaign, create, eventually

IMAGES = {"runner_image": "runner:test", "gpu_runner_image": "registry.test/runner-cuda:1",
          "tpu_runner_image": "registry.test/runner-tpu:1"}
TPU = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x2", "count": 4}


def worker_images(api, ns: str) -> set[str]:
    return {c["image"] for j in api.all("batch/v1/jobs", ns)
            for c in j["spec"]["template"]["spec"]["containers"]}


@pytest.mark.parametrize(("accelerator", "image"), [
    (TPU, IMAGES["tpu_runner_image"]),
    ({"type": "gpu", "gpuType": "nvidia-l4"}, IMAGES["gpu_runner_image"]),
])
async def test_an_accelerator_campaign_without_an_image_runs_its_platforms(
        api, ns, client, start_operator, accelerator, image):
    await start_operator(jobs=IMAGES)
    platform = accelerator["type"]
    await create(client, campaign(ns, workers=1, accelerator=accelerator,
                                  targets=[{"name": "default", "platform": platform},
                                           {"name": "O0", "platform": platform}]))
    assert await eventually(lambda: worker_images(api, ns)) == {image}


async def test_a_tpu_campaign_on_the_cpu_image_stalls_before_any_job(api, ns, client, start_operator):
    await start_operator(jobs=IMAGES)
    await create(client, campaign(ns, workers=1, accelerator=TPU, image="runner:test",
                                  targets=[{"name": "default", "platform": "tpu"}]))
    stalled = await eventually(lambda: next(
        (c for c in ((api.get(f"{API}/fuzzcampaigns", ns, "nightly") or {}).get("status") or {})
         .get("conditions", []) if c["type"] == "Stalled" and c["status"] == "True"), None))
    assert stalled["reason"] == "ImagePlatformMismatch"
    assert "spec.image: runner:test is a cpu runner image" in stalled["message"]
    assert IMAGES["tpu_runner_image"] in stalled["message"]
    await asyncio.sleep(1.5)  # several roll-ups (0.3 s): still no Job
    assert api.all("batch/v1/jobs", ns) == []

    # Fixed by leaving the image to the operator: the campaign runs on the TPU image.
    api.patch(f"{API}/fuzzcampaigns", ns, "nightly", {"spec": {"image": None}})
    assert await eventually(lambda: worker_images(api, ns)) == {IMAGES["tpu_runner_image"]}
