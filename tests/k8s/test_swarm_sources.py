"""Where a swarm pod's tasks come from (agents/sources.py, agents/swarm.py): failure reports
handed to the campaign in ConfigMaps and in the bucket become reproduce tasks, and the
stress agents' gaps come from what the campaign's workers covered.

On the real API server, each seeding pod logging in as the chart's agent ServiceAccount
(its Role is all it may use). The bucket is a local folder (a bucket URI the engine's
ObjectStore opens alike; GCS itself cannot exist here), and a worker's output is written
where the artifacts PVC holds it in a pod."""

from __future__ import annotations

import base64
import json
import threading
from functools import partial
from pathlib import Path

import kubernetes
import pytest
from controlplane.cluster import ControlPlane
from controlplane.kit import Api, chart_operator_flags
from xla_sentinel.agents.kube_tasks import KubeTaskQueue
from xla_sentinel.agents.sources import (
    REPORT_BYTES,
    campaign_coverage,
    merge_coverage,
    read_report,
)
from xla_sentinel.agents.swarm import Swarm, pod_coverage
from xla_sentinel.agents.tools import Workbench
from xla_sentinel.cluster.report import FAILURE_REPORT_LABEL
from xla_sentinel.core.model import ProgramStatus
from xla_sentinel.spec.campaign import OP_NAMES, parse_spec
from xla_sentinel.storage.store import Store

from .conftest import as_service_account

AGENT_SA = chart_operator_flags()["--agent-service-account"]
ISSUE = ("shift_set_then_reshape: x << 3 then reshape gives wrong values under algsimp on XLA:CPU\n"
         "f32[4,4] input, expected [0, 8, 16, ...], got [0, 0, 0, ...]\n")
MODULE = "func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  return %arg0 : tensor<4xf32>\n}\n"


@pytest.fixture
def agent_kubeconfig(control_plane: ControlPlane, api: Api, ns: str) -> Path:
    return as_service_account(control_plane, api, ns, AGENT_SA)


def swarm(kubeconfig: Path, ns: str, campaign: str = "nightly", pod: str = "nightly-agent-reproduce-0-x",
          bucket: str | None = None) -> Swarm:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    return Swarm(kubernetes.client.CustomObjectsApi(client), ns, campaign, "", pod, bucket)


def report_map(api: Api, ns: str, name: str, campaign: str, data: dict[str, str],
               binary: dict[str, bytes] | None = None) -> None:
    api.create("v1/configmaps", ns, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {FAILURE_REPORT_LABEL: campaign}}, "data": data,
        "binaryData": {k: base64.b64encode(v).decode() for k, v in (binary or {}).items()}})


# --- pure -------------------------------------------------------------------------------

@pytest.mark.parametrize("data, error", [
    (b"", "empty"), (b"  \n\t", "empty"),
    (b"\x89PNG\r\n\x1a\n\xff\xfe", "binary, not UTF-8 text"),
    (b"text\x00more", "binary, not text"),
    (b"x" * (REPORT_BYTES + 1), f"{REPORT_BYTES + 1} bytes, more than the {REPORT_BYTES}"),
])
def test_a_malformed_report_is_an_error_not_an_exception(data: bytes, error: str) -> None:
    r = read_report("configmap/m/k", data)
    assert r.error.startswith("configmap/m/k: ") and error in r.error, r.error
    assert r.key.startswith("report:refused:") and r.payload()["error"] == r.error
    assert read_report("configmap/m/other", data).key != r.key  # each is said by name


def test_a_report_s_key_is_its_content_s_hash() -> None:
    a, b = read_report("configmap/a/issue.md", ISSUE.encode()), read_report("gs://b/c/reports/x", ISSUE.encode())
    assert not a.error and a.key == b.key and a.key.startswith("report:sha256:")
    assert a.payload() == {"report": "configmap/a/issue.md", "sha256": a.digest, "kind": "text", "text": ISSUE}
    assert read_report("configmap/a/m.mlir", MODULE.encode()).payload()["kind"] == "module"


