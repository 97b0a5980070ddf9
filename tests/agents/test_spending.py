"""Poison tasks and the campaign-wide budget: a task that keeps failing is dropped after
its last attempt, what each attempt spent is kept with its task, and agents take no task
once the campaign's budget is spent. The queue is the real SQLite one (the Lease queue's
are in tests/k8s/test_swarm_queue.py), the agent loop the real one; the model is a
FunctionModel (no remote model API exists here) and the toolset empty, since no tool is
needed to fail or to spend."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from xla_sentinel.agents.runtime import EXIT_BUDGET, EXIT_CRASH, Budget, run_agent
from xla_sentinel.agents.spend import Budget as SpendingBudget
from xla_sentinel.agents.spend import Spend, messages_spend, response_spend
from xla_sentinel.agents.tasks import QueueError, TaskQueue

PER_TASK = Budget(tokens=100_000, tool_calls=5, seconds=120)


def _toolset() -> Any:
    from pydantic_ai.toolsets import FunctionToolset

    return FunctionToolset([])


def _answering(tokens_in: int, tokens_out: int) -> Any:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import RequestUsage

    def answer(messages: list[Any], info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart("nothing to submit")],
                             usage=RequestUsage(input_tokens=tokens_in, output_tokens=tokens_out))

    return FunctionModel(answer, model_name="scripted")


def _crashing() -> Any:
    from pydantic_ai.models.function import FunctionModel

    def crash(messages: list[Any], info: Any) -> Any:
        raise ConnectionResetError("the model endpoint went away")

    return FunctionModel(crash, model_name="crashing")


def test_a_task_taken_its_last_time_is_dropped_with_its_failures(tmp_path: Path) -> None:
    queue = TaskQueue(tmp_path / "agents.sqlite", max_attempts=2)
    queue.put("fix", "signature:a", {"signature": "a"})
    for n in (1, 2):
        task = queue.lease("fix", f"agent-{n}", 600)
        assert task is not None and task.key == "signature:a"
        queue.release(task, f"agent-{n}", f"crash {n}", Spend(100, 0.01, 0))
    assert queue.lease("fix", "agent-3", 600) is None  # not a third time
    (row,) = queue.tasks("fix")
    assert row["state"] == "dropped" and row["attempts"] == 2
    assert row["result"] == {"error": "dropped after 2 failed attempts", "attempts": 2,
                             "failures": ["crash 1", "crash 2"]}
    assert queue.spent() == Spend(200, 0.02, 0)
    # A holder that died counts as an attempt too: its lease runs out and the task is free.
    queue.put("fix", "signature:b", {"signature": "b"})
    assert queue.lease("fix", "dies", -1) is not None  # a lease that ran out already
    assert queue.lease("fix", "next", 600) is not None
    with pytest.raises(QueueError, match="max_attempts: 0"):
        TaskQueue(tmp_path / "other.sqlite", max_attempts=0)


def test_a_queue_file_of_the_first_schema_gains_the_new_columns(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "agents.sqlite")
    db.executescript("CREATE TABLE tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, role TEXT NOT NULL, "
                     "key TEXT NOT NULL UNIQUE, payload TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'open', "
                     "holder TEXT, lease_until REAL, result TEXT, created REAL NOT NULL);"
                     "INSERT INTO tasks (role, key, payload, created) VALUES ('stress', 'gap:op:add', '{}', 0);")
    db.commit()
    db.close()
    queue = TaskQueue(tmp_path / "agents.sqlite")
    task = queue.lease("stress", "a", 600)
    assert task is not None and queue.tasks()[0]["attempts"] == 1
    queue.finish(task, "a", {}, Spend(5, 0.0, 5))
    assert queue.spent() == Spend(5, 0.0, 5)


async def test_a_task_whose_agent_keeps_crashing_is_dropped_not_handed_out_forever(tmp_path: Path) -> None:
    TaskQueue(tmp_path / "agents.sqlite").put("reproduce", "report:sha256:00", {"report": "x", "text": "NaN"})
    records = [await run_agent("reproduce", _crashing(), _toolset(), tmp_path, f"r-{n}", PER_TASK, task_attempts=2)
               for n in range(3)]
    assert [r["exit"] for r in records] == [EXIT_CRASH, EXIT_CRASH, 0]
    assert records[2]["status"] == "no_task"
    (task,) = TaskQueue(tmp_path / "agents.sqlite").tasks("reproduce")
    assert task["state"] == "dropped" and task["attempts"] == 2
    assert all("ConnectionResetError" in f for f in task["result"]["failures"])


async def test_agents_stop_taking_tasks_once_the_campaign_budget_is_spent(tmp_path: Path) -> None:
    queue = TaskQueue(tmp_path / "agents.sqlite")
    for key in ("report:sha256:01", "report:sha256:02", "report:sha256:03"):
        queue.put("reproduce", key, {"report": key, "text": "wrong numbers"})
    queue.close()
    campaign = SpendingBudget(tokens=1500)
    model = _answering(600, 400)  # 1,000 tokens an answer
    first = await run_agent("reproduce", model, _toolset(), tmp_path, "r-1", PER_TASK, spending=campaign)
    assert first["exit"] == 0 and first["spent"]["tokens"] == 1000
    # 500 tokens are left: the task's own limit is cut to that, and the answer passes it.
    second = await run_agent("reproduce", model, _toolset(), tmp_path, "r-2", PER_TASK, spending=campaign)
    assert second["exit"] == EXIT_BUDGET and second["spent"]["tokens"] == 1000, second["status"]
    third = await run_agent("reproduce", model, _toolset(), tmp_path, "r-3", PER_TASK, spending=campaign)
    assert third["exit"] == EXIT_BUDGET and third["status"] == "budget: campaign budget spent: 2000 of 1500 tokens"
    tasks = {t["key"]: t for t in TaskQueue(tmp_path / "agents.sqlite").tasks("reproduce")}
    assert [tasks[k]["state"] for k in sorted(tasks)] == ["done", "open", "open"]
    assert tasks["report:sha256:03"]["attempts"] == 0  # never taken
    assert TaskQueue(tmp_path / "agents.sqlite").spent() == Spend(2000, 0.0, 2000)  # "scripted" has no price
    transcript = json.loads(Path(first["transcript"]).read_text())
    assert transcript["spent"] == {"tokens": 1000, "usd": 0.0, "unpricedTokens": 1000}


def test_money_is_priced_from_genai_prices_offline_data() -> None:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.usage import RequestUsage

    priced = ModelResponse(parts=[TextPart("x")], usage=RequestUsage(input_tokens=1_000_000, output_tokens=1_000_000),
                           model_name="gpt-4o-mini", provider_name="openai")
    spent = response_spend(priced)
    assert spent.tokens == 2_000_000 and spent.unpriced_tokens == 0
    assert spent.usd == pytest.approx(0.15 + 0.60)  # gpt-4o-mini: $0.15 and $0.60 per million
    unknown = ModelResponse(parts=[TextPart("x")], usage=RequestUsage(input_tokens=10, output_tokens=5),
                            model_name="qwen2.5-coder-1.5b-instruct-q8", provider_name="openai")
    assert response_spend(unknown) == Spend(15, 0.0, 15)
    assert messages_spend([priced, unknown]) == spent + Spend(15, 0.0, 15)
    budget = SpendingBudget(usd=0.5)
    assert budget.exhausted(spent) == "campaign budget spent: $0.7500 of $0.5000"
    assert budget.left(Spend(0, 0.2, 0)) == {"usd": 0.3}
    assert SpendingBudget().exhausted(spent) is None and SpendingBudget().left(spent) == {}


@pytest.mark.parametrize("raw", [None, "x", {"tokens": -1}, {"usd": float("nan")}, {"tokens": "many"}])
def test_a_garbled_spending_record_counts_as_nothing(raw: object) -> None:
    assert Spend.from_json(raw) == Spend()
