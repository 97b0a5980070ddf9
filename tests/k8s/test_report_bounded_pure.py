"""Bounded worker reports without the API: size and write rate whatever the campaign's
length, overflow past the signature limit, and the join that keeps restarted and
overlapping pods from counting anything twice (a fake API with resourceVersion checks)."""

from __future__ import annotations

import copy
import json
import random

from kubernetes.client.exceptions import ApiException
from xla_sentinel.cluster.report import (
    LIMITS,
    Limits,
    SignatureEntry,
    WorkerReport,
    merge,
    report_from_object,
)
from xla_sentinel.cluster.reporter import K8sReporter

from .workers import finding


class FakeReports:
    """A WorkerReport store that behaves as the API server does where it matters here:
    merge patches, resourceVersion preconditions (409) and a size limit (422)."""

    def __init__(self, max_report: int = 1 << 20) -> None:
        self.objects: dict[str, dict] = {}
        self.version = 0
        self.max_report = max_report
        self.patches = 0

    def _bump(self, obj: dict) -> dict:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(obj)

    def get_namespaced_custom_object(self, group, version, ns, plural, name):
        if name not in self.objects:
            raise ApiException(status=404)
        return copy.deepcopy(self.objects[name])

    def create_namespaced_custom_object(self, group, version, ns, plural, body):
        name = body["metadata"]["name"]
        if name in self.objects:
            raise ApiException(status=409)
        self.objects[name] = copy.deepcopy(body)
        return self._bump(self.objects[name])

    def patch_namespaced_custom_object(self, group, version, ns, plural, name, patch, **_):
        obj = self.objects[name]
        rv = (patch.get("metadata") or {}).get("resourceVersion")
        if rv is not None and rv != obj["metadata"]["resourceVersion"]:
            raise ApiException(status=409)
        report = patch["spec"].get("report")
        if report is not None and len(report) > self.max_report:
            raise ApiException(status=422, reason="Unprocessable Entity")
        self.patches += 1
        for k, v in patch["spec"].items():
            if v is None:
                obj["spec"].pop(k, None)
            else:
                obj["spec"][k] = v
        return self._bump(obj)

    def report(self, name: str = "nightly-report-main-0") -> WorkerReport:
        r = report_from_object(self.objects[name])
        assert r is not None
        return r


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def reporter(api: FakeReports, clock: Clock | None = None, **kw) -> K8sReporter:
    return K8sReporter(api, namespace="ns", campaign="nightly", campaign_uid="", worker="main-0",
                       clock=clock or Clock(), **kw)


