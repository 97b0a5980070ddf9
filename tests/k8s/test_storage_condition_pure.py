"""Storage down, cluster side, without the API: the worker's storage Mirror tells its
K8sReporter each change of condition, the report carries a small bounded `storage` field,
and the roll-up turns it into status.storageErrors, the StorageAvailable condition and one
StorageUnavailable Event per outage."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from xla_sentinel.cluster.report import LIMITS, WorkerReport, merge, storage_of
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.storage.objects import Mirror, StorageError, join
from xla_sentinel_operator import desired, rollup

from .test_report_bounded_pure import FakeReports, reporter

URI = "gs://findings/nightly/main-0"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SPEC = parse_spec({"workers": 2, "budget": {"continuous": True},
                   "artifacts": {"bucketURI": "gs://findings"}})
REV = desired.revision(SPEC)


class FlakyStore:
    """An ObjectStore that is down until `down` is cleared (one try per call, as the
    worker's Mirror uses it), then stores what it is given."""

    def __init__(self) -> None:
        self.uri = URI
        self.down = True
        self.objects: dict[str, bytes] = {}

    def key_uri(self, key: str) -> str:
        return join(self.uri, key)

    def check(self) -> None:
        if self.down:
            raise StorageError(f"{self.uri}: unreachable (ClientConnectorError: connection refused)")

    def put(self, local: Path, key: str, *, replace: bool = False) -> str:
        if self.down:
            raise StorageError(f"{self.key_uri(key)}: unreachable (ClientConnectorError: connection refused)")
        self.objects[key] = local.read_bytes()
        return "uploaded"


def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return value


def stage_finding(staging: Path, fid: str) -> str:
    folder = staging / "findings" / fid
    folder.mkdir(parents=True)
    (folder / "finding.json").write_text(f'{{"id": "{fid}"}}')
    return f"findings/{fid}"


def test_the_report_carries_the_storage_condition_through_an_outage(tmp_path: Path) -> None:
    api, store = FakeReports(), FlakyStore()
    r = reporter(api, progress_interval=0.0)
    r.start()
    mirror = Mirror(tmp_path, store, backoff=(0.01, 0.02), on_change=r.storage).start()
    for fid in ("a1", "b2"):
        mirror.submit_tree(stage_finding(tmp_path, fid))

    down = until(lambda: (s := api.report().storage) and s["pending"] == 2 and s)
    assert (down["ok"], down["uri"]) == (False, URI)
    assert "unreachable (ClientConnectorError: connection refused)" in down["reason"]
    assert down["since"].startswith(str(datetime.now(UTC).year))

    store.down = False
    assert mirror.close(timeout=10.0)
    assert api.report().storage == {"ok": True, "uri": URI, "reason": "", "pending": 0, "since": ""}
    assert set(store.objects) == {"findings/a1/finding.json", "findings/b2/finding.json"}


def test_a_new_attempt_reports_the_store_answering_over_an_old_outage(tmp_path: Path) -> None:
    api, store = FakeReports(), FlakyStore()
    first = reporter(api, progress_interval=0.0)
    first.start()
    Mirror(tmp_path / "a", store, on_change=first.storage).start().close(timeout=0.0)
    assert api.report().storage["ok"] is False

    store.down = False  # the pod is replaced; the store answers when the new one starts
    second = reporter(api, progress_interval=0.0)
    second.start()
    Mirror(tmp_path / "b", store, on_change=second.storage).start().close(timeout=1.0)
    assert api.report().storage["ok"] is True


def test_a_failing_listener_does_not_stop_the_uploads(tmp_path: Path) -> None:
    store = FlakyStore()
    store.down = False

    def broken(status: dict[str, Any]) -> None:
        raise ConnectionError("API server gone")

    mirror = Mirror(tmp_path, store, on_change=broken).start()
    mirror.submit_tree(stage_finding(tmp_path, "a1"))
    assert mirror.close(timeout=5.0)
    assert list(store.objects) == ["findings/a1/finding.json"]


def test_the_storage_field_is_bounded_and_the_worst_case_report_still_fits() -> None:
    status = {"available": False, "uri": "gs://" + "u" * 10_000, "error": "e" * 10_000,
              "since": "s" * 10_000, "pending_findings": 12}
    field = storage_of(status)
    assert len(field["uri"]) == len(field["reason"]) == LIMITS.storage_chars
    long = "x" * 10_000
    report = WorkerReport(worker="w" * 63, revision="r" * 63, versions={"jax": long[:40]},
                          storage=field)
    for i in range(LIMITS.signatures):
        for n in range(LIMITS.samples):
            report.add_finding({k: long for k in ("program", "target", "culprit_op", "dir", "time")}
                               | {"id": f"{i}-{n}" + long, "verdict": "nondeterministic",
                                  "signature": f"{i:016x}"})
    assert len(report.to_json()) < LIMITS.cap
    assert WorkerReport.from_json(report.to_json()).storage == field


def test_merge_keeps_the_writers_condition_or_else_the_earlier_one() -> None:
    down = storage_of({"available": False, "uri": URI, "error": "denied", "pending_findings": 3})
    up = storage_of({"available": True, "uri": URI})
    earlier = WorkerReport(worker="main-0", storage=down)
    assert merge(earlier, WorkerReport(worker="main-0")).storage == down
    assert merge(earlier, WorkerReport(worker="main-0", storage=up)).storage == up


def report(worker: str, storage: dict[str, Any], revision: str = REV) -> WorkerReport:
    return WorkerReport(worker=worker, revision=revision, storage=storage,
                        updated=T0.strftime("%Y-%m-%dT%H:%M:%SZ"))


def storage_condition(st: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in st["conditions"] if c["type"] == rollup.STORAGE_CONDITION), None)


