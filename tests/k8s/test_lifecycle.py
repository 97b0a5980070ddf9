"""The real kopf operator against the real control plane: campaigns in, worker Jobs out (the
real Job controller makes their pods), status rolled up from children, suspend/resume,
rolling updates, budget, failures, deletion, restarts."""

from __future__ import annotations

import lupa
from tools import REPO_ROOT
from xla_sentinel_operator.kube import path

from .conftest import API, campaign, create, eventually
from .workers import Worker, finding

TPU = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x4", "count": 8}
FC = f"{API}/fuzzcampaigns"


def fc_path(ns: str, name: str = "nightly") -> str:
    return path(API, "fuzzcampaigns", ns, name)


def jobs(api, ns: str, role: str = "worker") -> list[dict]:
    return api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": role})


def worker_pods(api, ns: str) -> list[dict]:
    return api.all("v1/pods", ns, {"xlasentinel.dev/role": "worker"})


def status(api, ns: str, name: str = "nightly") -> dict:
    return (api.get(FC, ns, name) or {}).get("status") or {}


def condition(api, ns: str, kind: str) -> dict:
    return next((c for c in status(api, ns).get("conditions", []) if c["type"] == kind), {})


async def test_campaign_creates_indexed_worker_job_with_tpu_scheduling(api, ns, client, start_operator):
    await start_operator()
    await create(client, campaign(ns, workers=3, accelerator=TPU, queueName="tpu-queue"))

    (job,) = await eventually(lambda: jobs(api, ns))
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "tpu-queue"
    assert job["spec"]["suspend"] is True  # Kueue admits it by unsuspending
    owner = job["metadata"]["ownerReferences"][0]
    fc = api.get(FC, ns, "nightly")
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("FuzzCampaign", fc["metadata"]["uid"], True)
    pod = job["spec"]["template"]["spec"]
    # v6e 2x4 comes as one VM or two (tpu.py): the single-host pool's machine type is named.
    assert pod["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": "2x4",
                                   "node.kubernetes.io/instance-type": "ct6e-standard-8t"}
    runner = pod["containers"][0]
    assert runner["args"] == ["worker"]
    assert runner["resources"]["requests"]["google.com/tpu"] == "8"
    assert runner["resources"]["limits"]["google.com/tpu"] == "8"
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    # Suspended by its creator for Kueue: the Job controller makes no pod for it.
    assert api.all("v1/pods", ns) == []
    assert status(api, ns).get("phase") in (None, "Pending")


async def test_worker_reports_roll_up_into_status(api, ns, client, start_operator, worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=2, budget={"programs": 1000}))
    await eventually(lambda: jobs(api, ns))
    # No node runs here: the Job controller's two pods stay Pending, and Pending is not running.
    await eventually(lambda: len(api.all("v1/pods", ns)) == 2)
    assert (await eventually(lambda: condition(api, ns, "Ready")))["status"] == "False"
    w0, w1 = [await Worker(worker_kubeconfig, fc, f"main-{i}").start() for i in range(2)]
    await w0.find(finding("00000000000000aa", 1), finding("00000000000000aa", 2))
    await w1.find(finding("00000000000000bb", 3, verdict="crash"))
    await w0.progress(40)
    await w1.progress(25)

    st = await eventually(lambda: status(api, ns).get("programs") == 65 and status(api, ns))
    assert st["phase"] == "Running"
    assert st["findings"] == {"crash": 1, "mismatch": 2}
    assert (st["findingsTotal"], st["signatures"], st["executions"]) == (3, 2, 260)
    assert st["workers"]["desired"] == 2 and st["workers"]["reporting"] == 2
    assert [(w["worker"], w["programs"], w["findings"]) for w in st["workerSummary"]] == [
        ("main-0", 40, 2), ("main-1", 25, 1)]
    ready = await eventually(lambda: condition(api, ns, "Ready").get("status") == "True"
                             and condition(api, ns, "Ready"))
    assert ready["observedGeneration"] == api.get(FC, ns, "nightly")["metadata"]["generation"]
    assert condition(api, ns, "Stalled")["status"] == "False"


