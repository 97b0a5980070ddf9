"""The real kopf operator against the emulated API: campaigns in, worker Jobs out."""

from __future__ import annotations

from xla_sentinel_operator.kube import path

from .conftest import NS, campaign, create, eventually

TPU = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x4", "count": 4}


async def test_campaign_creates_indexed_worker_job_with_tpu_scheduling(api, client, start_operator):
    await start_operator()
    await create(client, campaign(workers=3, accelerator=TPU, queueName="tpu-queue"))

    jobs = await eventually(lambda: api.all("batch/v1/jobs", NS))
    assert len(jobs) == 1
    job = jobs[0]
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "tpu-queue"
    assert job["spec"]["suspend"] is True  # Kueue admits it by unsuspending
    owner = job["metadata"]["ownerReferences"][0]
    fc = api.get(f"{'xlasentinel.dev/v1alpha1'}/fuzzcampaigns", NS, "nightly")
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("FuzzCampaign", fc["metadata"]["uid"], True)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": "2x4"}
    runner = pod["containers"][0]
    assert runner["args"] == ["worker"]
    assert runner["resources"]["requests"]["google.com/tpu"] == "4"
    assert runner["resources"]["limits"]["google.com/tpu"] == "4"
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    await client.list(path("batch/v1", "jobs", NS))