def test_the_rollup_lists_workers_whose_store_is_down_and_sets_the_condition() -> None:
    down = storage_of({"available": False, "uri": URI, "error": f"{URI}: access denied (Forbidden)",
                       "since": "2026-11-29T11:58:00+00:00", "pending_findings": 4})
    up = storage_of({"available": True, "uri": "gs://findings/nightly/main-1"})
    st = rollup.status(SPEC, 1, [], [report("main-0", down), report("main-1", up)], REV, {}, T0)
    assert st["storageErrors"] == [{"worker": "main-0", "revision": REV, "uri": URI,
                                    "reason": f"{URI}: access denied (Forbidden)", "pending": 4,
                                    "since": "2026-11-29T11:58:00+00:00"}]
    cond = storage_condition(st)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "StorageUnavailable")
    assert "1 worker(s) cannot store findings (4 waiting" in cond["message"]
    assert "access denied (Forbidden)" in cond["message"]
    assert rollup.storage_outage([], st["conditions"]) == cond["message"]

    # Still down a minute later: same transition time, and no second Event.
    later = rollup.status(SPEC, 1, [], [report("main-0", down)], REV, st, T0 + timedelta(minutes=1))
    assert storage_condition(later)["lastTransitionTime"] == cond["lastTransitionTime"]
    assert rollup.storage_outage(st["conditions"], later["conditions"]) is None

    # Back: True, the list empties; the next outage is a new Event.
    back = rollup.status(SPEC, 1, [], [report("main-0", up)], REV, later, T0 + timedelta(minutes=2))
    assert back["storageErrors"] == [] and storage_condition(back)["status"] == "True"
    again = rollup.status(SPEC, 1, [], [report("main-0", down)], REV, back, T0 + timedelta(minutes=3))
    assert rollup.storage_outage(back["conditions"], again["conditions"]) is not None


def test_no_store_no_condition_and_retired_revisions_do_not_count() -> None:
    st = rollup.status(SPEC, 1, [], [report("main-0", {})], REV, {}, T0)
    assert st["storageErrors"] == [] and storage_condition(st) is None
    old_down = report("main-0", storage_of({"available": False, "uri": URI, "error": "gone"}),
                      revision="older")
    st = rollup.status(SPEC, 1, [], [old_down], REV, {}, T0)
    assert st["storageErrors"] == [] and storage_condition(st) is None
