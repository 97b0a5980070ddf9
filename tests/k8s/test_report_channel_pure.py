"""The worker channel is a WorkerReport object of its own kind (crds/workerreport.yaml):
the reporter writes it through the custom objects API with the unchanged JSON payload, and
the operator reads it back. A fake API in memory, no HTTP."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from tools import REPO_ROOT
from xla_sentinel.cluster.report import (
    API_VERSION,
    REPORT_PLURAL,
    WorkerReport,
    report_from_object,
)
from xla_sentinel.cluster.reporter import K8sReporter


class FakeCustomObjects:
    """The three CustomObjectsApi calls the reporter makes, over a dict."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        from kubernetes.client.exceptions import ApiException

        self.calls.append(("get", f"{group}/{version}/{plural}"))
        if (namespace, name) not in self.objects:
            raise ApiException(status=404)
        return copy.deepcopy(self.objects[(namespace, name)])

    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        self.calls.append(("create", f"{group}/{version}/{plural}"))
        self.objects[(namespace, body["metadata"]["name"])] = copy.deepcopy(body)

    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body, **kw):
        self.calls.append(("patch", f"{group}/{version}/{plural}"))
        self.objects[(namespace, name)]["spec"].update(body["spec"])


def test_reporter_writes_a_workerreport_that_the_operator_reads_back():
    api = FakeCustomObjects()
    r = K8sReporter(api, namespace="fuzz", campaign="nightly", campaign_uid="u-1", worker="main-0")
    r.start()
    r.finding({"id": "f1", "signature": "00aa", "verdict": "crash"})
    r.close(done=False)
    assert {kind for _, kind in api.calls} == {f"{API_VERSION}/{REPORT_PLURAL}"}
    (obj,) = api.objects.values()
    assert obj["kind"] == "WorkerReport" and obj["spec"]["campaign"] == "nightly"
    report = report_from_object(obj)
    assert report is not None and report.signatures["00aa"].count == 1 and report.attempts == 1
    # The payload is the same JSON as before the move off ConfigMaps.
    assert WorkerReport.from_json(obj["spec"]["report"]) == report
    # A restarted pod reads it back and counts a second attempt.
    K8sReporter(api, namespace="fuzz", campaign="nightly", campaign_uid="u-1", worker="main-0").start()
    assert report_from_object(api.objects[("fuzz", "nightly-report-main-0")]).attempts == 2


def test_garbage_reports_are_ignored():
    assert report_from_object({"spec": {"report": "{not json"}}) is None
    assert report_from_object({"spec": {}}) is None


def test_workerreport_crd_pins_campaign_and_worker():
    crd = yaml.safe_load((REPO_ROOT / "crds" / "workerreport.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["campaign", "worker"]
    # A worker's report or a Job's result (bisection, verification), exactly one of them.
    assert any(r["rule"] == "has(self.report) != has(self.result)" for r in spec["x-kubernetes-validations"])
    assert any("oldSelf.campaign" in r["rule"] for r in spec["x-kubernetes-validations"])
    assert crd["spec"]["names"]["plural"] == REPORT_PLURAL


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _hour_of_progress(monkeypatch, interval_env: str | None) -> tuple[int, int]:
    """One worker fuzzing for an hour, the engine calling progress() every second; then an
    idle hour after its last program (a worker waiting on its store). Patches each hour."""
    from xla_sentinel.cluster import reporter as reporter_mod

    if interval_env is None:
        monkeypatch.delenv(reporter_mod.REPORT_INTERVAL_ENV, raising=False)
    else:
        monkeypatch.setenv(reporter_mod.REPORT_INTERVAL_ENV, interval_env)
    api, clock = FakeCustomObjects(), Clock()
    r = K8sReporter(api, namespace="fuzz", campaign="nightly", campaign_uid="u-1",
                    worker="main-0", clock=clock)
    r.start()
    for s in range(3600):
        clock.t = float(s)
        r.progress({"programs": s, "executions": 3 * s, "elapsed_s": float(s)})
    busy = sum(1 for c, _ in api.calls if c == "patch")
    elapsed = float(3599)
    for s in range(3600, 7200):
        clock.t = float(s)  # nothing moves: the same counters, over and over
        r.progress({"programs": 3599, "executions": 3 * 3599, "elapsed_s": elapsed})
    idle = sum(1 for c, _ in api.calls if c == "patch") - busy
    return busy, idle


def test_steady_state_writes_follow_the_operators_interval_and_skip_unchanged_reports(monkeypatch):
    from xla_sentinel.spec.campaign import parse_spec
    from xla_sentinel_operator import desired

    default_busy, default_idle = _hour_of_progress(monkeypatch, None)
    assert 700 <= default_busy <= 722  # every 5 s (and the first write)
    assert default_idle == 1  # the last counts once; then nothing changed: nothing written
    big = desired.report_interval(parse_spec({"workers": 4096}))
    assert big == desired.REPORT_INTERVAL_MAX_S == 100
    busy, idle = _hour_of_progress(monkeypatch, str(big))
    assert busy <= 3600 / big + 2 and idle == 1
    # The whole campaign: 4,096 workers at that interval, under 50 writes/s.
    assert 4096 * busy / 3600 < 50
    assert desired.report_interval(parse_spec({"workers": 2})) == 5  # small ones as before
