"""Agent work started by events, on the test control plane: a campaign's agent Jobs run
once at create, while nothing is covered and no signature exists, so their pods find no
task and exit; then the operator's roll-up sees a new signature with a repro, its workers'
coverage stop growing, and a failure report (handed over in a ConfigMap, seeded into the
queue by the fix agent's pod: the operator reads no ConfigMaps) that no reproduce agent
took, and starts a wave of the right role for each (operator waves.py,
agents.converge_waves), whose pod takes the task.

Real: the API server and controller-manager (Jobs complete), the operator as the chart's
ServiceAccount, the agent pods (`xla-sentinel agent` processes of this checkout's .venv on
the fake node, as the chart's agent ServiceAccount), the Lease queue, the campaign's worker
(the engine, one program) and its WorkerReport's coverage. Not real: the model, an
OpenAI-compatible Chat Completions endpoint on loopback that answers every request with a
final text and records who asked about what (no remote model API exists in the tests); the
work a model would do is test_swarm.py's."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from aiohttp import web
from controlplane.kit import chart_operator_flags, kubectl
from xla_sentinel.agents.kube_tasks import KEY_ANNOTATION, STATE_ANNOTATION, TASK_LABEL
from xla_sentinel.agents.sources import read_report
from xla_sentinel.cluster.report import CAMPAIGN_LABEL
from xla_sentinel_operator import agents, waves

from .chat_endpoint import ChatEndpoint
from .conftest import API, campaign, eventually

KEY = "sk-scripted-0123"
SIGNATURE = "5e1f7a00c0ffee02"
REPORT = "jnp.cumsum over 4097 f16 elements returns inf on XLA:CPU, finite on O0\n"
_WHO = re.compile(r"You are agent '([^']+)'")


class QuietModel(ChatEndpoint):
    """A Chat Completions endpoint whose every answer is a final text: an agent that takes
    its task and ends it at once. Records the agent and prompt of every request."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, str]] = []

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompt = next(str(m["content"]) for m in body["messages"] if m["role"] == "user")
        who = _WHO.search(prompt)
        self.requests.append({"agent": who.group(1) if who else "", "prompt": prompt})
        return web.json_response({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "nothing to submit"}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}})



@pytest.fixture
async def quiet_model() -> AsyncIterator[QuietModel]:
    m = QuietModel()
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
                       "budget": {"tokens": 20000, "toolCalls": 5, "seconds": 300},
                       "roles": [{"role": "stress", "replicas": 1}, {"role": "reproduce", "replicas": 1},
                                 {"role": "fix", "replicas": 1}]}}