def many_findings(n: int, signatures: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    sigs = [f"{i:016x}" for i in range(signatures)]
    return [finding(rng.choice(sigs), i) for i in range(n)]


def test_100000_findings_of_50_signatures_stay_under_the_cap_at_a_bounded_rate():
    api, clock = FakeReports(), Clock()
    r = reporter(api, clock, samples=3, progress_interval=5.0)
    r.start()
    for i, record in enumerate(many_findings(100_000, 50)):
        clock.t = i * 0.01  # 100 findings a second for 1000 s
        r.finding(record)
        if i % 500 == 0:
            r.progress({"programs": i, "executions": 4 * i, "elapsed_s": clock.t})
    r.close()
    stored = api.objects["nightly-report-main-0"]["spec"]["report"]
    assert len(stored) < LIMITS.cap
    report = api.report()
    assert report.findings_total() == 100_000 and len(report.signatures) == 50
    assert all(len(e.samples) == 3 for e in report.signatures.values())
    assert "findings" not in json.loads(stored)  # no finding ids
    # New signatures and samples write through (50 x 3), the rest once per 5 s of 1000 s.
    assert api.patches <= 50 * 3 + 1000 / 5 + 3


def test_signatures_past_the_limit_are_counted_as_overflow():
    api = FakeReports()
    r = reporter(api, progress_interval=0.0, limits=Limits(signatures=10))
    r.start()
    for record in many_findings(2_000, 40, seed=1):
        r.finding(record)
    report = api.report()
    assert len(report.signatures) == 10
    assert sum(report.overflow.values()) == 2_000 - sum(e.count for e in report.signatures.values())
    assert report.findings_by_verdict() == {"mismatch": 2_000}


LONG = "x" * 10_000


def worst_case_findings() -> WorkerReport:
    """Every limit of the findings at once: full signature slots, full samples, every field
    at its length (tests/k8s/test_swarm_coverage.py adds the coverage's)."""
    report = WorkerReport(worker="w" * 63, revision="r" * 63, versions={"jax": LONG[:40]})
    for i in range(LIMITS.signatures + 5):
        for n in range(LIMITS.samples + 2):
            record = {k: LONG for k in ("program", "target", "culprit_op", "culprit_pass",
                                        "fusion_kind", "dtype", "dir", "known_bug", "time")}
            report.add_finding({**record, "id": f"{i}-{n}" + LONG, "verdict": "nondeterministic",
                                "signature": f"{i:016x}"})
    return report


def test_the_worst_case_report_fits_the_cap():
    assert len(worst_case_findings().to_json()) < LIMITS.cap < 1 << 20


def test_a_restarted_pod_that_replays_its_shard_counts_each_finding_once():
    api = FakeReports()
    shard = many_findings(300, 7, seed=2)
    first = reporter(api, progress_interval=0.0)
    first.start()
    for record in shard[:120]:  # killed after 120 findings
        first.finding(record)
    first.progress({"programs": 40, "executions": 160, "elapsed_s": 4.0})
    second = reporter(api, progress_interval=0.0)
    second.start()
    for record in shard[:200]:  # the replay: the same findings, then new ones
        second.finding(record)
    report = api.report()
    assert report.findings_total() == 200 and report.attempts == 2
    assert report.programs == 40  # the replay has not passed the first attempt yet
    expected = {}
    for record in shard[:200]:
        expected[record["signature"]] = expected.get(record["signature"], 0) + 1
    assert {s: e.count for s, e in report.signatures.items()} == expected


def test_a_pod_resuming_its_store_starts_from_the_stored_counts():
    api = FakeReports()
    first = reporter(api, progress_interval=0.0)
    first.start()
    first.finding(finding("00000000000000aa", 1))
    local = WorkerReport(worker="main-0", programs=10)
    local.signatures["00000000000000aa"] = SignatureEntry("mismatch", 4, "t0", "t1")
    second = reporter(api, progress_interval=0.0, local=local)  # the store holds 4 of them
    second.start()
    second.finding(finding("00000000000000aa", 9))  # only new findings are reported
    assert api.report().signatures["00000000000000aa"].count == 5


def test_two_pods_of_one_worker_at_once_lose_nothing():
    """The old pod (not yet gone) and its replacement run the same shard, so each goes
    through the same findings in the same order, one ahead of the other. Their writes
    interleave; resourceVersion conflicts make each fold the other's report in, so the
    stored report is the join of both: the further one's counts, nothing lost to a
    last-writer-wins overwrite."""
    api = FakeReports()
    shard = many_findings(100, 5, seed=3)
    old = reporter(api, progress_interval=0.0)
    old.start()
    for record in shard[:30]:
        old.finding(record)
    new = reporter(api, progress_interval=0.0)
    new.start()
    for i in range(100):
        if 30 + i < 80:
            old.finding(shard[30 + i])  # the old pod goes on to finding 80, then dies
        new.finding(shard[i])
        if i == 40:
            assert api.report().findings_total() == 71  # old's 71 stand while new is at 41
    report = api.report()
    assert report.findings_total() == 100 and report.attempts == 2


def test_merge_is_idempotent_and_order_free():
    a, b = WorkerReport(worker="w"), WorkerReport(worker="w")
    for record in many_findings(50, 4, seed=4):
        a.add_finding(record)
    for record in many_findings(80, 6, seed=5):
        b.add_finding(record)
    ab, ba = merge(a, b), merge(b, a)
    assert ab.to_json() == merge(ab, b).to_json() == merge(ab, a).to_json()
    assert {s: e.count for s, e in ab.signatures.items()} == {s: e.count for s, e in ba.signatures.items()}


def test_a_refused_write_is_recorded_and_the_worker_goes_on():
    api = FakeReports(max_report=4_000)
    r = reporter(api, progress_interval=0.0)
    r.start()
    for record in many_findings(200, 30, seed=6):
        r.finding(record)  # never raises: the engine keeps fuzzing
    spec = api.objects["nightly-report-main-0"]["spec"]
    assert "refused by the API server (422" in spec["error"]
    assert r.mine.findings_total() == 200  # still counted, for the next write that fits
    assert report_from_object(api.objects["nightly-report-main-0"]).error == spec["error"]


def test_an_old_report_with_finding_ids_still_reads():
    old = {"worker": "main-0", "attempts": 1, "programs": 3, "executions": 9, "elapsed_s": 1.0,
           "findings": {"abc": "00000000000000aa"}, "versions": {}, "done": False, "updated": "",
           "signatures": {"00000000000000aa": {"verdict": "mismatch", "count": 1,
                                                "first_seen": "t", "last_seen": "t", "samples": []}}}
    r = report_from_object({"spec": {"report": json.dumps(old)}})
    assert r is not None and r.findings_total() == 1
