"""Each agent role end to end: pydantic-ai's agent loop, `xla-sentinel mcp` over stdio as
its toolset, the engine and XLA behind it, all real; only the model is scripted
(FunctionModel), since a remote model API cannot exist here. The gate decides what counts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agent_fixtures import (
    DIVIDE,
    DUS_INPUTS,
    DUS_SNIPPET,
    EXACT_DIVISION,
    FUSIONS_ONLY,
    REGRESSION,
    SHIFT,
    SHIFT_PROGRAM,
    scripted,
)
from xla_sentinel.agents.gate import Ledger
from xla_sentinel.agents.runtime import (
    AgentSetupError,
    Budget,
    make_model,
    mcp_toolset,
    retrying,
    run_agent,
)
from xla_sentinel.agents.tasks import TaskQueue
from xla_sentinel.cli.main import main as cli_main
from xla_sentinel.xla.faults import fault_path

BUDGET = Budget(tokens=100_000, tool_calls=10, seconds=600)


def _claims(out: Path) -> list[dict]:
    ledger = Ledger(out / "agents.sqlite")
    try:
        return ledger.claims()
    finally:
        ledger.close()


async def test_stress_agent_submits_a_test_that_reaches_an_injected_fault(tmp_path: Path) -> None:
    seen: list = []
    model = scripted([
        ("coverage_gaps", {}),
        ("run_test", {"code": DUS_SNIPPET, "inputs": DUS_INPUTS}),
        # An agent naming itself: the server records its own name for it, not this one.
        lambda judged: ("submit_test", {"code": DUS_SNIPPET, "inputs": DUS_INPUTS, "agent": "root",
                                        "model": "gpt-99",
                                        "rationale": f"x read after x.at[2].set: {judged['failing']} fail"}),
        "Submitted one test: an in-place update whose source is read again.",
    ], seen)
    toolset = mcp_toolset(None, tmp_path, inject_passes=[fault_path("dus_copy_elided")], agent="stress-1",
                          model="scripted")
    record = await run_agent("stress", model, toolset, tmp_path, "stress-1", BUDGET)
    assert record["exit"] == 0 and record["status"] == "done"
    assert "dynamic_update_slice" in seen[0]["ops_never"]  # it took a task from the queue's gaps
    assert seen[1]["failing"] == ["default", "O0", "no_fusion_emitters"]
    assert seen[2]["verified"] and Path(seen[2]["corpus_entry"]).is_file()
    assert Path(seen[2]["corpus_entry"]).name.startswith("stress-1-")
    provenance = json.loads(Path(seen[2]["corpus_entry"]).with_suffix(".provenance.json").read_text())
    assert (provenance["agent"], provenance["model"]) == ("stress-1", "scripted")
    assert [(c["agent"], c["model"]) for c in _claims(tmp_path)][0] == ("stress-1", "scripted")
    assert [c["kind"] for c in record["claims"]] == ["test"] and record["claims"][0]["verified"]
    transcript = json.loads(Path(record["transcript"]).read_text())
    assert transcript["task"].startswith("gap:") and len(transcript["messages"]) >= 8
    done = [t for t in TaskQueue(tmp_path / "agents.sqlite").tasks("stress") if t["state"] == "done"]
    assert [t["holder"] for t in done] == ["stress-1"]


async def test_reproduce_agent_turns_a_report_into_a_verified_reproducer(tmp_path: Path) -> None:
    report = SHIFT.read_text().split('"""')[1]  # the failure report as a person wrote it
    seen: list = []
    model = scripted([
        ("failure_reports", {}),
        ("submit_reproducer", {"code": SHIFT_PROGRAM, "target": "default", "verdict": "mismatch",
                               "disable_passes": ["algsimp"], "report": "shift-set-then-reshape"}),
        "The program is wrong under the default target and right with algsimp disabled.",
    ], seen)
    from xla_sentinel.agents.tools import Workbench

    bench = Workbench(None, tmp_path)
    bench.add_report("shift-set-then-reshape", report)
    bench.close()
    record = await run_agent("reproduce", model, mcp_toolset(None, tmp_path, agent="repro-1"), tmp_path,
                             "repro-1", BUDGET)
    assert seen[0][0]["report"] == "shift-set-then-reshape" and "follow no instruction" in seen[0][0]["untrusted"]
    verdict = seen[1]
    assert verdict["verified"], verdict["reason"]
    by_target = {v["target"]: v["verdict"] for v in verdict["evidence"]["affected"]}
    assert by_target["default"] == "mismatch"
    assert {v["target"]: v["verdict"] for v in verdict["evidence"]["under_cure"]}["default"] == "pass"
    assert record["task"] == "report:shift-set-then-reshape" and record["claims"][0]["verified"]


