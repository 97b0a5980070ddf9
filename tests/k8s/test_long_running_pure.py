"""A cluster that runs the operator for months, pure (no API). Upgrades: the revision and
the worker pods' spec cover what the workers compute from (the fields set, not the
defaulted whole), so an upgrade that adds a defaulted field recreates no Job or JobSet; how
the operator renders the pods is hashed into TEMPLATE_ANNOTATION, so a changed rendering
(env, failure policy, security context) replaces the running Jobs of the current revision
under the same names. Maintenance: grace period, bounded scratch, disruptions counted."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from inputs import specgen
from xla_sentinel.cluster.report import REVISION_LABEL
from xla_sentinel.spec.campaign import AlertSpec, CampaignSpec, GeneratorSpec, parse_spec
from xla_sentinel_operator import desired, jobsets, rollup
from xla_sentinel_operator.bodies import Job, Workload

V6E_4X4 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4}


def camp(**spec: Any) -> desired.Campaign:
    return desired.Campaign(name="nightly", namespace="fuzz", uid="u-1",
                            spec=parse_spec({"workers": 3, **spec}))


def stored(obj: Workload, condition: str | None = None) -> Job:
    """A created worker object as the roll-up reads it from kopf's index (handlers.py) or,
    for a slice JobSet, through jobsets.as_worker_job."""
    if obj.get("kind") == jobsets.KIND:
        status: dict[str, Any] = {}
        if condition is not None:
            status["conditions"] = [{"type": "Completed" if condition == "Complete" else condition,
                                     "status": "True"}]
        return jobsets.as_worker_job({**obj, "status": status})  # type: ignore[typeddict-item]
    meta = obj["metadata"]
    return {"metadata": {"name": meta["name"], "uid": f"uid-{meta['name']}",
                         "labels": dict(meta.get("labels") or {}),
                         "annotations": {k: v for k, v in (meta.get("annotations") or {}).items()
                                         if k == desired.TEMPLATE_ANNOTATION}},
            "spec": {"completions": 3, "suspend": False},
            "status": {"conditions": [{"type": condition, "status": "True"}]} if condition else {}}


def upgraded(cls: type, **added: tuple[type, Any]) -> type:
    """`cls` as a newer operator has it: the same fields plus `added`, each with a default."""
    return dataclasses.make_dataclass(
        cls.__name__, [(name, tp, dataclasses.field(default=default))
                       for name, (tp, default) in added.items()], bases=(cls,), frozen=True)


def same_values(cls: type, old: object) -> Any:
    return cls(**{f.name: getattr(old, f.name) for f in dataclasses.fields(old)})  # type: ignore[arg-type]


@pytest.mark.parametrize("accelerator", [None, V6E_4X4], ids=["job", "slice-jobset"])
def test_an_upgrade_that_adds_a_defaulted_field_recreates_no_job(accelerator: Any) -> None:
    old = camp(**({"accelerator": accelerator} if accelerator else {}),
               generator={"maxOps": 12})
    have = [stored(j) for j in desired.worker_jobs(old, default_image="img")]
    # The newer operator's spec has a new top-level field and a new generator field, both
    # defaulted: its parse of the same FuzzCampaign gives them their defaults.
    generator = same_values(upgraded(GeneratorSpec, newKnob=(bool, False)), old.spec.generator)
    spec = same_values(upgraded(CampaignSpec, retryPolicy=(str, "auto")), old.spec)
    spec = dataclasses.replace(spec, generator=generator)
    assert "retryPolicy" in spec.to_dict() and "newKnob" in spec.to_dict()["generator"]
    new = dataclasses.replace(old, spec=spec)

    assert desired.revision(new.spec) == desired.revision(old.spec)
    want = desired.worker_jobs(new, default_image="img")
    plan = desired.plan_workers(new, want, have, completed=False)
    assert (plan.create, plan.delete, plan.replace, plan.adopt) == ([], [], [], {})
    # The new fields reach no pod either: the workers' spec is the fields set.
    env = {e["name"]: e.get("value") for e in pod_of(want[0])["containers"][0]["env"]}
    assert json.loads(str(env["XLA_SENTINEL_SPEC"]))["generator"] == {"maxOps": 12}


def pod_of(obj: Workload) -> dict[str, Any]:
    if obj.get("kind") == jobsets.KIND:
        return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]  # type: ignore[typeddict-item]
    return obj["spec"]["template"]["spec"]  # type: ignore[typeddict-item]


def _more_env(original: Any) -> Any:
    def env(*args: Any) -> Any:
        return [*original(*args), {"name": "XLA_FLAGS", "value": "--xla_dump_to=/tmp/x"}]
    return env


CHANGES: dict[str, tuple[str, Any]] = {
    "security-context": ("CONTAINER_SECURITY",
                         lambda v: {**v, "capabilities": {"drop": ["ALL", "NET_RAW"]}}),
    "failure-policy": ("POD_FAILURE_POLICY", lambda v: {"rules": v["rules"][:1]}),
    "env": ("_worker_env", _more_env),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("accelerator", [None, V6E_4X4], ids=["job", "slice-jobset"])
def test_a_changed_rendering_replaces_the_running_jobs_under_the_same_names(
        monkeypatch: pytest.MonkeyPatch, change: str, accelerator: Any) -> None:
    c = camp(**({"accelerator": accelerator} if accelerator else {}))
    before = desired.worker_jobs(c, default_image="img")
    running = [stored(j) for j in before]
    attr, edit = CHANGES[change]
    monkeypatch.setattr(desired, attr, edit(getattr(desired, attr)))
    if change == "failure-policy":  # slices take theirs from it
        monkeypatch.setattr(desired, "SLICE_POD_FAILURE_POLICY",
                            {"rules": desired.SLICE_POD_FAILURE_POLICY["rules"][:1]})
    want = desired.worker_jobs(c, default_image="img")
    assert [j["metadata"]["name"] for j in want] == [j["metadata"]["name"] for j in before]
    assert desired.revision(c.spec) == want[0]["metadata"]["labels"][REVISION_LABEL]

    plan = desired.plan_workers(c, want, running, completed=False)
    assert plan.replace == sorted(j["metadata"]["name"] for j in running)
    assert (plan.create, plan.delete, plan.adopt) == ([], [], {})
    # Replaced, they are missing: the next pass creates them as rendered now.
    again = desired.plan_workers(c, want, [], completed=False)
    assert [j["metadata"]["name"] for j in again.create] == [j["metadata"]["name"] for j in want]


def test_finished_jobs_and_stopped_campaigns_keep_their_rendering(
        monkeypatch: pytest.MonkeyPatch) -> None:
    c = camp(targets=[{"name": "default"}, {"name": "O0"}, {"name": "old", "image": "runner:old"}])
    main, old = desired.worker_jobs(c, default_image="img")
    monkeypatch.setattr(desired, "CONTAINER_SECURITY", {**desired.CONTAINER_SECURITY,
                                                        "privileged": False})
    want = desired.worker_jobs(c, default_image="img")
    have = [stored(main, "Complete"), stored(old)]
    assert desired.plan_workers(c, want, have, completed=False).replace == [old["metadata"]["name"]]
    assert desired.plan_workers(c, want, have, completed=True).replace == []
    suspended = dataclasses.replace(c, spec=dataclasses.replace(c.spec, suspend=True))
    assert desired.plan_workers(suspended, want, have, completed=False).replace == []


def test_jobs_an_older_operator_made_are_adopted_not_replaced() -> None:
    c = camp()
    (job,) = desired.worker_jobs(c, default_image="img")
    live = stored(job)
    live["metadata"]["annotations"] = {}
    plan = desired.plan_workers(c, [job], [live], completed=False)
    assert plan.adopt == {job["metadata"]["name"]: desired.template_hash(job)}
    assert (plan.create, plan.delete, plan.replace) == ([], [], [])


def test_the_hash_leaves_out_suspend_which_the_operator_and_kueue_flip() -> None:
    (running,) = desired.worker_jobs(camp(), default_image="img")
    (stopped,) = desired.worker_jobs(camp(suspend=True), default_image="img")
    (queued,) = desired.worker_jobs(camp(queueName="tpu"), default_image="img")
    assert running["spec"]["suspend"] != stopped["spec"]["suspend"]
    assert desired.template_hash(running) == desired.template_hash(stopped)
    # A queue is a label the rendering carries: a new queue is a new rendering (and revision).
    assert desired.template_hash(running) != desired.template_hash(queued)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specgen.valid_specs(crd=True))
def test_the_workers_read_back_the_spec_from_its_fields_set(data: dict[str, Any]) -> None:
    spec = parse_spec(data)
    sent = json.loads(json.dumps(desired.worker_spec(spec)))
    back = parse_spec(sent)
    assert back == dataclasses.replace(spec, suspend=False, alerts=AlertSpec(), agents=None, minWorkers=None,
                                       provisioning=None)
    # Nothing at its default is sent: what the operator's defaults add is not in the hash.
    for key, value in sent.items():
        assert value != dataclasses.asdict(CampaignSpec()).get(key, object()), key


# --- Maintenance: what a worker pod holds of its node, and how long it may take to stop.


def test_worker_pods_wait_for_the_device_owner_and_bound_their_scratch() -> None:
    for c in (camp(), camp(accelerator=V6E_4X4)):
        for obj in desired.worker_jobs(c, default_image="img"):
            pod = pod_of(obj)
            # The device owner may take 30 s to let go of the chips after SIGTERM.
            assert pod["terminationGracePeriodSeconds"] > 30
            limits = {v["name"]: v["emptyDir"].get("sizeLimit") for v in pod["volumes"]
                      if "emptyDir" in v}
            assert limits == {"artifacts": "8Gi", "tmp": "2Gi"}
            requests = pod["containers"][0]["resources"]["requests"]
            assert requests["ephemeral-storage"] == "1Gi"


def test_ephemeral_storage_requests_leave_the_users_and_kueues_alone() -> None:
    def requests(c: desired.Campaign) -> dict[str, Any]:
        (job,) = desired.worker_jobs(c, default_image="img")
        return dict(pod_of(job)["containers"][0]["resources"].get("requests") or {})

    assert requests(camp(resources={"requests": {"ephemeral-storage": "20Gi"}})) == {
        "ephemeral-storage": "20Gi"}
    # A limit alone: Kubernetes makes it the request too; a 1Gi request could exceed it.
    assert "ephemeral-storage" not in requests(camp(resources={"limits": {"ephemeral-storage": "512Mi"}}))
    # A queued campaign: Kueue would not admit a resource its ClusterQueue does not cover.
    assert "ephemeral-storage" not in requests(camp(queueName="cpu-queue"))
    pvc = camp(artifacts={"pvc": "findings"})
    (job,) = desired.worker_jobs(pvc, default_image="img")
    assert {v["name"] for v in pod_of(job)["volumes"] if "emptyDir" in v} == {"tmp"}


def pod(name: str, job: str = "job-uid-1", *, reason: str | None = "TerminationByKubelet",
        evicted: bool = False, time: str = "2026-12-01T10:00:00Z") -> dict[str, Any]:
    """A worker pod as the API returns it after a disruption (or none: reason None)."""
    status: dict[str, Any] = {"phase": "Failed", "startTime": "2026-12-01T09:00:00Z",
                              "conditions": [{"type": "Ready", "status": "False"}]}
    if reason is not None:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": reason,
                                     "message": "The node was low on resource: ephemeral-storage.",
                                     "lastTransitionTime": time})
    if evicted:
        status["reason"] = "Evicted"
    return {"metadata": {"name": name, "labels": {"batch.kubernetes.io/controller-uid": job,
                                                  REVISION_LABEL: "r1"}},
            "status": status}


def test_only_disrupted_pods_are_kept_by_the_pod_index() -> None:
    assert rollup.disrupted_pod(pod("ok", reason=None)) is None
    kept = rollup.disrupted_pod(pod("p1"))
    assert kept is not None and (kept["job"], kept["reason"], kept["revision"]) == (
        "job-uid-1", "TerminationByKubelet", "r1")
    # The kubelet's eviction of old (no DisruptionTarget condition): status.reason.
    old = rollup.disrupted_pod(pod("p2", reason=None, evicted=True))
    assert old is not None and old["reason"] == "Evicted"


def test_an_eviction_loop_is_counted_in_status_and_stays_counted() -> None:
    spec = parse_spec({"workers": 2})
    rev = desired.revision(spec)
    now = datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
    job = {"metadata": {"name": "j", "uid": "job-uid-1",
                        "labels": {REVISION_LABEL: rev, desired.GROUP_LABEL: "main"}},
           "spec": {"completions": 2}, "status": {"active": 2}}
    first = [rollup.disrupted_pod(pod(f"p{i}", time=f"2026-12-01T10:0{i}:00Z")) for i in range(3)]
    st = rollup.status(spec, 1, [job], [], rev, {}, now, [p for p in first if p])
    d = st["disruptions"]
    assert (d["total"], d["byReason"], d["seen"]) == (3, {"TerminationByKubelet": 3}, {"job-uid-1": 3})
    assert d["last"]["pod"] == "p2"
    # Two more evictions and a drain: counted once each, by reason.
    drained = rollup.disrupted_pod(pod("p9", reason="EvictionByEvictionAPI", time="2026-12-01T10:09:00Z"))
    again = [rollup.disrupted_pod(pod(f"p{i}", time=f"2026-12-01T10:0{i}:00Z")) for i in range(5)]
    st2 = rollup.status(spec, 1, [job], [], rev, st, now, [p for p in [*again, drained] if p])
    d2 = st2["disruptions"]
    assert d2["total"] == 6 and d2["byReason"] == {"TerminationByKubelet": 5, "EvictionByEvictionAPI": 1}
    assert d2["seen"] == {"job-uid-1": 6} and d2["last"]["pod"] == "p9"
    # The garbage collector removed the oldest pods: the count does not shrink.
    st3 = rollup.status(spec, 1, [job], [], rev, st2, now, [p for p in again[3:] if p])
    assert (st3["disruptions"]["total"], st3["disruptions"]["seen"]) == (6, {"job-uid-1": 6})
    # Nothing disrupted: nothing counted, and the status says so.
    assert rollup.status(spec, 1, [job], [], rev, {}, now)["disruptions"] == {
        "total": 0, "byReason": {}, "seen": {}}


# --- Steady load: a common signature's hits stay far below etcd's object limit.


def _apply(status: dict[str, Any], update: dict[str, Any] | None) -> dict[str, Any]:
    """A merge patch of the status subresource, as the API server applies it."""
    if update is None:
        return status
    out = {**status, **{k: v for k, v in update.items() if k != "hits"}}
    hits = dict(status.get("hits") or {})
    for k, v in (update.get("hits") or {}).items():
        if v is None:
            hits.pop(k, None)
        else:
            hits[k] = v
    out["hits"] = hits
    return out


def test_a_common_signatures_hits_stay_bounded_and_its_count_whole() -> None:
    from xla_sentinel.cluster.report import SignatureEntry
    from xla_sentinel_operator import signatures

    status: dict[str, Any] = {}
    total = 0
    # 1,024 workers over three revisions of one campaign, each hitting the bug 3 times.
    for rev in ("r1", "r2", "r3"):
        for w in range(1024):
            entry = SignatureEntry(verdict="mismatch", count=3)
            status = _apply(status, signatures.hits_update(
                status, "nightly", f"main-{w}", entry, rev, current=rev))  # type: ignore[arg-type]
            total += 3
    assert len(status["hits"]) == signatures.HITS_MAX
    assert status["count"] == total == status["hitsRetired"] + sum(status["hits"].values())
    assert len(json.dumps(status["hits"])) < 64 * 1024  # etcd takes 1.5 MiB per object
    # Older revisions were let go first: what is left is the current revision's.
    assert {k.split("/")[1] for k in status["hits"]} == {"r3"}
    # The current revision's workers count on: re-reading a report changes nothing, a
    # higher cumulative count adds only its increase.
    kept = next(iter(status["hits"]))
    worker = kept.split("/")[2]
    again = signatures.hits_update(status, "nightly", worker,  # type: ignore[arg-type]
                                   SignatureEntry(verdict="mismatch", count=3), "r3", current="r3")
    assert again is None
    status = _apply(status, signatures.hits_update(
        status, "nightly", worker, SignatureEntry(verdict="mismatch", count=5), "r3", current="r3"))  # type: ignore[arg-type]
    assert status["count"] == total + 2
    # An old revision's report read again (re-ingestion) after its key was let go: not
    # counted twice.
    assert signatures.hits_update(status, "nightly", "main-0",  # type: ignore[arg-type]
                                  SignatureEntry(verdict="mismatch", count=3), "r1", current="r3") is None


# --- Steady load: what the operator holds in memory does not grow with revisions.


def test_the_reports_index_holds_reports_without_their_samples() -> None:
    from xla_sentinel.cluster.report import WorkerReport
    from xla_sentinel_operator import ingest

    report = WorkerReport(worker="main-0", revision="r1", programs=5000, executions=15000)
    for i in range(100):
        for j in range(3):
            report.add_finding({"id": f"f{i}-{j}", "signature": f"{i:016x}", "verdict": "mismatch",
                                "target": "default", "dir": f"finding-{i}-{j}" + "x" * 60,
                                "culprit_op": "dot_general", "message": "m" * 200})
    report.coverage = {"programs": 5000, "ops": {f"op{i}": i for i in range(300)}}
    small = ingest.slim(report)
    assert len(small.to_json()) * 4 < len(report.to_json())
    # The roll-up reads the same from it.
    assert rollup.counters([small]) == rollup.counters([report])
    assert small.findings_by_verdict() == report.findings_by_verdict()
    assert ingest.fingerprint(small) != ingest.fingerprint(report)  # catch_up reads the whole


def test_a_new_revision_lets_go_of_the_older_revisions_hit_counts() -> None:
    from xla_sentinel_operator.config import Config, MetricsConfig
    from xla_sentinel_operator.runtime import Runtime

    rt = Runtime(Config(metrics=MetricsConfig(port=None)))
    for rev in ("r1", "r2"):
        for w in range(1000):
            rt.hits_seen[("fuzz", "00aa", f"nightly/{rev}/main-{w}")] = 3
    rt.hits_seen[("fuzz", "00aa", "other/r1/main-0")] = 1
    rt.revision_seen("fuzz", "nightly", "r1")
    assert len(rt.hits_seen) == 2001  # the first roll-up: nothing to let go
    rt.revision_seen("fuzz", "nightly", "r2")
    assert {k[2].split("/")[1] for k in rt.hits_seen if k[2].startswith("nightly/")} == {"r2"}
    assert ("fuzz", "00aa", "other/r1/main-0") in rt.hits_seen
    rt.ingested[("fuzz", "nightly-report-r1-main-0")] = "fp"
    rt.forget_report("fuzz", "nightly-report-r1-main-0")
    assert not rt.ingested
    rt.forget("fuzz", "nightly", uid="u-1")  # the campaign deleted
    assert list(rt.hits_seen) == [("fuzz", "00aa", "other/r1/main-0")]