def test_worker_coverage_adds_up_across_workers_and_sources(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    live = root / "nightly" / "default-0"
    live.mkdir(parents=True)
    store = Store(live / "campaign.sqlite")  # a worker's live store, as on the PVC
    store.record_program(0, "p0", 2, ProgramStatus.JUDGED, 2, 0.1, {"coverage": {"ops": {"add": 2, "tanh": 1}, "fusion_kinds": {"kLoop": 1}}})
    store.record_program(1, "p1", 1, ProgramStatus.JUDGED, 2, 0.1, {"coverage": {"ops": {"add": 1}}})
    finished = root / "nightly" / "default-1"
    finished.mkdir()
    (finished / "summary.json").write_text(json.dumps({"coverage": merge_coverage([{"programs": 3, "ops": {"tanh": 4}}])}))
    (root / "nightly" / "default-2").mkdir()  # started, nothing yet
    torn = root / "nightly" / "default-3"
    torn.mkdir()
    (torn / "campaign.sqlite").write_bytes(b"not a database at all" * 10)
    bucket = tmp_path / "bucket"
    (bucket / "nightly" / "tpu-0").mkdir(parents=True)
    (bucket / "nightly" / "tpu-0" / "summary.json").write_text(json.dumps({"coverage": {"programs": 1, "ops": {"sin": 1}}}))
    (bucket / "other" / "tpu-0").mkdir(parents=True)  # another campaign's worker
    (bucket / "other" / "tpu-0" / "summary.json").write_text(json.dumps({"coverage": {"programs": 9, "ops": {"cos": 9}}}))
    try:
        cov = campaign_coverage("nightly", True, str(bucket), root)
    finally:
        store.close()
    assert cov["programs"] == 6 and cov["ops"] == {"tanh": 5, "add": 3, "sin": 1}
    assert cov["fusion_kinds"] == {"kLoop": 1} and len(cov["workers"]) == 3 and "note" not in cov
    assert [p.split(":")[0] for p in cov["problems"]] == [str(torn)]
    # A pod whose campaign has no PVC reads only the bucket; no worker yet: said.
    assert campaign_coverage("nightly", False, str(bucket), root)["programs"] == 1
    empty = campaign_coverage("fresh", True, str(bucket), root)
    assert empty["programs"] == 0 and "no worker of campaign fresh has reported coverage yet" in empty["note"]


def test_a_pod_s_workbench_takes_the_campaign_s_coverage(tmp_path: Path) -> None:
    spec = parse_spec({"artifacts": {"pvc": "runs"}})
    env = {"XLA_SENTINEL_TASK_QUEUE": "kube", "XLA_SENTINEL_CAMPAIGN": "nightly"}
    assert pod_coverage(spec, {}) is None  # locally the store of OUT counts
    covered = pod_coverage(spec, env, root=tmp_path)
    assert covered is not None and covered()["programs"] == 0


# --- on the API server ------------------------------------------------------------------

def test_a_configmap_report_becomes_one_reproduce_task_across_seeding_pods(
        agent_kubeconfig: Path, api: Api, ns: str, tmp_path: Path) -> None:
    report_map(api, ns, "crash-1", "nightly", {"issue.md": ISSUE, "module.mlir": MODULE, "empty.txt": ""},
               {"trace.pb": b"\x08\x96\x01\xff\xfe\x00garbage"})
    report_map(api, ns, "crash-1-again", "nightly", {"same.md": ISSUE})  # the same text: one task
    report_map(api, ns, "elsewhere", "other", {"issue.md": "another campaign's report"})
    api.create("v1/configmaps", ns, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "unlabelled"}, "data": {"issue.md": "not a report"}})
    bucket = tmp_path / "bucket"
    (bucket / "nightly" / "reports").mkdir(parents=True)
    (bucket / "nightly" / "reports" / "from-ci.md").write_text(ISSUE)  # the same again
    (bucket / "nightly" / "reports" / "huge.log").write_bytes(b"x" * (REPORT_BYTES + 10))

    seeded: list[dict[str, int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def pod(i: int) -> None:
        try:
            s = swarm(agent_kubeconfig, ns, pod=f"nightly-agent-reproduce-{i}-x", bucket=str(bucket))
            start.wait()
            seeded.append(s.seed_reports(s.queue))
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=pod, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sum(s["queued"] for s in seeded) == 2 and sum(s["refused"] for s in seeded) == 3, seeded

    q = swarm(agent_kubeconfig, ns).queue
    rows = {r["key"]: r for r in q.tasks("reproduce")}
    good = [r for r in rows.values() if r["state"] == "open"]
    assert sorted(r["payload"]["kind"] for r in good) == ["module", "text"]
    (issue,) = [r for r in good if r["payload"]["kind"] == "text"]
    assert issue["payload"]["text"] == ISSUE and issue["payload"]["report"] == "configmap/crash-1/issue.md"
    refused = {r["payload"]["report"].rsplit("/", 1)[-1]: r["result"]["error"] for r in rows.values()
               if r["state"] == "refused"}
    assert sorted(refused) == ["empty.txt", "huge.log", "trace.pb"], refused
    assert refused["empty.txt"].endswith(": empty") and "binary, not UTF-8 text" in refused["trace.pb"]
    assert f"more than the {REPORT_BYTES}" in refused["huge.log"]
    assert not any("another campaign" in json.dumps(r) or "not a report" in json.dumps(r) for r in rows.values())

    # Each good report is taken once; a refused one never.
    taken = [t.key for t in iter(lambda: q.lease("reproduce", "reproduce-0", 600), None)]
    assert sorted(taken) == sorted(r["key"] for r in good)
    # Seeding again (a restarted pod) queues nothing new.
    again = swarm(agent_kubeconfig, ns, bucket=str(bucket))
    assert again.seed_reports(again.queue) == {"queued": 0, "refused": 0}


def test_stress_tasks_come_from_what_the_workers_covered(
        agent_kubeconfig: Path, ns: str, tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    s = swarm(agent_kubeconfig, ns, pod="nightly-agent-stress-0-x")
    bench = Workbench(None, tmp_path / "agent", regression=[],
                      covered=partial(campaign_coverage, "nightly", True, None, root))
    bench.queue.close()
    bench.queue = s.queue
    try:
        # No worker has covered anything: no stress tasks, and the tool says why.
        assert bench.seed_tasks()["stress"] == 0
        gaps = bench.coverage_gaps()
        assert gaps["programs"] == 0 and "no worker of campaign nightly has reported coverage yet" in gaps["note"]
        assert s.queue.tasks("stress") == []

        # A worker covered every op but a few and one fusion kind: those are the gaps.
        missing = sorted(OP_NAMES)[:3]
        drawn = {op: 2 for op in OP_NAMES if op not in missing}
        (root / "nightly" / "default-0").mkdir(parents=True)
        (root / "nightly" / "default-0" / "summary.json").write_text(json.dumps(
            {"coverage": {"programs": 40, "ops": drawn, "fusion_kinds": {"kLoop": 30}}}))
        added = bench.seed_tasks()
        keys = sorted(r["key"] for r in s.queue.tasks("stress"))
        assert keys == sorted([f"gap:op:{op}" for op in missing]
                              + [f"gap:fusion:{k}" for k in ("kInput", "kOutput", "kCustom", "ynn")])
        assert added["stress"] == len(keys)
        assert bench.coverage_gaps()["ops_never"] == missing
    finally:
        bench.close()
    # Another pod seeding from the same coverage queues nothing twice.
    other = Workbench(None, tmp_path / "agent2", regression=[],
                      covered=partial(campaign_coverage, "nightly", True, None, root))
    other.queue.close()
    other.queue = KubeTaskQueue(s.api, ns, "nightly")
    try:
        assert other.seed_tasks()["stress"] == 0
    finally:
        other.close()