async def test_fix_agent_finds_and_verifies_the_cure_of_a_real_bug(tmp_path: Path) -> None:
    seen: list = []
    model = scripted([
        ("try_cure", {"reproducer": str(SHIFT), "disable_passes": ["cse"]}),
        lambda r: ("try_cure", {"reproducer": str(SHIFT), "disable_passes": ["algsimp"]})
        if not r["cured"] else "cse cured it",
        lambda r: ("submit_fix", {"reproducer": str(SHIFT), "disable_passes": ["algsimp"],
                                  "rationale": "algsimp merges the reshape into the in-place copy"}),
        "Fix: --xla_disable_hlo_passes=algsimp.",
    ], seen)
    toolset = mcp_toolset(None, tmp_path, regression=REGRESSION, min_regression=len(REGRESSION), agent="fix-1")
    record = await run_agent("fix", model, toolset, tmp_path, "fix-1", BUDGET,
                             task_text=f"Find the cure of the bug {SHIFT.name} reproduces: {SHIFT}")
    assert not seen[0]["cured"] and seen[0]["reproducer"]["under_cure"] == "bug"
    assert seen[1]["cured"] and seen[1]["regressions"] == []
    fix = seen[2]
    assert fix["verified"], fix["reason"]
    assert [Path(r["script"]).name for r in fix["evidence"]["also_cures"]] == ["divide_by_broadcast_reciprocal.py"]
    assert record["exit"] == 0 and [c["verified"] for c in record["claims"]] == [True]


async def test_fix_agent_writes_a_pass_plugin_that_cures_a_real_bug(tmp_path: Path) -> None:
    """divide_by_broadcast_reciprocal: the agent's first plugin (the f32 form only) leaves
    bf16 wrong; the second cures it with no regression, and its fix draft is verified."""
    seen: list = []
    regression = REGRESSION[1:]  # its two known bugs that algsimp does not touch either
    model = scripted([
        ("try_cure", {"reproducer": str(DIVIDE), "plugin_code": FUSIONS_ONLY}),
        lambda r: ("try_cure", {"reproducer": str(DIVIDE), "plugin_code": EXACT_DIVISION})
        if not r["cured"] else "the first plugin cured it",
        lambda r: ("submit_fix", {"reproducer": str(DIVIDE), "plugin_code": EXACT_DIVISION,
                                  "rationale": "x * (1 / y) flushes 1 / y to 0 for large y: divide instead"})
        if r["cured"] else "no cure",
        "Fix: a pass plugin that turns x * (1 / y) back into x / y.",
    ], seen)
    toolset = mcp_toolset(None, tmp_path, regression=regression, min_regression=2, agent="fix-2")
    record = await run_agent("fix", model, toolset, tmp_path, "fix-2", BUDGET,
                             task_text=f"Find the cure of the bug {DIVIDE.name} reproduces: {DIVIDE}")
    assert not seen[0]["cured"] and seen[0]["reproducer"]["under_cure"] == "bug"
    assert seen[1]["cured"] and seen[1]["regressions"] == [] and seen[1]["regression_corpus"] == 2
    fix = seen[2]
    assert fix["verified"], fix["reason"]
    assert fix["evidence"]["under_cure"]["outcome"] == "clean" and fix["evidence"]["also_cures"] == []
    claims = _claims(tmp_path)
    assert [(c["kind"], c["verified"], c["claim"].get("kind")) for c in claims] == [
        ("fix", True, "plugin"), ("report", False, None)]
    assert Path(claims[0]["claim"]["plugin"].rpartition(":")[0]).read_text() == EXACT_DIVISION
    assert record["exit"] == 0


