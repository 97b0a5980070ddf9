"""The real kopf operator against the emulated API: campaigns in, worker Jobs out, status
rolled up from children, suspend/resume, rolling updates, budget, failures, deletion."""

from __future__ import annotations

from xla_sentinel_operator.kube import path

from .conftest import API, NS, campaign, create, eventually
from .workers import Worker, finding

TPU = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x4", "count": 4}
FC = f"{API}/fuzzcampaigns"
FC_PATH = path(API, "fuzzcampaigns", NS, "nightly")


def jobs(api, role: str = "worker") -> list[dict]:
    return [j for j in api.all("batch/v1/jobs", NS)
            if j["metadata"]["labels"].get("xlasentinel.dev/role") == role]


def status(api, name: str = "nightly") -> dict:
    return (api.get(FC, NS, name) or {}).get("status") or {}


def condition(api, kind: str) -> dict:
    return next((c for c in status(api).get("conditions", []) if c["type"] == kind), {})


async def test_campaign_creates_indexed_worker_job_with_tpu_scheduling(api, client, start_operator):
    await start_operator()
    await create(client, campaign(workers=3, accelerator=TPU, queueName="tpu-queue"))

    (job,) = await eventually(lambda: jobs(api))
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "tpu-queue"
    assert job["spec"]["suspend"] is True  # Kueue admits it by unsuspending
    owner = job["metadata"]["ownerReferences"][0]
    fc = api.get(FC, NS, "nightly")
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("FuzzCampaign", fc["metadata"]["uid"], True)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": "2x4"}
    runner = pod["containers"][0]
    assert runner["args"] == ["worker"]
    assert runner["resources"]["requests"]["google.com/tpu"] == "4"
    assert runner["resources"]["limits"]["google.com/tpu"] == "4"
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


async def test_worker_reports_roll_up_into_status(api, client, start_operator):
    await start_operator()
    fc = await create(client, campaign(workers=2, budget={"programs": 1000}))
    (job,) = await eventually(lambda: jobs(api))
    await client.patch(path("batch/v1", "jobs", NS, job["metadata"]["name"], "status"),
                       {"status": {"active": 2}})
    w0, w1 = [await Worker(str(api.url), fc, f"main-{i}").start() for i in range(2)]
    await w0.find(finding("00000000000000aa", 1), finding("00000000000000aa", 2))
    await w1.find(finding("00000000000000bb", 3, verdict="crash"))
    await w0.progress(40)
    await w1.progress(25)

    st = await eventually(lambda: status(api).get("programs") == 65 and status(api))
    assert st["phase"] == "Running"
    assert st["findings"] == {"crash": 1, "mismatch": 2}
    assert (st["findingsTotal"], st["signatures"], st["executions"]) == (3, 2, 260)
    assert st["workers"] == {"desired": 2, "active": 2, "succeeded": 0, "failed": 0, "reporting": 2}
    assert [(w["worker"], w["programs"], w["findings"]) for w in st["workerSummary"]] == [
        ("main-0", 40, 2), ("main-1", 25, 1)]
    ready = condition(api, "Ready")
    assert ready["status"] == "True"
    assert ready["observedGeneration"] == api.get(FC, NS, "nightly")["metadata"]["generation"]
    assert condition(api, "Stalled")["status"] == "False"


async def test_spec_update_rolls_workers_to_a_new_job(api, client, start_operator):
    await start_operator()
    await create(client, campaign(workers=2))
    (old,) = await eventually(lambda: jobs(api))
    await client.patch(FC_PATH, {"spec": {"workers": 5}})

    (new,) = await eventually(lambda: [j for j in jobs(api) if j["metadata"]["name"] != old["metadata"]["name"]]
                              if len(jobs(api)) == 1 else None)
    assert new["spec"]["completions"] == 5
    st = await eventually(lambda: status(api).get("observedGeneration") == 2 and status(api))
    assert st["workers"]["desired"] == 5


