"""The agent swarm in the cluster: a FuzzCampaign with spec.agents (two stress agents, one
fix agent) -> the operator's agent Jobs -> agent pods on the node, each `xla-sentinel
agent` with its MCP server, the engine and XLA behind it -> one task queue of Leases ->
a verified fix draft -> the operator writes BugSignature status.fixDraft and an Event.

What is not real here, and why:
- the model. No remote model API can exist in the tests, so the test serves a scripted
  one: a small OpenAI-compatible HTTP server (Chat Completions) on loopback, reached by the
  agents' real client path (`openai-chat:scripted`, spec.agents.endpoint as
  OPENAI_BASE_URL, the API key from the campaign's Secret). It answers with tool calls
  read from each agent's prompt (its task, its name); it decides nothing the gate checks.
- the node. The pods run on the fake node of tests/controlplane/kubelet.py (containers are
  processes of this checkout's .venv, which has the `agents` extra): three agents at once
  do not fit on the real node, this 2-core machine, where an agent pod's two containers
  request one CPU each. The runner image installs `.[engine,agents]`, and
  tests/node/test_swarm_node.py runs one fix agent from it on the real node (its sandbox
  container included, started by a new signature, its run kept on the artifacts volume).
- the BugSignature the fix agent works on is created by the test, as the operator would
  after a bisection, with the repository's reproducer of a real XLA:CPU bug
  (bench/repros/shift_set_then_reshape.py, cured by disabling algsimp, not cse) as its
  repro. The cure is found and verified for real by the gate in the agent's pod.
- the workers' coverage. A pod reads it from the workers' output on the artifacts PVC or in
  the bucket (agents/sources.py); on the fake node a volume is a folder of one pod and no
  bucket exists, so the stress tasks are seeded by the test from a worker's summary.json,
  through the same Workbench.seed_tasks a pod runs (test_swarm_sources.py tests that path,
  and that a pod with nothing covered queues no stress task).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from controlplane.kit import chart_operator_flags, kubectl
from tools import REPO_ROOT
from xla_sentinel.agents.kube_tasks import ROLE_LABEL, STATE_ANNOTATION, TASK_LABEL, KubeTaskQueue
from xla_sentinel.agents.sources import campaign_coverage
from xla_sentinel.agents.tools import Workbench
from xla_sentinel.cluster.report import CAMPAIGN_LABEL, writer_name
from xla_sentinel.spec.campaign import OP_NAMES

from .chat_endpoint import ChatEndpoint
from .conftest import API, as_service_account, campaign, eventually

REPO_REPROS = REPO_ROOT / "bench" / "repros"
SHIFT = REPO_REPROS / "shift_set_then_reshape.py"
# A regression corpus small enough for the suite (the gate's default is every reproducer
# in bench/repros), set by the operator (--agent-regression-corpus), not by the agent: one
# known bug algsimp cures too, two it does not.
# Links to them in a folder of the checkout (an agent pod's /tmp is its own emptyDir).
REGRESSION = ("divide_by_broadcast_reciprocal.py", "reduce_max_drops_nan.py", "atan2_subnormal_nan.py")
CORPUS = Path(__file__).parent / "data" / "regression-corpus"
SIGNATURE = "5e1f7a00c0ffee01"
KEY = "sk-scripted-0123"
_WHO = re.compile(r"You are agent '([^']+)'")


class ScriptedModel(ChatEndpoint):
    """An OpenAI-compatible Chat Completions endpoint that plays each agent's script. It
    records every request: who asked (the agent named in its prompt), about which task,
    with which credential, and what the tools answered."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []

    @staticmethod
    def _text(content: Any) -> str:
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content or "")

    def step(self, role: str, n: int, task: dict[str, Any]) -> Any:
        if role == "stress":
            gap = task.get("op") or task.get("fusion_kind") or "x"
            code = f"import jax.numpy as jnp\n\n# gap: {gap}\ndef f(x):\n    return jnp.tanh(x) * 2 + x\n"
            return [("submit_test", {"code": code, "inputs": [["f32", [8]]], "rationale": f"fills the gap {gap}"}),
                    f"submitted a test for {gap}"][n]
        repro = task["repro"]
        return [("try_cure", {"reproducer": repro, "disable_passes": ["cse"]}),
                ("submit_fix", {"reproducer": repro, "disable_passes": ["algsimp"],
                                "rationale": "algsimp folds the shifted set into the reshape; cse does not cure it"}),
                "submitted the algsimp fix"][n]

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        msgs = body["messages"]
        prompt = next(self._text(m["content"]) for m in msgs if m["role"] == "user")
        (agent,) = _WHO.search(prompt).groups()
        task = json.loads(prompt.split("Your task:\n", 1)[1].split("\n\nYou are agent", 1)[0])
        results = [self._text(m.get("content")) for m in msgs if m["role"] == "tool"]
        role = "fix" if "You are a fix agent" in prompt else "stress"
        self.requests.append({"agent": agent, "role": role, "task": task, "step": len(results),
                              "auth": request.headers.get("Authorization"), "results": results,
                              "tools": sorted(t["function"]["name"] for t in body.get("tools") or [])})
        out = self.step(role, len(results), task)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(out, str):
            message["content"], finish = out, "stop"
        else:
            name, args = out
            message["tool_calls"] = [{"id": f"call-{len(self.requests)}", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}]
            finish = "tool_calls"
        return web.json_response({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})