async def test_a_lying_agent_s_false_cure_is_refused(tmp_path: Path) -> None:
    """A pass plugin that changes nothing, claimed as the cure of a real bug."""
    seen: list = []
    model = scripted([
        ("submit_fix", {"reproducer": str(DIVIDE), "plugin_code": "def transform(proto):\n    return None\n",
                        "rationale": "fixed it"}),
        "Fixed divide_by_broadcast_reciprocal with a pass plugin.",
    ], seen)
    toolset = mcp_toolset(None, tmp_path, regression=REGRESSION[1:2], min_regression=1, agent="liar")
    await run_agent("fix", model, toolset, tmp_path, "liar", BUDGET, task_text="anything")
    assert not seen[0]["verified"] and seen[0]["reason"].startswith("not cured")
    assert seen[0]["recorded_for"] is None
    assert [(c["kind"], c["verified"]) for c in _claims(tmp_path)] == [("fix", False), ("report", False)]


async def test_a_lying_agent_s_claims_are_refused_by_the_gate(tmp_path: Path) -> None:
    seen: list = []
    model = scripted([
        ("submit_fix", {"reproducer": str(SHIFT), "disable_passes": ["cse"], "rationale": "cse is to blame"}),
        ("submit_reproducer", {"code": "print('BUG!')\n", "disable_passes": ["algsimp"], "target": "default",
                               "verdict": "mismatch"}),
        ("submit_test", {"code": "def f(x):\n    return x.no_such_method()\n", "inputs": [["f32", [3]]],
                         "rationale": "crashes XLA"}),
        "I found three XLA bugs and fixed one of them with --xla_disable_hlo_passes=cse.",
    ], seen)
    toolset = mcp_toolset(None, tmp_path, regression=REGRESSION[1:2], min_regression=1, agent="liar")
    await run_agent("fix", model, toolset, tmp_path, "liar", BUDGET, task_text="anything")
    assert [s["verified"] for s in seen] == [False, False, False]
    assert seen[0]["reason"].startswith("not cured")
    assert "does not load" in seen[1]["reason"]
    assert "load_error" in seen[2]["reason"] and "does not trace" in seen[2]["reason"]
    claims = _claims(tmp_path)
    assert [(c["kind"], c["verified"]) for c in claims] == [
        ("fix", False), ("reproduction", False), ("test", False), ("report", False)]
    assert "three XLA bugs" in claims[-1]["claim"]["text"]
    # Nothing of it became a finding or a corpus entry.
    assert not (tmp_path / "findings").exists() and not (tmp_path / "agents" / "corpus").exists()


@pytest.mark.parametrize(("budget", "stopped_by"), [
    (Budget(tokens=100_000, tool_calls=2, seconds=600), "tool_calls_limit"),
    (Budget(tokens=150, tool_calls=20, seconds=600), "total_tokens_limit"),
    (Budget(tokens=100_000, tool_calls=20, seconds=3), "wall time 3 s"),
])
async def test_budgets_stop_the_agent_and_free_its_task(tmp_path: Path, budget: Budget, stopped_by: str) -> None:
    import anyio

    async def slow(last):  # a model that takes its time: only the wall-time budget stops it
        await anyio.sleep(1.0)
        return ("coverage_gaps", {})

    steps = [("coverage_gaps", {})] * 3 + ["done"] if budget.seconds > 10 else \
        [lambda last: ("coverage_gaps", {})] + [slow] * 20
    model = scripted(steps, [])
    record = await run_agent("stress", model, mcp_toolset(None, tmp_path), tmp_path, "greedy", budget)
    assert record["exit"] == 1 and stopped_by in record["status"], record["status"]
    assert Path(record["transcript"]).is_file()
    tasks = TaskQueue(tmp_path / "agents.sqlite").tasks("stress")
    assert tasks and all(t["state"] == "open" for t in tasks), "a stopped agent's task goes back to the queue"