async def test_suspend_stops_workers_and_keeps_results_then_resume(api, client, start_operator):
    await start_operator()
    fc = await create(client, campaign(workers=1))
    (job,) = await eventually(lambda: jobs(api))
    assert job["spec"]["suspend"] is False
    w = await Worker(str(api.url), fc, "main-0").start()
    await w.find(finding("00000000000000aa", 1))
    await eventually(lambda: status(api).get("findingsTotal") == 1)

    await client.patch(FC_PATH, {"spec": {"suspend": True}})
    await eventually(lambda: jobs(api)[0]["spec"]["suspend"] is True)
    st = await eventually(lambda: status(api).get("phase") == "Suspended" and status(api))
    assert st["findingsTotal"] == 1
    assert jobs(api)[0]["metadata"]["name"] == job["metadata"]["name"]  # same Job, not a new revision

    await client.patch(FC_PATH, {"spec": {"suspend": False}})
    await eventually(lambda: jobs(api)[0]["spec"]["suspend"] is False)
    await eventually(lambda: status(api).get("phase") == "Running")
    assert status(api)["findingsTotal"] == 1


async def test_budget_reached_completes_and_suspends_workers(api, client, start_operator):
    await start_operator()
    fc = await create(client, campaign(workers=2, budget={"programs": 50}))
    await eventually(lambda: jobs(api))
    w0, w1 = [await Worker(str(api.url), fc, f"main-{i}").start() for i in range(2)]
    await w0.progress(30)
    await w1.progress(20)

    st = await eventually(lambda: status(api).get("phase") == "Completed" and status(api))
    assert st["completionTime"]
    assert condition(api, "Ready")["status"] == "True"
    await eventually(lambda: all(j["spec"]["suspend"] for j in jobs(api)))


async def test_repeatedly_failing_workers_stall_the_campaign_with_a_reason(api, client, start_operator):
    await start_operator()
    await create(client, campaign(workers=4))
    (job,) = await eventually(lambda: jobs(api))
    await client.patch(path("batch/v1", "jobs", NS, job["metadata"]["name"], "status"),
                       {"status": {"failed": 3, "active": 1}})

    stalled = await eventually(lambda: condition(api, "Stalled").get("status") == "True"
                               and condition(api, "Stalled"))
    assert stalled["reason"] == "WorkersFailing"
    assert "3 worker pods failed" in stalled["message"]
    assert status(api)["phase"] == "Stalled"
    assert condition(api, "Ready")["status"] == "False"


async def test_delete_removes_children_through_the_finalizer(api, client, start_operator):
    await start_operator()
    fc = await create(client, campaign(workers=1))
    await eventually(lambda: jobs(api))
    assert "xlasentinel.dev/cleanup" in api.get(FC, NS, "nightly")["metadata"]["finalizers"]
    w = await Worker(str(api.url), fc, "main-0").start()
    await w.progress(3)

    await client.delete(FC_PATH)
    await eventually(lambda: api.get(FC, NS, "nightly") is None)
    assert jobs(api) == []
    assert api.all("v1/configmaps", NS) == []


async def test_restart_mid_campaign_duplicates_no_jobs_and_no_counts(api, client, start_operator):
    first = await start_operator()
    fc = await create(client, campaign(workers=2))
    await eventually(lambda: jobs(api))
    w = await Worker(str(api.url), fc, "main-0").start()
    await w.find(finding("00000000000000aa", 1), finding("00000000000000aa", 2))
    await w.progress(10)
    await eventually(lambda: status(api).get("findingsTotal") == 2)
    await first.stop()

    second = await start_operator()
    await w.find(finding("00000000000000aa", 3))
    await eventually(lambda: status(api).get("findingsTotal") == 3)
    sig = await eventually(lambda: (s := api.get(f"{API}/bugsignatures", NS, "sig-00000000000000aa"))
                           and s["status"].get("count") == 3 and s)
    assert sig["status"]["hits"] == {"nightly/main-0": 3}
    assert len(jobs(api)) == 1
    assert len(jobs(api, "bisector")) == 1
    assert status(api)["programs"] == 10
    # The restarted operator re-read every report; none of it was new to the signature.
    assert second.runtime.metrics.signatures.labels(NS, "mismatch", "new")._value.get() == 0
