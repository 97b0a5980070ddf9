"""`xla-sentinel agent --role stress|reproduce|fix`: one agent loop over the MCP tools, on
pydantic-ai (its MCP toolset, its OpenAI-compatible, Anthropic, Gemini and Vertex models).

The agent takes one task of its role from the campaign's queue (`tasks.TaskQueue`, under a
lease) or the one given with --task, talks to `xla-sentinel mcp` over stdio (a child
process of its own, or a running server with --mcp-url), and stops at its budget: tokens
and tool calls (pydantic-ai's UsageLimits) and wall time. Its transcript goes to
OUT/agents/transcripts/, beside the claims it made (the gate's claims table) and what the
gate kept. Its final answer is itself a claim, stored unverified.

Exit codes: 0 the agent finished (or found no task), 1 a budget stopped it, 2 a missing or
rejected credential or another bad input. A rate limit (HTTP 429, or a provider's
overloaded 503/529) is retried with exponential back-off, honouring Retry-After
(`RetryingModel`).
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from xla_sentinel.agents.gate import Decision, Ledger
from xla_sentinel.agents.tasks import Task, TaskQueue
from xla_sentinel.core.errors import UserError
from xla_sentinel.spec.campaign import AGENT_ROLES as ROLES

RETRY_STATUSES = (429, 503, 529)
_SECRET = re.compile(r"API_KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS", re.IGNORECASE)
CREDENTIAL_STATUSES = (401, 403)

ROLE_PROMPTS = {
    "stress": (
        "You are a stress-test agent for the XLA compiler. Write small JAX programs that exercise "
        "what the campaign has not (coverage_gaps), judge them with run_test, and submit_test the "
        "ones worth keeping (a failing target, or a gap filled) with a rationale. Tests count only "
        "once the oracle judged them."),
    "reproduce": (
        "You are a reproduction agent. From a written failure report, write a self-contained "
        "repro.py (jax and numpy only) that exits 1 while the bug shows and 0 once fixed, find "
        "the XLA flag or disabled pass under which it exits 0, and submit_reproducer with that "
        "cure. It counts only once it exits 1 on this build and 0 under the cure."),
    "fix": (
        "You are a fix agent. For a bug's reproducer, find a cure with try_cure (HLO passes to "
        "disable, XLA flags, an HLO pass plugin that rewrites the optimized module, or for a "
        "repro bundle a rewrite of its program), and submit_fix the one that cures it without "
        "regressions in the known bugs' reproducers. A fix counts only once the gate verified it."),
}


class AgentSetupError(UserError, RuntimeError):
    """A missing or rejected credential, or a model the library does not know: exit 2."""


@dataclass(frozen=True)
class Budget:
    tokens: int | None = 400_000
    tool_calls: int | None = 60
    seconds: float = 1800.0

    def __post_init__(self) -> None:
        if self.tokens is not None and self.tokens <= 0:
            raise ValueError("--max-tokens: must be > 0")
        if self.tool_calls is not None and self.tool_calls <= 0:
            raise ValueError("--max-tool-calls: must be > 0")
        if not self.seconds > 0:
            raise ValueError("--max-seconds: must be > 0")


def retrying(model: Any, attempts: int = 6, base: float = 1.0, cap: float = 60.0) -> Any:
    """`model`, retried on rate limits with exponential back-off and jitter (Retry-After first)."""
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.models.wrapper import WrapperModel

    class RetryingModel(WrapperModel):
        waits: list[float]

        async def request(self, *args: Any, **kwargs: Any) -> Any:
            import anyio

            for attempt in range(attempts):
                try:
                    return await super().request(*args, **kwargs)
                except ModelHTTPError as e:
                    if e.status_code not in RETRY_STATUSES or attempt == attempts - 1:
                        raise
                    after = (e.headers or {}).get("retry-after")
                    wait = float(after) if after and after.replace(".", "", 1).isdigit() else \
                        min(cap, base * 2 ** attempt) * (0.5 + random.random() / 2)
                    self.waits.append(wait)
                    await anyio.sleep(wait)
            raise AssertionError("unreachable")

    wrapped = RetryingModel(model)
    wrapped.waits = []
    return wrapped


def make_model(name: str) -> Any:
    """A pydantic-ai model from `provider:model` (openai:..., anthropic:..., google-gla:...,
    google-vertex:...; OPENAI_BASE_URL for any OpenAI-compatible endpoint). A credential
    the provider needs and the environment lacks is an AgentSetupError."""
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model

    try:
        return infer_model(name)
    except UserError as e:
        raise AgentSetupError(f"--model {name}: {e}") from None
    except ImportError as e:
        raise AgentSetupError(f"--model {name}: the provider's client is not installed ({e}); "
                              "pip install 'pydantic-ai-slim[openai,anthropic,google]'") from None


def mcp_toolset(campaign: Path | None, out: Path, url: str | None = None,
                inject_passes: Sequence[str] = (), regression: Sequence[str] | None = None) -> Any:
    """The MCP tools: a running server at `url`, or `xla-sentinel mcp` as a child over stdio."""
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    if url:
        return MCPToolset(url, id="xla-sentinel", read_timeout=3600)
    args = ["-m", "xla_sentinel.cli.entry", "mcp", "--out", str(out)]
    if campaign:
        args += ["--campaign", str(campaign)]
    for ref in inject_passes:
        args += ["--inject-pass", ref]
    for r in regression or ():
        args += ["--regression", str(r)]
    # The server runs agent-written code in its workers: the model's credential stays here.
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    transport = StdioTransport(sys.executable, args, env=env, keep_alive=False)
    return MCPToolset(transport, id="xla-sentinel", read_timeout=3600, init_timeout=120)


def task_prompt(role: str, task: Task | None, text: str | None, agent: str | None = None,
                model: str | None = None) -> str:
    what = text if text is not None else json.dumps(task.payload if task else {}, indent=1)
    # The submit_* tools take the agent's name and model: its claims are found by them.
    who = f"\n\nSubmit as agent {agent!r}, model {model!r}." if agent else ""
    return f"{ROLE_PROMPTS[role]}\n\nYour task:\n{what}{who}\n\nEnd with a short summary of what you submitted."


async def run_agent(role: str, model: Any, toolset: Any, out: Path, agent: str, budget: Budget,
                    task_text: str | None = None, lease_seconds: float | None = None,
                    campaign: Path | None = None, swarm: Any = None) -> dict[str, Any]:
    """One agent loop; returns its record (also written as the transcript's header).

    `swarm` (agents/swarm.Swarm, in an agent pod of a campaign's swarm): the task comes
    from the campaign's queue of Leases, seeded also from its BugSignatures, and the
    verified fix drafts go back to the operator through the pod's result object."""
    import anyio
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError, UsageLimitExceeded, UserError
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai.usage import UsageLimits

    if role not in ROLES:
        raise ValueError(f"--role: {role!r}; one of {', '.join(ROLES)}")
    queue: Any = swarm.queue if swarm is not None else TaskQueue(out / "agents.sqlite")
    ledger = Ledger(out / "agents.sqlite")
    task = None
    if task_text is None:
        from xla_sentinel.agents.tools import Workbench

        bench = Workbench(campaign, out)
        if swarm is not None:  # the campaign's gaps and reports go to the shared queue
            bench.queue.close()
            bench.queue = queue
            swarm.seed(queue)
        try:
            bench.seed_tasks()
        finally:
            bench.close()
        task = queue.lease(role, agent, lease_seconds or budget.seconds + 60)
        if task is None:
            queue.close()
            ledger.close()
            return {"role": role, "agent": agent, "status": "no_task", "exit": 0}
    started = time.time()
    first_claim = max([c["id"] for c in ledger.claims()] or [0])
    model_name = getattr(model, "model_name", str(model))
    runner = Agent(retrying(model), toolsets=[toolset], name=agent)
    limits = UsageLimits(request_limit=None, tool_calls_limit=budget.tool_calls,
                         total_tokens_limit=budget.tokens)
    messages: list[Any] = []
    output, status, code, usage = None, "done", 0, {}
    finished = False
    try:
        async with runner.iter(task_prompt(role, task, task_text, agent, model_name), usage_limits=limits) as run:
            try:
                with anyio.fail_after(budget.seconds):
                    async for _ in run:
                        pass
                output = run.result.output if run.result else None
            except UsageLimitExceeded as e:
                status, code = f"budget: {e}", 1
            except TimeoutError:
                status, code = f"budget: wall time {budget.seconds:.0f} s", 1
            messages = run.all_messages()
            usage = asdict(run.usage)
        finished = True
    except ModelHTTPError as e:
        if e.status_code in CREDENTIAL_STATUSES:
            raise AgentSetupError(f"the model endpoint rejected the credential (HTTP {e.status_code}): "
                                  f"{e.message if hasattr(e, 'message') else e}") from None
        raise
    except UserError as e:
        raise AgentSetupError(str(e)) from None
    finally:
        # Stopped by a budget or an error: the task goes back to the queue for another agent.
        if task is not None and (code != 0 or not finished):
            queue.release(task, agent)
        if not finished:
            queue.close()
            ledger.close()
    claims = [c for c in ledger.claims() if c["id"] > first_claim and c["agent"] == agent]
    transcripts = out / "agents" / "transcripts"
    transcripts.mkdir(parents=True, exist_ok=True)
    path = transcripts / f"{role}-{agent}-{int(started)}.json"
    record = {"role": role, "agent": agent, "model": model_name, "status": status, "exit": code,
              "task": task.key if task else task_text, "seconds": round(time.time() - started, 1),
              "usage": usage, "output": output, "transcript": str(path),
              "claims": [{"id": c["id"], "kind": c["kind"], "verified": c["verified"], "reason": c["reason"]}
                         for c in claims]}
    if output:
        # The final answer is what the agent says it did: a claim, never a finding.
        ledger.record("report", agent, model_name, {"text": str(output), "transcript": str(path)},
                      Decision(False, "an agent's own account: only the claims the gate verified count"))
    path.write_text(json.dumps({**record, "messages": json.loads(ModelMessagesTypeAdapter.dump_json(messages))},
                               indent=1, default=str))
    if swarm is not None:  # only what the gate verified; the operator checks it again
        record["fix_drafts"] = swarm.publish(claims, {"key": task.key, "payload": task.payload} if task else None)
    if task is not None and code == 0:
        queue.finish(task, agent, {"claims": record["claims"], "transcript": str(path)})
    queue.close()
    ledger.close()
    return record