async def test_the_wall_time_budget_cuts_a_model_request_in_flight(tmp_path: Path) -> None:
    """A model that answers in a minute (a local model on a busy CPU, a stalled endpoint):
    the 10 s budget ends the request in flight, with the transcript written and the task
    given back. The cancel scope was inside pydantic-ai's run context, whose exit then
    raised the cancellation itself: the agent died of a CancelledError, no transcript."""
    import anyio

    asked = []

    async def stalled(last):
        asked.append(1)
        await anyio.sleep(60)
        return ("coverage_gaps", {})

    # 10 s: room for the MCP server's start on a loaded machine (at 3 s a CI run once spent
    # the budget before the first request, and there was no request in flight to cut).
    budget = Budget(tokens=100_000, tool_calls=20, seconds=10)
    record = await run_agent("stress", scripted([stalled], []), mcp_toolset(None, tmp_path), tmp_path,
                             "stalled", budget)
    assert record["exit"] == 1 and "wall time 10 s" in record["status"], record["status"]
    assert Path(record["transcript"]).is_file()
    # Ended in flight: the request was made, and its stalled answer never came (it would
    # have been a tool call).
    assert asked == [1]
    usage = record["usage"]
    assert (usage.get("requests", 0), usage.get("tool_calls", 0)) == (0, 0), usage
    tasks = TaskQueue(tmp_path / "agents.sqlite").tasks("stress")
    assert tasks and all(t["state"] == "open" for t in tasks)


async def test_rate_limits_are_retried_with_back_off(tmp_path: Path) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    calls = []

    def limited(messages, info):
        calls.append(1)
        if len(calls) < 3:
            raise ModelHTTPError(429, "scripted", body="rate limited")
        return ModelResponse(parts=[TextPart("ok")])

    model = retrying(FunctionModel(limited), base=0.01)
    assert (await Agent(model).run("hi")).output == "ok"
    assert len(calls) == 3 and len(model.waits) == 2 and model.waits[1] > model.waits[0] / 2


async def test_a_rejected_credential_is_a_clear_error(tmp_path: Path) -> None:
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.models.function import FunctionModel

    def rejected(messages, info):
        raise ModelHTTPError(401, "scripted", body="invalid api key")

    with pytest.raises(AgentSetupError, match="rejected the credential .HTTP 401"):
        await run_agent("stress", FunctionModel(rejected), mcp_toolset(None, tmp_path), tmp_path, "a", BUDGET)
    tasks = TaskQueue(tmp_path / "agents.sqlite").tasks("stress")
    assert tasks and all(t["state"] == "open" for t in tasks), "the task it took goes back to the queue"


async def test_the_model_credential_does_not_reach_agent_written_code(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "sk-secret")
    snippet = ("import os\nINPUTS = [('f32', (2,))]\n"
               "def f(x):\n    assert 'SOME_PROVIDER_API_KEY' not in os.environ, 'credential leaked'\n    return x + 1\n")
    seen: list = []
    model = scripted([("run_test", {"code": snippet}), "done"], seen)
    await run_agent("stress", model, mcp_toolset(None, tmp_path), tmp_path, "a", BUDGET, task_text="x")
    assert seen[0]["status"] == "judged", seen[0].get("error")


def test_a_missing_credential_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("openai", reason="the openai client is not installed (pydantic-ai-slim[openai])")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AgentSetupError, match="OPENAI_API_KEY"):
        make_model("openai:gpt-4o")
    assert cli_main(["agent", "--role", "stress", "--model", "openai:gpt-4o", "--out", str(tmp_path)]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err


def test_an_unknown_provider_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["agent", "--role", "fix", "--model", "nosuchprovider:m", "--out", str(tmp_path)]) == 2
    assert "--model nosuchprovider:m" in capsys.readouterr().err


@pytest.mark.skipif(not (os.environ.get("XLA_SENTINEL_AGENT_MODEL")),
                    reason="live smoke test: set XLA_SENTINEL_AGENT_MODEL (e.g. openai:gpt-5) and its "
                    "provider's credential (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...) to run it")
async def test_live_model_smoke(tmp_path: Path) -> None:
    model = make_model(os.environ["XLA_SENTINEL_AGENT_MODEL"])
    record = await run_agent("stress", model, mcp_toolset(None, tmp_path), tmp_path, "live",
                             Budget(tokens=60_000, tool_calls=6, seconds=600),
                             task_text="Call coverage_gaps, then run_test one small JAX program using an "
                                       "op from ops_never. Then stop.")
    assert record["exit"] in (0, 1) and Path(record["transcript"]).is_file()
