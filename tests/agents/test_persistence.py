"""An agent pod's runs outlive the pod: the transcript, the claims, the programs of the
tests and reproductions it submitted and the run's record go to the campaign's store (a
bucket here: the real GCS JSON API server of tests/storage on loopback, reached by gcsfs),
and the triage page of the campaign shows them. A fix task of a bucket campaign names its
repro as a gs:// finding folder, which the agent fetches where the tools open it.

The swarm's cluster side is a stand-in here (a local queue, no Leases: tests/k8s has
those); the agent loop, the MCP server, the engine and XLA are real; the model is scripted
(FunctionModel)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import SHIFT, scripted

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))
from gcs_emulator import BUCKET, Emulator  # noqa: E402  # tests/storage's GCS server
from xla_sentinel.agents.archive import campaign_store, localize_repro  # noqa: E402
from xla_sentinel.agents.runtime import Budget, mcp_toolset, run_agent  # noqa: E402
from xla_sentinel.agents.tasks import Task, TaskQueue  # noqa: E402
from xla_sentinel.report.tables import html_report, html_report_uri  # noqa: E402
from xla_sentinel.storage.objects import ObjectStore, StorageError  # noqa: E402
from xla_sentinel.storage.store import Store  # noqa: E402

BUDGET = Budget(tokens=100_000, tool_calls=10, seconds=600)
CAMPAIGN_URI = f"gs://{BUCKET}/nightly"
SNIPPET = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.tanh(x) * 2 + x\n"


class LeaseLikeQueue(TaskQueue):
    """The local queue, closed by nobody but the test: like the Lease queue, whose close()
    is nothing (the runtime's Workbench closes the queue it is handed)."""

    def close(self) -> None:
        pass


class PodSwarm:
    """What run_agent needs of agents/swarm.Swarm, without a cluster: the queue, no
    cluster-held tasks, no drafts, and the campaign's store."""

    def __init__(self, out: Path, store: str | None) -> None:
        self.out, self.store = out, store

    def task_queue(self, max_attempts: int = 3) -> TaskQueue:
        return LeaseLikeQueue(self.out / "agents.sqlite", max_attempts)

    def seed(self, queue: Any) -> int:
        return 0

    def publish(self, claims: list, task: Any) -> int:
        return 0


@pytest.fixture
def gcs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    emu = Emulator(tmp_path_factory.mktemp("gcs"))
    emu.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emu.host)
    monkeypatch.setenv("XLA_SENTINEL_STAGING", str(tmp_path_factory.mktemp("staging")))
    yield emu
    emu.close()