@pytest.mark.timeout(900)
async def test_a_signature_a_report_and_a_coverage_plateau_each_start_agents(
        control_plane, api, ns, start_operator, node, quiet_model, monkeypatch):
    monkeypatch.setenv(waves.PLATEAU_ENV, "4")  # the operator runs in this process
    fake = node()
    await start_operator(jobs={"agent_service_account": chart_operator_flags()["--agent-service-account"]})
    api.create("v1/secrets", ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key"},
                                  "data": {"api-key": base64.b64encode(KEY.encode()).decode()}})
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(campaign(ns, "swarm", **spec(quiet_model.url))))
    assert done.returncode == 0, done.stderr

    def agent_jobs() -> list[dict]:
        return api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "agent"})

    def logs() -> dict[str, str]:
        return {p["metadata"]["name"]: fake.logs(ns, p["metadata"]["name"])[-2000:]
                for p in api.all("v1/pods", ns, {"xlasentinel.dev/role": "agent"})}

    # The first Jobs (one per role, at create) run and end with nothing to do for fix and reproduce.
    try:
        first = await eventually(lambda: len(j := agent_jobs()) >= 3 and all(waves.job_finished(x) for x in j) and j,
                                 timeout=300, interval=1)
    except AssertionError:
        raise AssertionError(logs()) from None
    initial = {x["metadata"]["name"] for x in first if agents.WAVE_LABEL not in x["metadata"]["labels"]}
    assert len(initial) == 3

    # A signature with a repro bundle appears (as the operator writes one after a bisection).
    api.create(f"{API}/bugsignatures", ns, {
        "apiVersion": API, "kind": "BugSignature", "metadata": {"name": f"sig-{SIGNATURE}"},
        "spec": {"signature": SIGNATURE, "verdict": "mismatch", "culpritOp": "add", "repro": "/nowhere/repro.py"}})
    api.patch(f"{API}/bugsignatures", ns, f"sig-{SIGNATURE}", {"status": {"campaigns": ["swarm"], "count": 1}},
              sub="status")
    # And a failure report is handed to the campaign (the fix wave's pod seeds it).
    api.create("v1/configmaps", ns, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "crash-1", "labels": {"xlasentinel.dev/failure-report": "swarm"}},
                                     "data": {"issue.md": REPORT}})
    report_key = read_report("x", REPORT.encode()).key

    def leases() -> dict[str, dict]:
        return {x["metadata"]["annotations"][KEY_ANNOTATION]: x
                for x in api.all("coordination.k8s.io/v1/leases", ns, {CAMPAIGN_LABEL: "swarm", TASK_LABEL: "true"})}

    def done_by_wave(key: str) -> dict | None:
        lease = leases().get(key)
        if lease is None or lease["metadata"]["annotations"][STATE_ANNOTATION] != "done":
            return None
        return lease

    try:
        fix = await eventually(lambda: done_by_wave(f"signature:{SIGNATURE}"), timeout=300, interval=1)
        rep = await eventually(lambda: done_by_wave(report_key), timeout=300, interval=1)
    except AssertionError:
        raise AssertionError({"jobs": [j["metadata"]["name"] for j in agent_jobs()], "logs": logs()}) from None
    by_name = {j["metadata"]["name"]: j for j in agent_jobs()}
    for lease, role, event in ((fix, "fix", f"signature:{SIGNATURE}"), (rep, "reproduce", report_key)):
        holder = lease["spec"]["holderIdentity"]
        job = by_name[holder.rpartition("-")[0]]
        # Taken by a pod of a wave Job of its role, started by that event.
        assert job["metadata"]["name"] not in initial, holder
        assert job["metadata"]["labels"][agents.WAVE_LABEL] and job["metadata"]["labels"]["xlasentinel.dev/agent-role"] == role
        assert event in json.loads(job["metadata"]["annotations"][agents.EVENTS_ANNOTATION])
        assert any(r["agent"] == holder for r in quiet_model.requests)
    # The report reached the reproduce agent's prompt, fenced as untrusted data.
    (prompt,) = [r["prompt"] for r in quiet_model.requests if r["agent"] == rep["spec"]["holderIdentity"]]
    assert "UNTRUSTED" in prompt and REPORT.strip() in prompt

    # The worker covered something and stopped (one program): a stress wave once it held still.
    status = await eventually(lambda: (s := api.get(f"{API}/fuzzcampaigns", ns, "swarm").get("status", {}).get("agents"))
                              and any(e.startswith("coverage:") for e in s.get("started", [])) and s,
                              timeout=300, interval=1)
    (plateau,) = [e for e in status["started"] if e.startswith("coverage:")]
    assert int(plateau.split(":")[1]) == status["coverage"]["ops"] > 0
    stress = [j for j in agent_jobs() if j["metadata"]["labels"].get(agents.WAVE_LABEL)
              and j["metadata"]["labels"]["xlasentinel.dev/agent-role"] == "stress"]
    assert len(stress) == 1 and json.loads(stress[0]["metadata"]["annotations"][agents.EVENTS_ANNOTATION]) == [plateau]
    assert {f"signature:{SIGNATURE}", report_key} <= set(status["started"])
    # Its pod takes a stress task (a gap of what the worker covered).
    stress_agent = f"{stress[0]['metadata']['name']}-0"
    await eventually(lambda: any(x["spec"].get("holderIdentity") == stress_agent for x in leases().values()),
                     timeout=300, interval=1)
    events = [e for e in api.all("v1/events", ns) if e["reason"] == "AgentsStarted"]
    assert {e["message"].split(" ")[0] for e in events} >= {"fix", "reproduce", "stress"}
    # Each event started one wave: no Job of a role twice for the same events.
    waves_of = [j["metadata"]["labels"][agents.WAVE_LABEL] for j in agent_jobs() if agents.WAVE_LABEL in j["metadata"]["labels"]]
    assert len(waves_of) == len(set(waves_of)) == status["waves"] == 3