@pytest.fixture
async def scripted_model() -> AsyncIterator[ScriptedModel]:
    m = ScriptedModel()
    await m.start()
    yield m
    await m.close()


def spec(endpoint: str) -> dict[str, Any]:
    return {"seed": 1, "workers": 1, "targets": [{"name": "default"}, {"name": "O0"}],
            "budget": {"programs": 1},
            "generator": {"version": 1, "minOps": 2, "maxOps": 4, "dtypes": ["f32"]},
            "bisect": {"enabled": False},
            "agents": {"model": "openai-chat:scripted", "endpoint": endpoint,
                       "credentialSecretRef": {"name": "model-key", "key": "api-key"},
                       "budget": {"tokens": 200000, "toolCalls": 10, "seconds": 900},
                       "roles": [{"role": "stress", "replicas": 2}, {"role": "fix", "replicas": 1}]}}


def seed_gaps(control_plane, api, ns: str, campaign_name: str, tmp: Path) -> int:
    """Queue the stress tasks of a worker's coverage (all ops but four) as a pod would, as
    the chart's agent ServiceAccount."""
    import kubernetes

    worker = tmp / "artifacts" / campaign_name / "default-0"
    worker.mkdir(parents=True)
    ops = {op: 3 for op in sorted(OP_NAMES)[4:]}
    (worker / "summary.json").write_text(json.dumps({"coverage": {"programs": 20, "ops": ops,
                                                                  "fusion_kinds": {"kLoop": 9}}}))
    agent = as_service_account(control_plane, api, ns, chart_operator_flags()["--agent-service-account"])
    client = kubernetes.config.new_client_from_config(config_file=str(agent))
    bench = Workbench(None, tmp / "seeder", regression=[],
                      covered=partial(campaign_coverage, campaign_name, True, None, tmp / "artifacts"))
    bench.queue.close()
    bench.queue = KubeTaskQueue(kubernetes.client.CustomObjectsApi(client), ns, campaign_name)
    try:
        return bench.seed_tasks()["stress"]
    finally:
        bench.close()