def _empty_campaign(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    Store(folder / "campaign.sqlite").close()
    return folder


async def test_a_pods_runs_persist_to_the_campaign_bucket_and_show_on_the_page(gcs: Emulator, tmp_path: Path) -> None:
    pod = tmp_path / "pod"  # the pod's emptyDir: gone with the pod
    TaskQueue(pod / "agents.sqlite").put("stress", "gap:op:tanh", {"op": "tanh"})
    seen: list = []
    model = scripted([("submit_test", {"code": SNIPPET, "inputs": [["f32", [8]]], "rationale": "tanh, never drawn"}),
                      "Submitted a test for tanh."], seen)
    swarm = PodSwarm(pod, campaign_store("nightly", False, f"gs://{BUCKET}"))
    assert swarm.store == CAMPAIGN_URI
    record = await run_agent("stress", model, mcp_toolset(None, pod, agent="swarm-agent-stress-0"), pod,
                             "swarm-agent-stress-0", BUDGET, swarm=swarm)
    assert record["exit"] == 0 and seen[0]["verified"], seen
    stem = Path(record["transcript"]).stem
    store = ObjectStore(CAMPAIGN_URI)
    keys = set(store.find("agents/**"))
    claim = record["claims"][0]["id"]
    assert {f"agents/runs/{stem}.json", f"agents/transcripts/{stem}.json", f"agents/claims/{stem}.json",
            f"agents/tests/{claim}-test.py"} <= keys, keys
    assert record["archived"] == len([k for k in keys if "." in k.rsplit("/", 1)[-1]]) == 4  # files, not folders
    # What the store holds is the run, not a copy of a name: the program, the gate's decision.
    assert store.read(f"agents/tests/{claim}-test.py").decode().startswith(SNIPPET)  # with its INPUTS line
    (kept,) = json.loads(store.read(f"agents/claims/{stem}.json"))
    assert kept["kind"] == "test" and kept["verified"] and kept["agent"] == "swarm-agent-stress-0"
    transcript = json.loads(store.read(f"agents/transcripts/{stem}.json"))
    assert transcript["task"] == "gap:op:tanh" and len(transcript["messages"]) >= 4

    # The pod is gone; the campaign's page (from a worker's folder in the bucket) shows the run.
    worker = _empty_campaign(tmp_path / "worker")
    ObjectStore(f"{CAMPAIGN_URI}/default-0").put(worker / "campaign.sqlite", "campaign.sqlite")
    import shutil
    shutil.rmtree(pod)
    page = html_report_uri(f"{CAMPAIGN_URI}/default-0", tmp_path / "page" / "report.html").read_text()
    assert '<h2 id="agents">Agents</h2>' in page and 'data-agent="swarm-agent-stress-0"' in page
    assert "1 runs, 1 claims (1 verified by the gate)" in page and "gap:op:tanh" in page


def test_a_store_that_refuses_the_run_is_said_not_fatal(gcs: Emulator, tmp_path: Path) -> None:
    from xla_sentinel.agents.archive import archive_run

    out = tmp_path / "out"
    (out / "agents" / "transcripts").mkdir(parents=True)
    transcript = out / "agents" / "transcripts" / "fix-a-0-1700000000.json"
    transcript.write_text("{}")
    record = {"role": "fix", "agent": "a-0", "transcript": str(transcript), "claims": []}
    gcs.stop()  # the store is down
    try:
        with pytest.raises(StorageError, match=f"gs://{BUCKET}/nightly"):
            archive_run(CAMPAIGN_URI, out, record, [])
    finally:
        gcs.start()
    assert (out / "agents" / "runs" / "fix-a-0-1700000000.json").is_file()  # kept locally all the same


def test_a_bucket_campaigns_fix_task_gets_a_repro_the_tools_open(gcs: Emulator, tmp_path: Path) -> None:
    # A worker's finding folder with its bundle, in the bucket, as the operator names it.
    finding = tmp_path / "finding"
    finding.mkdir()
    (finding / "repro.py").write_text(SHIFT.read_text())
    (finding / "finding.json").write_text("{}")
    store = ObjectStore(f"{CAMPAIGN_URI}/default-0/findings/abc123")
    for f in finding.iterdir():
        store.put(f, f.name)
    task = Task("t1", "fix", "signature:5e1f", {"signature": "5e1f", "repro": f"{CAMPAIGN_URI}/default-0/findings/abc123"})
    out = tmp_path / "pod"
    local = localize_repro(task, out)
    assert local.payload["repro"] == str(out / "findings" / "abc123")
    assert local.payload["repro_uri"] == task.payload["repro"]
    assert (out / "findings" / "abc123" / "repro.py").read_text() == SHIFT.read_text()
    # The tools take it as the engine's bundle (a repro.py in a findings folder, outside OUT/agents).
    from xla_sentinel.agents.tools import Workbench
    bench = Workbench(None, out, regression=[])
    try:
        assert bench._trusted(out / "findings" / "abc123" / "repro.py")
    finally:
        bench.close()
    script = localize_repro(Task("t2", "fix", "k", {"repro": f"{CAMPAIGN_URI}/default-0/findings/abc123/repro.py"}),
                            tmp_path / "pod2")
    assert script.payload["repro"] == str(tmp_path / "pod2" / "findings" / "abc123" / "repro.py")
    assert localize_repro(Task("t3", "fix", "k", {"repro": str(SHIFT)}), out).payload["repro"] == str(SHIFT)
    with pytest.raises(StorageError, match="its repro could not be fetched"):
        localize_repro(Task("t4", "fix", "signature:x", {"repro": f"{CAMPAIGN_URI}/default-0/findings/gone"}), out)


def test_local_runs_show_on_the_campaigns_page(tmp_path: Path) -> None:
    campaign = _empty_campaign(tmp_path / "smoke")
    runs = campaign / "agents" / "runs"
    runs.mkdir(parents=True)
    (runs / "fix-f-0-1700000000.json").write_text(json.dumps({
        "role": "fix", "agent": "f-0", "model": "openai:gpt-5", "task": "signature:ab", "status": "done", "exit": 0,
        "transcript": "x/fix-f-0-1700000000.json", "spent": {"tokens": 1234, "usd": 0.05},
        "claims": [{"id": 1, "kind": "fix", "verified": False, "reason": "not cured: <b>still fails</b>"}]}))
    (runs / "broken.json").write_text("{not json")
    page = html_report(campaign).read_text()
    assert 'data-agent="f-0"' in page and "2023-11-14T22:13:20Z" in page and "1234" in page
    assert "&lt;b&gt;still fails&lt;/b&gt;" in page and "<b>still fails</b>" not in page
    assert "agent run not shown:" in page and "broken.json" in page
