"""The pure functions under the handlers: spec -> Jobs, children -> status, findings ->
signature updates and alert decisions. No API involved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from xla_sentinel.cluster.report import SignatureEntry, WorkerReport
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, rollup, signatures

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def camp(**spec) -> desired.Campaign:
    return desired.Campaign(name="nightly", namespace="fuzz", uid="u-1", spec=parse_spec(spec))


def test_gpu_campaign_requests_gpus_on_the_named_accelerator():
    (job,) = desired.worker_jobs(camp(accelerator={"type": "gpu", "gpuType": "nvidia-l4", "count": 2},
                                      nodeSelector={"pool": "fuzz"}), default_image="img")
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "fuzz", "cloud.google.com/gke-accelerator": "nvidia-l4"}
    res = pod["containers"][0]["resources"]
    assert res["limits"]["nvidia.com/gpu"] == res["requests"]["nvidia.com/gpu"] == "2"
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_cpu_campaign_has_no_accelerator_fields():
    (job,) = desired.worker_jobs(camp(resources={"requests": {"cpu": "2"}}), default_image="img")
    pod = job["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod and "tolerations" not in pod
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "2", "ephemeral-storage": "1Gi"}}
    assert pod["containers"][0]["image"] == "img"


def test_cross_version_targets_get_their_own_job_and_image():
    c = camp(targets=[{"name": "default"}, {"name": "O0"},
                      {"name": "old", "image": "runner:jaxlib-0.4.30"}])
    main, old = desired.worker_jobs(c, default_image="runner:new")
    env = lambda job: {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}  # noqa: E731
    assert env(main)["XLA_SENTINEL_TARGETS"] == "default,O0"
    assert env(old)["XLA_SENTINEL_TARGETS"] == "old"
    assert old["spec"]["template"]["spec"]["containers"][0]["image"] == "runner:jaxlib-0.4.30"
    assert main["metadata"]["name"] != old["metadata"]["name"]


def test_revision_changes_with_worker_fields_but_not_with_suspend_or_alerts():
    base = camp(workers=2)
    assert desired.revision(base.spec) == desired.revision(camp(workers=2, suspend=True).spec)
    assert desired.revision(base.spec) == desired.revision(camp(workers=2, alerts={"teams": ["a"]}).spec)
    assert desired.revision(base.spec) != desired.revision(camp(workers=3).spec)


def test_names_fit_in_a_dns_label():
    name = desired.dns_label("c" * 80, "main", "0123456789")
    assert len(name) <= 63 and name == desired.dns_label("c" * 80, "main", "0123456789")
    assert name != desired.dns_label("c" * 80, "main", "9876543210")


def test_bisector_job_points_at_the_finding_on_the_artifact_store():
    c = camp(artifacts={"pvc": "fuzz-artifacts"})
    job = desired.bisector_job(c, {"id": "abcdef0123456789ff", "signature": "00aa", "dir": "findings/f1"},
                               "main-3", default_image="img")
    runner = job["spec"]["template"]["spec"]["containers"][0]
    assert runner["args"] == ["worker", "--bisect", "/artifacts/nightly/main-3/findings/f1",
                              "--signature", "00aa"]  # writes its result back (a WorkerReport)
    assert job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "fuzz-artifacts"}


def job(name: str, rev: str, **status) -> dict:
    return {"metadata": {"name": name, "labels": {desired.REVISION_LABEL: rev}},
            "spec": {"completions": 10}, "status": status}


def report(worker: str, programs: int, **sigs: int) -> WorkerReport:
    r = WorkerReport(worker=worker, programs=programs, executions=programs * 3)
    for sig, n in sigs.items():
        for i in range(n):
            r.add_finding({"id": f"{worker}-{sig}-{i}", "signature": sig, "verdict": "crash"})
    return r


def test_phase_follows_children():
    spec = parse_spec({"workers": 10, "budget": {"programs": 100}})
    phase = lambda jobs, reports=(): rollup.health(spec, jobs, list(reports), "r1", sum(r.programs for r in reports), NOW, NOW)  # noqa: E731
    assert phase([]).phase == "Pending"
    assert phase([job("a", "r1", active=3, ready=3)], [report("main-0", 5)]).phase == "Running"
    assert phase([job("a", "r1", active=3)]).phase == "Pending"  # Pending pods do not run
    assert phase([job("a", "r1"), job("old", "r0")]).reason == "RollingWorkers"
    assert phase([job("a", "r1", active=1)], [report("main-0", 60), report("main-1", 40)]).phase == "Completed"
    assert phase([job("a", "r1", conditions=[{"type": "Complete", "status": "True"}])]).phase == "Completed"
    failed = phase([job("a", "r1", conditions=[{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}])])
    assert (failed.phase, failed.reason) == ("Stalled", "WorkerJobFailed") and "BackoffLimitExceeded" in failed.message
    assert phase([job("a", "r1", failed=2, active=8, ready=8)]).phase == "Running"  # below the limit: preemptions


def test_seconds_budget_completes_after_the_duration():
    spec = parse_spec({"budget": {"seconds": 60}})
    assert not rollup.budget_spent(spec, 0, NOW, NOW + timedelta(seconds=59))
    assert rollup.budget_spent(spec, 0, NOW, NOW + timedelta(seconds=60))
    assert not rollup.budget_spent(parse_spec({"budget": {"continuous": True}}), 10**9, NOW, NOW + timedelta(days=300))


def test_status_counts_and_keeps_transition_times():
    spec = parse_spec({"workers": 2})
    reports = [report("main-1", 5, aa=1), report("main-0", 7, aa=2, bb=1)]
    first = rollup.status(spec, 3, [job("a", "r1", active=2)], reports, "r1", {}, NOW)
    assert (first["programs"], first["executions"], first["findingsTotal"], first["signatures"]) == (12, 36, 4, 2)
    assert [w["worker"] for w in first["workerSummary"]] == ["main-0", "main-1"]
    assert {c["type"]: c["observedGeneration"] for c in first["conditions"]} == {"Ready": 3, "Reconciling": 3, "Stalled": 3}
    later = rollup.status(spec, 3, [job("a", "r1", active=2)], reports, "r1", first, NOW + timedelta(minutes=5))
    assert later["conditions"] == first["conditions"]
    assert later["startTime"] == first["startTime"]


def entry(count: int, first: str = "2026-11-29T10:00:00Z", last: str = "2026-11-29T10:05:00Z") -> SignatureEntry:
    return SignatureEntry(verdict="mismatch", count=count, first_seen=first, last_seen=last)


def test_hits_are_set_not_added_so_rereading_a_report_changes_nothing():
    status = {}
    update = signatures.hits_update(status, "nightly", "main-0", entry(2))
    status.update(update)
    assert status["count"] == 2
    assert signatures.hits_update(status, "nightly", "main-0", entry(2)) is None
    status.update(signatures.hits_update(status, "weekly", "main-0", entry(3, first="2026-11-28T00:00:00Z")))
    assert status["count"] == 5 and status["campaigns"] == ["nightly", "weekly"]
    assert status["firstSeen"] == "2026-11-28T00:00:00Z"


def test_alert_keys_give_one_alert_per_new_and_per_regression():
    assert signatures.due_alert({"state": "new"}, {}) == "new"
    assert signatures.due_alert({"state": "new"}, {"alertKey": "new"}) is None
    assert signatures.due_alert({"state": "triaged"}, {}) is None
    assert signatures.due_alert({"state": "regressed"}, {"alertKey": "new", "regressions": 1}) == "regressed-1"
    assert signatures.due_alert({"state": "regressed"}, {"alertKey": "regressed-1", "regressions": 1}) is None
    # regressed() is asked on a new hit only (test_lifecycle_pure has the version rules).
    assert signatures.regressed({"state": "fixed"}, {"fixedAt": "t"}, {"jaxlib": "0.10.2"})
    assert not signatures.regressed({"state": "triaged"}, {}, {"jaxlib": "0.10.2"})


def test_alerts_are_an_alertmanager_v2_array():
    sig = {"metadata": {"name": "sig-aa", "namespace": "fuzz"},
           "spec": {"signature": "00000000000000aa", "verdict": "crash", "culpritOp": "dot", "teams": ["t1"]},
           "status": {"count": 3, "campaigns": ["nightly"], "firstSeen": "2026-11-29T10:00:00Z"}}
    body = signatures.alerts(sig, "new", now=NOW, external_url="https://dash/x")
    (alert,) = body
    assert set(alert) == {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}
    assert alert["labels"]["alertname"] == "XlaSentinelBugSignature"
    assert alert["labels"]["culprit_op"] == "dot" and alert["startsAt"] == "2026-11-29T10:00:00Z"
    # Firing for RESEND_HOLD re-send intervals (4 x 60 s by default), sent again before then.
    assert alert["endsAt"] == "2026-11-29T12:04:00Z" and alert["generatorURL"] == "https://dash/x"


def test_new_signature_takes_fields_from_the_first_sample():
    e = entry(1)
    e.samples.append({"id": "f1", "signature": "00aa", "target": "O0", "culprit_op": "reduce",
                      "culprit_pass": None, "fusion_kind": "kLoop", "dtype": "bf16", "dir": "findings/f1"})
    body = signatures.new_signature(camp(alerts={"teams": ["xla"]}), "main-1", "00000000000000aa", e)
    spec = body["spec"]
    assert (spec["culpritOp"], spec["fusionKind"], spec["dtype"], spec["targets"]) == ("reduce", "kLoop", "bf16", ["O0"])
    assert "culpritPass" not in spec
    assert body["metadata"]["labels"]["xlasentinel.dev/team-xla"] == "true"


def test_engine_processes_follow_the_cpu_request():
    assert desired.processes(parse_spec({"resources": {"requests": {"cpu": "4"}}})) == 4
    assert desired.processes(parse_spec({"resources": {"requests": {"cpu": "2500m"}}})) == 2
    assert desired.processes(parse_spec({"resources": {"requests": {"cpu": "250m"}}})) == 1
    assert desired.processes(parse_spec({})) == 1


def test_new_signature_lists_every_configuration_of_a_grouped_signature():
    # One bug the engine grouped over four configurations keeps only 3 samples: the
    # BugSignature's targets come from its configurations list, so the fourth is not lost.
    e = entry(1)
    e.configurations = ["default", "O0", "no_fusion_emitters", "f64_jit"]
    e.samples.extend({"id": f"f{i}", "signature": "00aa", "target": t}
                     for i, t in enumerate(["default", "O0", "no_fusion_emitters"]))
    spec = signatures.new_signature(camp(), "main-1", "00000000000000aa", e)["spec"]
    assert spec["targets"] == sorted(["default", "O0", "no_fusion_emitters", "f64_jit"])