@pytest.mark.timeout(900)  # three agents and their XLA compiles share the machine's cores
async def test_two_stress_agents_and_a_fix_agent_share_one_queue_and_draft_a_verified_fix(
        control_plane, api, ns, start_operator, node, scripted_model, tmp_path):
    fake = node()
    # The chart's agent ServiceAccount and Role (the ns fixture applied them), as the chart's
    # Deployment passes it.
    assert sorted(p.name for p in CORPUS.glob("*.py")) == sorted(REGRESSION)
    await start_operator(jobs={"agent_service_account": chart_operator_flags()["--agent-service-account"],
                               "agent_regression_corpus": str(CORPUS), "agent_min_regression": len(REGRESSION)})
    api.create("v1/secrets", ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key"},
                                  "data": {"api-key": base64.b64encode(KEY.encode()).decode()}})
    # The bug, before the campaign: the fix agent's pod seeds its task from it.
    api.create(f"{API}/bugsignatures", ns, {
        "apiVersion": API, "kind": "BugSignature", "metadata": {"name": f"sig-{SIGNATURE}"},
        "spec": {"signature": SIGNATURE, "verdict": "mismatch", "culpritOp": "dynamic_update_slice",
                 "repro": str(SHIFT)}})
    api.patch(f"{API}/bugsignatures", ns, f"sig-{SIGNATURE}", {"status": {"campaigns": ["swarm"], "count": 1}},
              sub="status")
    assert seed_gaps(control_plane, api, ns, "swarm", tmp_path) == 8  # 4 ops, 4 fusion kinds
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(campaign(ns, "swarm", **spec(scripted_model.url))))
    assert done.returncode == 0, done.stderr

    def agent_pods() -> list[dict]:
        return api.all("v1/pods", ns, {"xlasentinel.dev/role": "agent"})

    # Every agent finishes its task and exits 0.
    try:
        pods = await eventually(lambda: len(p := agent_pods()) == 3
                                and all(x["status"].get("phase") in ("Succeeded", "Failed") for x in p) and p,
                                timeout=720, interval=2)
    except AssertionError:
        raise AssertionError({x["metadata"]["name"]: (x["status"].get("phase"), fake.logs(ns, x["metadata"]["name"])[-2500:])
                              for x in agent_pods()}) from None
    logs = {x["metadata"]["name"]: fake.logs(ns, x["metadata"]["name"]) for x in pods}
    assert all(x["status"]["phase"] == "Succeeded" for x in pods), {k: v[-3000:] for k, v in logs.items()}
    by_role = defaultdict(list)
    for x in pods:
        by_role[x["metadata"]["labels"][ROLE_LABEL]].append(writer_name(x["metadata"]["name"]))
    assert sorted(map(len, by_role.values())) == [1, 2]

    # The queue: each taken task was taken once, by the agent that finished it.
    leases = api.all("coordination.k8s.io/v1/leases", ns, {CAMPAIGN_LABEL: "swarm", TASK_LABEL: "true"})
    taken = [x for x in leases if x["metadata"]["annotations"][STATE_ANNOTATION] != "open"]
    assert all(x["metadata"]["annotations"][STATE_ANNOTATION] == "done" for x in taken)
    assert all(x["spec"]["leaseTransitions"] == 1 for x in taken)
    holders = Counter((x["metadata"]["labels"][ROLE_LABEL], x["spec"]["holderIdentity"]) for x in taken)
    assert holders == Counter({("stress", a): 1 for a in by_role["stress"]} | {("fix", by_role["fix"][0]): 1})
    assert len(leases) > len(taken)  # the gaps no agent got to wait for the next one
    (fix_lease,) = [x for x in taken if x["metadata"]["labels"][ROLE_LABEL] == "fix"]
    assert fix_lease["metadata"]["annotations"]["xlasentinel.dev/task-key"] == f"signature:{SIGNATURE}"

    # The transcripts (the model's side, and each pod's record): one task per agent, none twice.
    tasks_of: dict[str, set[str]] = defaultdict(set)
    for r in scripted_model.requests:
        tasks_of[r["agent"]].add(json.dumps(r["task"], sort_keys=True))
    assert sorted(tasks_of) == sorted(by_role["stress"] + by_role["fix"])
    assert all(len(t) == 1 for t in tasks_of.values())
    assert len({next(iter(t)) for t in tasks_of.values()}) == 3
    recorded = [m for log in logs.values() for m in re.findall(r'"task": "([^"]+)"', log)]
    assert sorted(recorded) == sorted(x["metadata"]["annotations"]["xlasentinel.dev/task-key"] for x in taken)
    assert {r["auth"] for r in scripted_model.requests} == {f"Bearer {KEY}"}  # from the Secret
    assert "submit_fix" in scripted_model.requests[0]["tools"]

    # The fix agent tried cse first (not a cure), then algsimp, which the gate verified.
    fix_requests = [r for r in scripted_model.requests if r["role"] == "fix"]
    tried = json.loads(fix_requests[1]["results"][0])
    assert tried["cured"] is False and tried["verified_fix"] is False
    submitted = json.loads(fix_requests[2]["results"][1])
    assert submitted["verified"] is True, submitted

    # The operator wrote the draft on the signature, and said so.
    sig = await eventually(lambda: (s := api.get(f"{API}/bugsignatures", ns, f"sig-{SIGNATURE}"))
                           and s.get("status", {}).get("fixDraft") and s, timeout=60)
    draft = sig["status"]["fixDraft"]
    assert draft["cure"] == "--xla_disable_hlo_passes=algsimp"
    assert draft["agent"] == by_role["fix"][0] and draft["model"] == "openai-chat:scripted"  # the spec's, as the server knows it
    assert draft["regressionCorpus"] == 3 and draft.get("regressions", []) == []
    assert [p.rsplit("/", 1)[-1] for p in draft["alsoCures"]] == ["divide_by_broadcast_reciprocal.py"]
    evidence = json.loads(draft["evidence"])
    assert (evidence["affected"], evidence["under_cure"]) == ("bug", "clean")
    events = await eventually(lambda: [e for e in api.all("v1/events", ns) if e["reason"] == "FixDrafted"
                                       and e["involvedObject"]["kind"] == "BugSignature"] or None, timeout=30)
    assert SIGNATURE in events[0]["message"] and "algsimp" in events[0]["message"]
    # The stress agents' tests were judged by the oracle and kept: the gate verified them.
    kept = [json.loads(r["results"][0]) for r in scripted_model.requests if r["role"] == "stress" and r["step"] == 1]
    assert len(kept) == 2 and all(k["verified"] and k["corpus_entry"] for k in kept), kept