async def test_spec_update_rolls_workers_to_a_new_job(api, ns, client, start_operator):
    await start_operator()
    await create(client, campaign(ns, workers=2))
    (old,) = await eventually(lambda: jobs(api, ns))
    await client.patch(fc_path(ns), {"spec": {"workers": 5}})

    (new,) = await eventually(lambda: [j for j in jobs(api, ns) if j["metadata"]["name"] != old["metadata"]["name"]]
                              if len(jobs(api, ns)) == 1 else None)
    assert new["spec"]["completions"] == 5
    st = await eventually(lambda: status(api, ns).get("observedGeneration") == 2 and status(api, ns))
    assert st["workers"]["desired"] == 5
    # The old Job's pods go with it (the real garbage collector, background propagation).
    await eventually(lambda: all(p["metadata"]["labels"].get("job-name") == new["metadata"]["name"]
                                 for p in api.all("v1/pods", ns)))


async def test_suspend_stops_workers_and_keeps_results_then_resume(api, ns, client, start_operator,
                                                                   worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))
    (job,) = await eventually(lambda: jobs(api, ns))
    assert job["spec"]["suspend"] is False
    await eventually(lambda: api.all("v1/pods", ns))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding("00000000000000aa", 1))
    await eventually(lambda: status(api, ns).get("findingsTotal") == 1)

    await client.patch(fc_path(ns), {"spec": {"suspend": True}})
    await eventually(lambda: jobs(api, ns)[0]["spec"]["suspend"] is True)
    st = await eventually(lambda: status(api, ns).get("phase") == "Suspended" and status(api, ns))
    assert st["findingsTotal"] == 1
    assert jobs(api, ns)[0]["metadata"]["name"] == job["metadata"]["name"]  # same Job, same revision
    # The real Job controller removes the pods of a suspended Job.
    await eventually(lambda: not [p for p in worker_pods(api, ns)
                                  if not p["metadata"].get("deletionTimestamp")])

    await client.patch(fc_path(ns), {"spec": {"suspend": False}})
    await eventually(lambda: jobs(api, ns)[0]["spec"]["suspend"] is False)
    await eventually(lambda: worker_pods(api, ns))
    await eventually(lambda: status(api, ns).get("phase") in ("Running", "Pending"))
    assert status(api, ns)["findingsTotal"] == 1


async def test_suspend_with_a_queue_leaves_job_suspend_to_kueue(api, ns, client, start_operator):
    await start_operator()
    await create(client, campaign(ns, workers=1, queueName="cpu-queue"))
    (job,) = await eventually(lambda: jobs(api, ns))
    assert job["spec"]["suspend"] is True  # created suspended; Kueue admits by unsuspending
    api.patch("batch/v1/jobs", ns, job["metadata"]["name"], {"spec": {"suspend": False}})  # "Kueue"
    await eventually(lambda: api.all("v1/pods", ns))

    await client.patch(fc_path(ns), {"spec": {"suspend": True}})
    # The operator does not fight Kueue over spec.suspend: it removes the worker Jobs.
    await eventually(lambda: jobs(api, ns) == [])
    await client.patch(fc_path(ns), {"spec": {"suspend": False}})
    (again,) = await eventually(lambda: jobs(api, ns))
    assert again["spec"]["suspend"] is True


def argocd_health(obj: dict) -> tuple[str, str]:
    """deploy/argocd/health.lua on an object, in Argo CD's sandbox (no io, os, require)."""
    lua = lupa.LuaRuntime(register_eval=False, register_builtins=False)
    for unsafe in ("io", "os", "require", "dofile", "loadfile", "package", "debug"):
        lua.globals()[unsafe] = None
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute((REPO_ROOT / "deploy" / "argocd" / "health.lua").read_text())
    return result["status"], result["message"]


async def test_a_campaign_waiting_in_kueue_is_steady_not_reconciling(api, ns, client, start_operator,
                                                                    worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=1, queueName="cpu-queue"))
    (job,) = await eventually(lambda: jobs(api, ns))
    # No Kueue here: its Job stays suspended, as when the queue's quota is taken for days.
    ready = await eventually(lambda: condition(api, ns, "Ready").get("reason") == "Queued"
                             and condition(api, ns, "Ready"))
    assert ready["status"] == "False" and "cpu-queue" in ready["message"]
    # Not converging (Flux's kstatus: Current, so `wait: true` is done), not stalled.
    assert condition(api, ns, "Reconciling")["status"] == "False"
    assert condition(api, ns, "Stalled")["status"] == "False"
    assert status(api, ns)["phase"] == "Pending"
    assert argocd_health(api.get(FC, ns, "nightly")) == ("Suspended", ready["message"])

    # Admitted ("Kueue" unsuspends the Job) and running: Ready.
    api.patch("batch/v1/jobs", ns, job["metadata"]["name"], {"spec": {"suspend": False}})
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.progress(3)
    await eventually(lambda: condition(api, ns, "Ready").get("status") == "True")
    assert argocd_health(api.get(FC, ns, "nightly"))[0] == "Healthy"


