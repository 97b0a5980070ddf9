"""The worker side of the channel: K8sReporter (real kubernetes client, logged in as the
chart's worker ServiceAccount) against the real API server, with fake finding records (no
jax); what that identity may and may not touch; and the worker entrypoint's input handling."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException
from xla_sentinel.cluster import pod as worker_main
from xla_sentinel.cluster.report import Limits, WorkerReport, report_from_object
from xla_sentinel.cluster.reporter import K8sReporter
from xla_sentinel_operator.kube import path

from .conftest import API, campaign, create, eventually
from .workers import Worker, finding, reports_api

REPORTS = f"{API}/workerreports"


def stored(api, ns: str, name: str = "nightly-report-main-0") -> WorkerReport:
    report = report_from_object(api.get(REPORTS, ns, name))
    assert report is not None
    return report


async def test_report_is_owned_by_the_campaign_and_labelled(api, ns, client, worker_kubeconfig):
    fc = await create(client, campaign(ns))
    await Worker(worker_kubeconfig, fc, "main-0").start()
    obj = api.get(REPORTS, ns, "nightly-report-main-0")
    assert obj["metadata"]["ownerReferences"][0]["uid"] == fc["metadata"]["uid"]
    assert obj["metadata"]["labels"] == {"xlasentinel.dev/campaign": "nightly",
                                         "xlasentinel.dev/worker": "main-0",
                                         "xlasentinel.dev/report": "true"}


async def test_each_finding_is_written_before_the_engine_goes_on(api, ns, client, worker_kubeconfig):
    fc = await create(client, campaign(ns))
    w = await Worker(worker_kubeconfig, fc, "main-0", samples=2).start()
    await w.find(finding("00000000000000aa", 1))
    assert stored(api, ns).signatures["00000000000000aa"].count == 1
    await w.find(finding("00000000000000aa", 2), finding("00000000000000aa", 3))
    entry = stored(api, ns).signatures["00000000000000aa"]
    assert entry.count == 3 and len(entry.samples) == 2
    assert "evidence" not in entry.samples[0]  # evidence stays in the artifact store


async def test_a_repeated_finding_id_writes_nothing(api, ns, client, worker_kubeconfig):
    fc = await create(client, campaign(ns))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding("00000000000000aa", 1))
    version = api.get(REPORTS, ns, "nightly-report-main-0")["metadata"]["resourceVersion"]
    await w.find(finding("00000000000000aa", 1))
    assert api.get(REPORTS, ns, "nightly-report-main-0")["metadata"]["resourceVersion"] == version


async def test_a_restarted_worker_resumes_its_report(api, ns, client, worker_kubeconfig):
    fc = await create(client, campaign(ns))
    first = await Worker(worker_kubeconfig, fc, "main-0").start()
    await first.find(finding("00000000000000aa", 1))
    await first.progress(programs=10, executions=40, elapsed_s=5.0)
    second = await Worker(worker_kubeconfig, fc, "main-0").start()
    await second.progress(programs=4, executions=16, elapsed_s=2.0)
    r = stored(api, ns)
    assert (r.attempts, r.programs, r.executions, r.elapsed_s) == (2, 10, 40, 7.0)
    assert r.findings_total() == 1
    await second.progress(programs=12, executions=50, elapsed_s=6.0)
    await second.close()
    r = stored(api, ns)
    assert (r.programs, r.executions, r.done) == (12, 50, True)


async def test_a_report_that_would_exceed_the_object_size_limit(api, ns, client, start_operator,
                                                                worker_kubeconfig):
    """Issue 11's case: with the bounds lifted, a report grows past what the API server takes
    (spec.report's 1 MiB). The real API server refuses it (422); the worker does not die or
    go silent: the refusal is in its report object, the campaign's status and an Event, its
    counts are kept, and the next write that fits clears it."""
    await start_operator()
    fc = await create(client, campaign(ns, workers=1))
    unbounded = Limits(signatures=1000, samples=1, field_chars=1 << 20, cap=1 << 30)
    r = K8sReporter(reports_api(worker_kubeconfig), namespace=ns, campaign="nightly",
                    campaign_uid=fc["metadata"]["uid"], worker="main-0", progress_interval=0.0,
                    limits=unbounded)
    await asyncio.to_thread(r.start)
    big = "p" * 200_000
    for n in range(6):  # 6 signatures x 200 kB samples: 1.2 MB of report JSON
        await asyncio.to_thread(r.finding, {**finding(f"{n:016x}", n), "program": big})
    obj = api.get(REPORTS, ns, "nightly-report-main-0")
    assert "refused by the API server (422" in obj["spec"]["error"]
    assert len(report_from_object(obj).signatures) == 5  # the last report that fitted
    assert r.mine.findings_total() == 6  # the worker kept counting
    event = await eventually(lambda: [e for e in api.all("v1/events", ns)
                                      if e.get("reason") == "ReportRefused"])
    assert event[0]["involvedObject"]["kind"] == "FuzzCampaign" and event[0]["type"] == "Warning"
    st = await eventually(lambda: (api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status") or {})
                          .get("reportErrors"))
    assert st[0]["worker"] == "main-0" and "422" in st[0]["error"]
    # Back within the limit (the bounds a real worker runs with): the next write goes
    # through and clears the error.
    r.limits = Limits(samples=1)
    r.mine.signatures["0000000000000005"].samples[0]["program"] = "p5"
    for entry in r.mine.signatures.values():
        entry.samples = [{**s, "program": s["program"][:100]} for s in entry.samples]
    r.base = WorkerReport(worker="main-0")
    await asyncio.to_thread(r.progress, {"programs": 9, "executions": 9, "elapsed_s": 1.0})
    obj = api.get(REPORTS, ns, "nightly-report-main-0")
    assert "error" not in obj["spec"] and report_from_object(obj).findings_total() == 6
    await eventually(lambda: (api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status") or {})
                     .get("reportErrors") == [])


def test_a_workerreport_holds_a_report_or_a_result_and_keeps_its_revision(api, ns):
    """The CRD's rules, as the API server applies them (422 with the rule's message)."""
    base = {"apiVersion": API, "kind": "WorkerReport", "metadata": {"name": "r", "namespace": ns},
            "spec": {"campaign": "nightly", "worker": "main-0"}}
    reports = path(API, "workerreports", ns)
    for spec in ({}, {"report": "{}", "result": "{}"}):
        code, out = api.request("POST", reports, {**base, "spec": {**base["spec"], **spec}})
        assert code == 422 and "either a worker's report or a Job's result" in out["message"]
    api.create(REPORTS, ns, {**base, "spec": {**base["spec"], "report": "{}", "revision": "a"}})
    code, out = api.request("PATCH", f"{reports}/r", {"spec": {"revision": "b"}},
                            "application/merge-patch+json")
    assert code == 422 and "revision cannot change" in out["message"]


def test_the_worker_identity_reads_no_configmap_secret_or_campaign(api, ns, worker_kubeconfig):
    """What a compromised worker pod cannot do with the chart's RBAC (the API server's 403)."""
    client = kubernetes.config.new_client_from_config(config_file=str(worker_kubeconfig))
    core, custom = kubernetes.client.CoreV1Api(client), kubernetes.client.CustomObjectsApi(client)
    for call in (lambda: core.list_namespaced_config_map(ns),
                 lambda: core.list_namespaced_secret(ns),
                 lambda: custom.list_namespaced_custom_object("xlasentinel.dev", "v1alpha1", ns,
                                                              "workerreports"),
                 lambda: custom.patch_namespaced_custom_object(
                     "xlasentinel.dev", "v1alpha1", ns, "bugsignatures", "sig-x", {"spec": {}}),
                 lambda: core.list_namespaced_pod("default")):
        with pytest.raises(ApiException) as refused:
            call()
        assert refused.value.status == 403


def test_worker_refuses_a_bad_spec_with_one_line(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "spec.yaml"
    spec.write_text("workers: 0\n")
    assert worker_main.main(["--spec-file", str(spec), "--report", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: spec.workers: must be between 1 and 4096"]


def test_worker_refuses_a_shard_outside_the_campaign(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XLA_SENTINEL_SPEC", json.dumps({"workers": 2}))
    assert worker_main.main(["--shard-index", "2", "--report", "none"]) == 2
    assert "--shard-index: 2 is outside [0, 2)" in capsys.readouterr().err


def test_worker_spec_from_env_is_cut_to_its_group_targets(monkeypatch):
    monkeypatch.setenv("XLA_SENTINEL_SPEC", json.dumps({"targets": [{"name": "default"}, {"name": "old", "image": "x"}]}))
    args = worker_main._parser().parse_args(["--targets", "old"])
    assert [t.name for t in worker_main.load_spec(args).targets] == ["old"]
    args = worker_main._parser().parse_args(["--targets", "nope"])
    with pytest.raises(worker_main.SpecError, match="--targets: 'nope'"):
        worker_main.load_spec(args)


def test_worker_without_a_spec_names_the_variable(monkeypatch, capsys):
    monkeypatch.delenv("XLA_SENTINEL_SPEC", raising=False)
    monkeypatch.delenv("XLA_SENTINEL_SPEC_FILE", raising=False)
    assert worker_main.main(["--report", "none"]) == 2
    assert "XLA_SENTINEL_SPEC: not set" in capsys.readouterr().err


def test_operator_and_reporter_never_import_jax():
    code = ("import sys; import xla_sentinel_operator.main, xla_sentinel_operator.handlers, "
            "xla_sentinel.cluster.report, xla_sentinel.cluster.reporter, xla_sentinel.cluster.pod; "
            "bad = sorted(m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'jaxlib'))); "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_program_budget_is_dealt_to_shards_round_robin():
    from xla_sentinel.spec.campaign import BudgetSpec

    shares = [worker_main.shard_budget(BudgetSpec(programs=10), i, 4) for i in range(4)]
    assert [s.programs for s in shares] == [3, 3, 2, 2]
    assert worker_main.shard_budget(BudgetSpec(programs=2), 3, 4) is None
    assert worker_main.shard_budget(BudgetSpec(seconds=60), 3, 4) == BudgetSpec(seconds=60)
