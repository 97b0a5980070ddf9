"""A swarm's stress tasks from the coverage counts of its campaign's WorkerReports, for a
campaign with neither an artifacts PVC nor a bucket (agents/sources.py, cluster/report.py).

Pure: a report's coverage is bounded and validated, joined over a worker's attempts (the
larger count) and summed over workers; the worst-case report with every op of the table
stays under the report's cap. On the real API server: workers (the real K8sReporter, as the
chart's worker ServiceAccount) write reports with coverage, the real operator rolls them up,
and an agent pod (as the chart's agent ServiceAccount) seeds a stress task per op no worker
reached and none for the ops they did."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import kubernetes
import pytest
from controlplane.cluster import ControlPlane
from controlplane.kit import Api, chart_operator_flags
from xla_sentinel.agents.kube_tasks import KubeTaskQueue
from xla_sentinel.agents.sources import report_coverage, worker_reports
from xla_sentinel.agents.swarm import pod_coverage
from xla_sentinel.agents.tools import Workbench
from xla_sentinel.campaign.coverage import FUSION_KINDS
from xla_sentinel.campaign.recording import Counters
from xla_sentinel.cluster.report import (
    LIMITS,
    WorkerReport,
    coverage_of,
    merge,
    report_from_object,
    result_object,
)
from xla_sentinel.cluster.reporter import K8sReporter, write_result
from xla_sentinel.spec.campaign import OP_NAMES, parse_spec

from .conftest import API, as_service_account, campaign, create, eventually
from .test_report_bounded_pure import LONG, worst_case_findings
from .workers import finding, reports_api

AGENT_SA = chart_operator_flags()["--agent-service-account"]
REPORTS = f"{API}/workerreports"
ETCD_LIMIT = 1572864  # etcd's default --max-request-bytes (1.5 MiB): the largest object it takes


# --- pure -------------------------------------------------------------------------------

def test_a_worker_s_coverage_reaches_its_report_bounded_and_joined_over_attempts() -> None:
    counters = Counters()
    counters.coverage.add({"ops": {"add": 2, "tanh": 1}, "op_pairs": {"add>tanh": 1}, "fusion_kinds": {"kLoop": 1}})
    counters.coverage.add({"ops": {"add": 1}})
    first = WorkerReport(worker="main-0", coverage=coverage_of(counters.snapshot()["coverage"]))
    # Only the sections a report carries: op pairs stay in the worker's store.
    assert first.coverage == {"programs": 2, "ops": {"add": 3, "tanh": 1}, "fusion_kinds": {"kLoop": 1}}
    # A restarted pod replays its shard: its counts climb through the same programs, and
    # the join takes the larger count per op, never the sum.
    replay = WorkerReport(worker="main-0", coverage={"programs": 1, "ops": {"add": 2, "sin": 1}})
    joined = merge(first, replay)
    assert joined.coverage == {"programs": 2, "ops": {"add": 3, "tanh": 1, "sin": 1}, "fusion_kinds": {"kLoop": 1}}
    assert merge(replay, first).coverage == joined.coverage and merge(joined, joined).coverage == joined.coverage
    assert merge(WorkerReport(worker="main-0"), first).coverage == first.coverage  # a report of an older worker
    assert WorkerReport.from_json(joined.to_json()).coverage == joined.coverage


def test_a_real_campaign_s_report_carries_the_op_counts_of_its_summary(tmp_path: Path) -> None:
    """The engine (real jax and XLA, 4 programs) hands its coverage to the reporter with its
    progress; the report's op counts are summary.json's, and a resumed store counts again
    from what it holds (nothing new to run: the same figures)."""
    from xla_sentinel.campaign.engine import run_campaign

    class Heard:
        def __init__(self) -> None:
            self.report = WorkerReport(worker="main-0")

        def finding(self, record: dict) -> None:
            self.report.add_finding(record)

        def progress(self, counters: dict) -> None:
            self.report.coverage = coverage_of(counters["coverage"])

    spec = parse_spec({"seed": 5, "workers": 1, "budget": {"programs": 4}, "targets": ["default"],
                       "references": ["f64_numpy"], "bisect": {"enabled": False}})
    for _attempt in ("fresh", "resumed"):
        heard = Heard()
        summary = run_campaign(spec, tmp_path / "out", name="nightly", reporter=heard, progress=False)
        cov = summary["coverage"]
        assert heard.report.coverage == {"programs": cov["programs"], "ops": cov["ops"],
                                         "fusion_kinds": cov["fusion_kinds"]}
        assert cov["programs"] == 4 and cov["ops"]


@pytest.mark.parametrize("coverage, error", [
    ([], "report.coverage: list is not"),
    ({"programs": -1}, "coverage.programs: not a count"),
    ({"programs": 1, "ops": {"add": "3"}}, "coverage.ops.add: not a count"),
    ({"programs": 1, "ops": {"add": True}}, "coverage.ops.add: not a count"),
    ({"programs": 1, "fusion_kinds": ["kLoop"]}, "coverage.fusion_kinds: not an object"),
])
def test_a_garbled_coverage_makes_the_report_unreadable(coverage: object, error: str) -> None:
    text = json.dumps({"worker": "main-0", "coverage": coverage})
    with pytest.raises(ValueError, match=error):
        WorkerReport.from_json(text)
    assert report_from_object({"spec": {"report": text}}) is None


def test_coverage_keeps_the_most_reached_keys_within_its_limits() -> None:
    many = {f"stablehlo.op_{i:04d}" + "x" * 100: i for i in range(LIMITS.coverage_ops + 50)}
    kept = coverage_of({"programs": 9, "ops": many})["ops"]
    assert len(kept) == LIMITS.coverage_ops and all(len(k) == LIMITS.coverage_key_chars for k in kept)
    assert min(kept.values()) == 50  # the 50 least reached are dropped
    # The generator's ops are kept first, however rarely reached: theirs are the gaps.
    table = coverage_of({"programs": 9, "ops": {**many, "add": 1}})["ops"]
    assert table["add"] == 1 and len(table) == LIMITS.coverage_ops and min(table.values()) == 1


def test_worker_reports_sum_over_workers_in_the_sections_they_carry() -> None:
    a = WorkerReport(worker="main-0", coverage={"programs": 3, "ops": {"add": 3}, "fusion_kinds": {"kLoop": 2}})
    b = WorkerReport(worker="main-1", revision="r2", coverage={"programs": 2, "ops": {"add": 1, "sin": 2}})
    silent = WorkerReport(worker="main-2")  # started, nothing counted yet
    cov = report_coverage([a, b, silent])
    assert cov["programs"] == 5 and cov["ops"] == {"add": 4, "sin": 2} and cov["fusion_kinds"] == {"kLoop": 2}
    assert cov["workers"] == ["workerreport/main-0", "workerreport/main-1@r2"]
    # Dtypes, ranks, pass effects: not carried, so not "never seen" (no gap from nothing).
    assert "dtypes" not in cov and "passes_changed" not in cov


def worst_case_report() -> WorkerReport:
    """Every limit at once: the findings' (worst_case_findings), and coverage with every key
    slot used at the longest name and a 19-digit count."""
    report = worst_case_findings()
    huge = 10**18
    keys = [*OP_NAMES, *(f"{i:04d}" + LONG for i in range(LIMITS.coverage_ops))]
    report.coverage = coverage_of({"programs": huge, "ops": {k: huge for k in keys},
                                   "fusion_kinds": {k: huge for k in keys}})
    return report


def test_the_worst_case_report_with_every_op_fits_the_cap() -> None:
    report = worst_case_report()
    assert set(OP_NAMES) <= set(report.coverage["ops"])  # every op of the table is kept
    size = len(report.to_json())
    every_op = len(json.dumps(coverage_of({"programs": 10**6, "ops": dict.fromkeys(OP_NAMES, 10**9),
                                           "fusion_kinds": dict.fromkeys(FUSION_KINDS, 10**6)})))
    print(f"worst-case report: {size} bytes of JSON (cap {LIMITS.cap}); coverage of every op of "
          f"the table ({len(OP_NAMES)} ops): {every_op} bytes")
    assert size < LIMITS.cap < 1 << 20


# --- on the API server ------------------------------------------------------------------

def status(api: Api, ns: str) -> dict:
    return api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status") or {}


async def test_stress_tasks_come_from_the_workers_reports(
        control_plane: ControlPlane, api: Api, ns: str, client, start_operator, worker_kubeconfig: Path,
        tmp_path: Path) -> None:
    """A campaign with no PVC and no bucket: two workers report coverage; together they
    reached every op of the table but three, and every fusion kind but ynn. Another
    campaign's worker reached those three (it must not count), and a Job's result object of
    this campaign is no report. The stress tasks are exactly the three ops and ynn."""
    await start_operator()
    fc = await create(client, campaign(ns, workers=2))
    missing = sorted(OP_NAMES)[:3]
    reached = [op for op in sorted(OP_NAMES) if op not in missing]
    halves = {"main-0": reached[::2], "main-1": reached[1::2]}
    for worker, ops in halves.items():
        r = K8sReporter(reports_api(worker_kubeconfig), namespace=ns, campaign="nightly",
                        campaign_uid=fc["metadata"]["uid"], worker=worker, progress_interval=0.0)
        await asyncio.to_thread(r.start)
        await asyncio.to_thread(r.finding, finding("00000000000000aa", 1 if worker == "main-0" else 2))
        coverage = {"programs": 20, "ops": dict.fromkeys(ops, 7),
                    "fusion_kinds": {k: 3 for k in FUSION_KINDS if k != "ynn"}}
        await asyncio.to_thread(r.progress, {"programs": 20, "executions": 80, "elapsed_s": 2.0,
                                             "coverage": coverage})
    other = K8sReporter(reports_api(worker_kubeconfig), namespace=ns, campaign="other", campaign_uid="",
                        worker="main-0", progress_interval=0.0)
    await asyncio.to_thread(other.start)
    await asyncio.to_thread(other.progress, {"programs": 5, "coverage": {"programs": 5, "ops": dict.fromkeys(missing, 1),
                                                                         "fusion_kinds": {"ynn": 1}}})
    write_result(reports_api(worker_kubeconfig), result_object(
        namespace=ns, campaign="nightly", campaign_uid="", kind="verification", key="x",
        result={"signature": "00000000000000aa", "result": "fixed"}))

    # The operator reads the reports with their coverage: both are counted, none unreadable.
    await eventually(lambda: status(api, ns).get("programs") == 40 and status(api, ns).get("findingsTotal") == 2)
    assert not [e for e in api.all("v1/events", ns) if e.get("reason") in ("ReportUnreadable", "ReportRefused")]
    obj = api.get(REPORTS, ns, "nightly-report-main-0")
    print(f"WorkerReport nightly-report-main-0 with coverage of {len(halves['main-0'])} ops: "
          f"{len(json.dumps(obj))} bytes as stored")

    # An agent pod of the campaign, as the chart's agent ServiceAccount.
    agent = kubernetes.client.CustomObjectsApi(kubernetes.config.new_client_from_config(
        config_file=str(as_service_account(control_plane, api, ns, AGENT_SA))))
    reports = worker_reports(agent, ns, "nightly")
    assert sorted(r.worker for r in reports) == ["main-0", "main-1"]
    env = {"XLA_SENTINEL_TASK_QUEUE": "kube", "XLA_SENTINEL_CAMPAIGN": "nightly", "XLA_SENTINEL_NAMESPACE": ns}
    covered = pod_coverage(parse_spec({}), env, root=tmp_path / "no-pvc", api=agent)
    assert covered is not None
    bench = Workbench(None, tmp_path / "agent", regression=[], covered=covered)
    bench.queue.close()
    bench.queue = KubeTaskQueue(agent, ns, "nightly")
    try:
        gaps = bench.coverage_gaps()
        assert gaps["programs"] == 40 and gaps["ops_never"] == missing and "note" not in gaps
        assert gaps["fusion_kinds_never"] == ["ynn"] and gaps["dtypes_never"] == []  # not carried: no gap
        added = bench.seed_tasks()
        keys = sorted(r["key"] for r in bench.queue.tasks("stress"))
        assert keys == sorted([f"gap:op:{op}" for op in missing] + ["gap:fusion:ynn"])
        assert added["stress"] == len(keys)
        assert not any(k == f"gap:op:{op}" for k in keys for op in reached)
    finally:
        bench.close()


def test_the_worst_case_report_object_is_well_under_etcd_s_limit(api: Api, ns: str) -> None:
    """The worst-case report as the API server stores it (JSON in a string: escaped)."""
    report = worst_case_report()
    api.create(REPORTS, ns, {"apiVersion": API, "kind": "WorkerReport", "metadata": {"name": "worst"},
                             "spec": {"campaign": "nightly", "worker": "main-0", "report": report.to_json()}})
    stored = api.get(REPORTS, ns, "worst")
    size = len(json.dumps(stored, separators=(",", ":")))
    print(f"worst-case WorkerReport object as stored: {size} bytes (etcd's limit {ETCD_LIMIT})")
    assert report_from_object(stored).coverage == report.coverage
    assert size < ETCD_LIMIT // 2


def test_a_pod_without_list_on_workerreports_says_so(worker_kubeconfig: Path, ns: str, tmp_path: Path) -> None:
    """An identity whose Role has no `list` on workerreports (the worker's; an agent's of an
    older chart): the API server refuses, and the gaps say why there are none."""
    env = {"XLA_SENTINEL_TASK_QUEUE": "kube", "XLA_SENTINEL_CAMPAIGN": "nightly", "XLA_SENTINEL_NAMESPACE": ns}
    covered = pod_coverage(parse_spec({}), env, root=tmp_path, api=reports_api(worker_kubeconfig))
    assert covered is not None
    cov = covered()
    assert cov["programs"] == 0 and cov["problems"] == ["workerreports: HTTP 403 Forbidden"]
    assert "its WorkerReports" in cov["note"]