async def test_budget_reached_completes_and_suspends_workers(api, ns, client, start_operator,
                                                             worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=2, budget={"programs": 50}))
    await eventually(lambda: jobs(api, ns))
    w0, w1 = [await Worker(worker_kubeconfig, fc, f"main-{i}").start() for i in range(2)]
    await w0.progress(30)
    await w1.progress(20)

    st = await eventually(lambda: status(api, ns).get("phase") == "Completed" and status(api, ns))
    assert st["completionTime"]
    assert condition(api, ns, "Ready")["status"] == "True"
    await eventually(lambda: all(j["spec"]["suspend"] for j in jobs(api, ns)))


async def test_repeatedly_failing_workers_stall_then_the_job_is_recreated(api, ns, client,
                                                                         start_operator, node):
    node(images={"runner:crashing": ["sh", "-c", "echo engine crashed >&2; exit 1"]})
    await start_operator(jobs={"runner_image": "runner:crashing"})
    await create(client, campaign(ns, workers=2))
    (job,) = await eventually(lambda: jobs(api, ns))

    # Real pods fail for real: the Job controller counts them, the operator reads that.
    stalled = await eventually(lambda: condition(api, ns, "Stalled").get("status") == "True"
                               and condition(api, ns, "Stalled"), timeout=90)
    assert stalled["reason"] in ("WorkersFailing", "WorkerJobFailed")
    assert status(api, ns)["phase"] == "Stalled"
    assert condition(api, ns, "Ready")["status"] == "False"
    # A Job that failed for good is recreated (with backoff), not left failed forever.
    await eventually(lambda: any(j["metadata"]["uid"] != job["metadata"]["uid"]
                                 for j in jobs(api, ns)), timeout=120)


async def test_delete_removes_children_without_a_finalizer(api, ns, client, start_operator,
                                                           worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))
    await eventually(lambda: jobs(api, ns))
    # Nothing waits on the operator (test_deletion.py: with it stopped).
    assert not api.get(FC, ns, "nightly")["metadata"].get("finalizers")
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.progress(3)

    await client.delete(fc_path(ns))
    await eventually(lambda: api.get(FC, ns, "nightly") is None)
    await eventually(lambda: jobs(api, ns) == [])
    await eventually(lambda: api.all(f"{API}/workerreports", ns) == [])


async def test_restart_mid_campaign_duplicates_no_jobs_and_no_counts(api, ns, client, start_operator,
                                                                     worker_kubeconfig):
    first = await start_operator()
    fc = await create(client, campaign(ns, workers=2))
    await eventually(lambda: jobs(api, ns))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding("00000000000000aa", 1), finding("00000000000000aa", 2))
    await w.progress(10)
    await eventually(lambda: status(api, ns).get("findingsTotal") == 2)
    await first.stop()

    second = await start_operator()
    await w.find(finding("00000000000000aa", 3))
    await eventually(lambda: status(api, ns).get("findingsTotal") == 3)
    sig = await eventually(lambda: (s := api.get(f"{API}/bugsignatures", ns, "sig-00000000000000aa"))
                           and s["status"].get("count") == 3 and s)
    assert sig["status"]["hits"] == {"nightly/main-0": 3}
    assert len(jobs(api, ns)) == 1
    assert len(jobs(api, ns, "bisector")) == 1
    assert status(api, ns)["programs"] == 10
    # The restarted operator re-read every report; none of it was new to the signature.
    assert second.runtime.metrics.signatures.labels(ns, "mismatch", "new")._value.get() == 0


async def test_apiserver_restart_mid_campaign_loses_nothing(control_plane, api, ns, client,
                                                            start_operator, worker_kubeconfig):
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))
    await eventually(lambda: jobs(api, ns))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding("00000000000000aa", 1))
    await eventually(lambda: status(api, ns).get("findingsTotal") == 1)

    control_plane.restart_apiserver()
    # The operator's watches reconnect; what happens after the restart still arrives.
    await w.find(finding("00000000000000cc", 2))
    await w.progress(7)
    st = await eventually(lambda: status(api, ns).get("programs") == 7 and status(api, ns), timeout=90)
    assert st["findingsTotal"] == 2 and st["signatures"] == 2
    assert len(jobs(api, ns)) == 1
