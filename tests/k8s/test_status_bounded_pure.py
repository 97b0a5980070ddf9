"""A campaign's status stays small whatever its size and age: 10,000 workers (four worker
groups of 2,500: one per runner image) over 3 revisions, every one of the current revision
with its artifact store down and its last report refused, each string at its length limit.
The per-worker lists keep the entries worth a look; workerStats and the totals count the
rest. Pure roll-up, no API (test_status_bounded.py writes it to the real API server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from xla_sentinel.cluster.report import SignatureEntry, WorkerReport
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, rollup

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# Four runner images: four worker groups of 2,500 workers, 10,000 worker pods.
SPEC = parse_spec({"workers": 2500, "budget": {"continuous": True},
                   "targets": [{"name": "default"},
                               *({"name": f"v{i}", "image": f"runner:0.9.{i}"} for i in range(3))]})
REV = desired.revision(SPEC)
REVISIONS = ["rev-old-1", "rev-old-2", REV]
GROUPS = [g.name for g in desired.worker_groups(SPEC)]
# etcd's default request limit (--max-request-bytes): an object must fit in one request.
ETCD_REQUEST_LIMIT = int(1.5 * 1024 * 1024)


def restarts(n: int) -> int:
    """Attempts of worker n: one restart for every 97th, two for worker 4321."""
    return 3 if n == 4321 else 2 if n % 97 == 0 else 1


def big_reports() -> list[WorkerReport]:
    out = []
    for rev in REVISIONS:
        for g, group in enumerate(GROUPS):
            for i in range(2500):
                n = g * 2500 + i
                current = rev == REV
                report = WorkerReport(
                    worker=f"{group}-{i}", revision=rev, attempts=restarts(n),
                    programs=10_000 + n, executions=40_000 + 4 * n, elapsed_s=3600.0,
                    signatures={f"{n % 50:016x}": SignatureEntry(verdict="mismatch", count=1 + n % 3)},
                    updated=(NOW - timedelta(seconds=n % 600 + (900 if n == 77 else 0))).strftime(
                        "%Y-%m-%dT%H:%M:%SZ"))
                if current:  # the worst case: every worker's store down, every write refused
                    report.storage = {"ok": False, "uri": "gs://" + "b" * 395, "reason": "r" * 400,
                                      "pending": n % 13, "since": "2026-12-01T11:00:00Z"}
                    report.error = "etcdserver: request is too large " + "x" * 2000
                out.append(report)
    return out


def test_ten_thousand_workers_over_three_revisions_fit_in_a_small_status():
    reports = big_reports()
    assert len(reports) == 30_000 and SPEC.workers * len(GROUPS) == 10_000
    st = rollup.status(SPEC, 1, [], reports, REV, {}, NOW)
    size = len(json.dumps({"status": st}, separators=(",", ":")))
    assert size < 64 * 1024, size  # of 1.5 MiB for the whole object (spec, metadata too)

    assert len(st["workerSummary"]) == rollup.WORKER_SUMMARY_MAX
    assert len(st["storageErrors"]) == len(st["reportErrors"]) == rollup.ERRORS_MAX
    assert st["storageErrorsTotal"] == st["reportErrorsTotal"] == 10_000
    # The totals still count every report of every revision.
    assert st["programs"] == 3 * sum(10_000 + n for n in range(10_000))
    assert st["workers"]["desired"] == 10_000 and st["workers"]["reporting"] == 10_000
    stats = st["workerStats"]
    assert (stats["reports"], stats["revisions"], stats["workers"], stats["listed"]) == (
        30_000, 3, 10_000, rollup.WORKER_SUMMARY_MAX)
    assert (stats["programsMin"], stats["programsMax"], stats["attemptsMax"]) == (10_000, 19_999, 3)
    assert stats["restarted"] == len([n for n in range(10_000) if restarts(n) > 1])
    assert stats["oldestReport"] == "2026-12-01T11:43:43Z"  # worker 77: 977 s ago, the rest < 600


def test_the_listed_workers_are_the_ones_worth_a_look():
    st = rollup.status(SPEC, 1, [], big_reports(), REV, {}, NOW)
    listed = st["workerSummary"]
    assert all(w["revision"] == REV for w in listed)  # the current revision's first
    # The most restarted first: worker 4321 (3 attempts), then those with 2, oldest first.
    worker_4321 = f"{GROUPS[1]}-1821"
    assert worker_4321 in {w["worker"] for w in listed}
    assert all(w["attempts"] >= 2 for w in listed)
    # Listed by worker, as for a small campaign.
    keys = [rollup._worker_key(w["worker"]) for w in listed]
    assert keys == sorted(keys)
    assert all(len(e["error"]) <= rollup.ERROR_CHARS for e in st["reportErrors"])


def test_a_small_campaign_lists_every_worker_of_every_revision():
    reports = [WorkerReport(worker=f"main-{i}", revision=rev, programs=i)
               for rev in ("r1", "r2") for i in range(3)]
    st = rollup.status(parse_spec({"workers": 3}), 1, [], reports, "r2", {}, NOW)
    assert [(w["worker"], w["revision"]) for w in st["workerSummary"]] == [
        (f"main-{i}", rev) for i in range(3) for rev in ("r1", "r2")]
    assert st["workerStats"]["listed"] == st["workerStats"]["reports"] == 6
    assert st["storageErrorsTotal"] == st["reportErrorsTotal"] == 0
