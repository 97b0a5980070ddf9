"""The agent swarm's pure parts: spec.agents validation, the agent Jobs a campaign should
have, and which fix drafts count. No API involved (test_swarm.py runs the swarm)."""

from __future__ import annotations

import pytest
from xla_sentinel.agents.swarm import fix_draft
from xla_sentinel.cluster.report import writer_name
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel_operator import agents, desired

SECRET = {"name": "model-key", "key": "api-key"}


def camp(**spec) -> desired.Campaign:
    return desired.Campaign(name="nightly", namespace="fuzz", uid="u-1", spec=parse_spec(spec))


@pytest.mark.parametrize("agents_spec, error", [
    ({"roles": [{"role": "stres"}], "credentialSecretRef": SECRET},
     "spec.agents.roles[0].role: unknown agent role 'stres'; did you mean 'stress'?"),
    ({"roles": [{"role": "stress"}]},
     "spec.agents.credentialSecretRef: missing: the models of openai need an API key"),
    ({"roles": []}, "spec.agents.roles: must name at least one role"),
    ({"roles": [{"role": "fix"}, {"role": "fix"}], "credentialSecretRef": SECRET},
     "spec.agents.roles[1].role: duplicate role 'fix'"),
    ({"roles": [{"role": "fix", "replicas": 0}], "credentialSecretRef": SECRET},
     "spec.agents.roles[0].replicas: must be between 1 and 64"),
    ({"roles": [{"role": "fix"}], "model": "gpt-5", "credentialSecretRef": SECRET},
     "spec.agents.model: must be provider:model"),
    ({"roles": [{"role": "fix", "model": "mistral:large"}], "credentialSecretRef": SECRET},
     "spec.agents.roles[0].model: unknown model provider 'mistral'"),
    ({"roles": [{"role": "fix"}], "model": "anthropic:claude", "endpoint": "http://127.0.0.1:9/v1",
      "credentialSecretRef": SECRET}, "spec.agents.endpoint: is an OpenAI-compatible endpoint"),
    ({"roles": [{"role": "fix"}], "endpoint": "127.0.0.1:9", "credentialSecretRef": SECRET},
     "spec.agents.endpoint: must be an http(s) URL"),
    ({"roles": [{"role": "fix", "model": "anthropic:claude"}, {"role": "stress"}],
      "credentialSecretRef": SECRET}, "spec.agents.credentialSecretRef: one Secret key cannot hold"),
    ({"roles": [{"role": "fix", "budget": {"tokens": 0}}], "credentialSecretRef": SECRET},
     "spec.agents.roles[0].budget.tokens: must be >= 1"),
    ({"roles": [{"role": "fix"}], "credentialSecretRef": {"name": "k", "key": "x"}, "tokens": 3},
     "spec.agents.tokens: unknown field"),
])
def test_bad_agents_specs_name_the_field(agents_spec, error):
    with pytest.raises(SpecError) as e:
        parse_spec({"agents": agents_spec})
    assert str(e.value).startswith(error), str(e.value)


VERTEX = {"project": "fuzz-project-1", "location": "us-central1"}


def test_vertex_needs_no_secret_and_roles_default_to_the_shared_model():
    spec = parse_spec({"agents": {"model": "google-cloud:gemini-2.5-pro", "roles": [{"role": "fix"}],
                                  "vertex": VERTEX}})
    assert spec.agents.role_model(spec.agents.roles[0]) == "google-cloud:gemini-2.5-pro"
    # pydantic-ai 2's old names are refused with the new one named.
    with pytest.raises(SpecError, match="renamed in pydantic-ai 2: use google-cloud:gemini-2.5-pro"):
        parse_spec({"agents": {"model": "google-vertex:gemini-2.5-pro", "roles": [{"role": "fix"}]}})


@pytest.mark.parametrize("vertex, model, error", [
    (None, "google-cloud:gemini-2.5-pro", "spec.agents.vertex: missing: google-cloud: models run in"),
    ({"project": "P"}, "google-cloud:gemini-2.5-pro", "spec.agents.vertex.project: must be a Google Cloud project id"),
    ({"project": "fuzz-project-1", "location": "US Central"}, "google-cloud:gemini-2.5-pro",
     "spec.agents.vertex.location: must be a Vertex AI location"),
    (VERTEX, "anthropic:claude", "spec.agents.vertex: is where google-cloud: models run"),
])
def test_a_vertex_model_needs_its_project_and_nothing_else_takes_one(vertex, model, error):
    agents_spec = {"model": model, "roles": [{"role": "fix"}], "credentialSecretRef": SECRET,
                   **({"vertex": vertex} if vertex else {})}
    if model.startswith("google-cloud"):
        del agents_spec["credentialSecretRef"]
    with pytest.raises(SpecError) as e:
        parse_spec({"agents": agents_spec})
    assert str(e.value).startswith(error), str(e.value)


def test_a_vertex_role_gets_its_project_and_location_and_no_key():
    c = camp(agents={"roles": [{"role": "fix"}, {"role": "stress", "model": "openai:gpt-5"}],
                     "model": "google-cloud:gemini-2.5-pro", "vertex": VERTEX, "credentialSecretRef": SECRET})
    fix, stress = agents.agent_jobs(c, default_image="runner:1", service_account="sa-agent")
    envs = [{e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]} for job in (fix, stress)]
    assert (envs[0]["GOOGLE_CLOUD_PROJECT"]["value"], envs[0]["GOOGLE_CLOUD_LOCATION"]["value"]) == \
        ("fuzz-project-1", "us-central1")
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"} & set(envs[0])
    # The other role's provider is not Vertex: its key, no project.
    assert "GOOGLE_CLOUD_PROJECT" not in envs[1] and envs[1]["OPENAI_API_KEY"]["valueFrom"] == {"secretKeyRef": SECRET}


def test_one_indexed_job_per_role_with_the_credential_from_the_secret():
    c = camp(agents={"roles": [{"role": "stress", "replicas": 2},
                               {"role": "fix", "budget": {"tokens": 1000, "toolCalls": 5, "seconds": 60}}],
                     "model": "openai-chat:local", "endpoint": "http://10.0.0.5:8000/v1",
                     "credentialSecretRef": SECRET, "tasks": 3})
    stress, fix = agents.agent_jobs(c, default_image="runner:1", service_account="sa-agent")
    assert stress["spec"]["completionMode"] == "Indexed"
    assert stress["spec"]["completions"] == stress["spec"]["parallelism"] == 2
    assert fix["spec"]["completions"] == 1
    pod = fix["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "sa-agent"
    (container,) = pod["containers"]
    args = container["args"]
    assert args[:4] == ["agent", "--role", "fix", "--model"] and "openai-chat:local" in args
    assert args[args.index("--max-tokens") + 1] == "1000" and args[args.index("--tasks") + 1] == "3"
    env = {e["name"]: e for e in container["env"]}
    assert env["OPENAI_API_KEY"]["valueFrom"] == {"secretKeyRef": SECRET}
    assert env["OPENAI_BASE_URL"]["value"] == "http://10.0.0.5:8000/v1"
    assert env["XLA_SENTINEL_TASK_QUEUE"]["value"] == "kube"
    assert env["XLA_SENTINEL_POD"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert fix["metadata"]["labels"][agents.AGENT_ROLE_LABEL] == "fix"
    assert fix["metadata"]["labels"][desired.ROLE_LABEL] == "agent"
    assert fix["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    # A budget-stopped agent (exit 1) or a bad credential (exit 2) is not retried.
    rule = fix["spec"]["podFailurePolicy"]["rules"][1]
    assert rule["action"] == "FailIndex" and rule["onExitCodes"]["values"] == [1, 2]
    # The gate's corpus and minimum are the operator's: unset, the pod's server uses its own.
    assert not {"XLA_SENTINEL_REGRESSION_CORPUS", "XLA_SENTINEL_MIN_REGRESSION"} & set(env)


def test_the_operators_regression_corpus_and_minimum_reach_the_agent_pods_server():
    c = camp(agents={"credentialSecretRef": SECRET, "roles": [{"role": "fix"}]})
    (job,) = agents.agent_jobs(c, default_image="i", gate=agents.GateConfig("/corpus", 3))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["XLA_SENTINEL_REGRESSION_CORPUS"] == "/corpus" and env["XLA_SENTINEL_MIN_REGRESSION"] == "3"
    # And the operator holds drafts to the same minimum.
    draft = {"signature": "s", "cure": "--xla_disable_hlo_passes=algsimp", "verified": True, "cured": True,
             "regressionCorpus": 3}
    assert agents.draft_problem(draft, agents.min_regression(3)) is None
    assert "fewer than the minimum 4" in (agents.draft_problem(draft, agents.min_regression(4)) or "")


def test_agents_have_their_own_revision_and_leave_the_workers_alone():
    base = {"credentialSecretRef": SECRET, "roles": [{"role": "stress"}]}
    one, two = camp(agents=base), camp(agents={**base, "roles": [{"role": "stress", "replicas": 3}]})
    assert desired.revision(one.spec) == desired.revision(two.spec) == desired.revision(camp().spec)
    (a,), (b,) = (agents.agent_jobs(x, default_image="i") for x in (one, two))
    assert a["metadata"]["name"] != b["metadata"]["name"]
    create, delete, suspend = agents.plan_agents(two, [b], [a])
    assert [j["metadata"]["name"] for j in create] == [b["metadata"]["name"]]
    assert delete == [a["metadata"]["name"]] and suspend == {}
    assert agents.agent_jobs(camp(), default_image="i") == []


def test_suspending_the_campaign_suspends_its_agents():
    c = camp(agents={"credentialSecretRef": SECRET, "roles": [{"role": "fix"}]}, suspend=True)
    (job,) = agents.agent_jobs(c, default_image="i")
    have = [{**job, "spec": {**job["spec"], "suspend": False}}]
    create, delete, suspend = agents.plan_agents(c, [job], have)
    assert create == [] and delete == [] and suspend == {job["metadata"]["name"]: True}


def _claim(**over):
    claim = {"id": 3, "time": 0, "agent": "x", "model": "m", "kind": "fix", "verified": True,
             "reason": "cures it", "claim": {"reproducer": "/r/repro.py", "cure": "--xla_disable_hlo_passes=algsimp",
                                             "signature": None, "rationale": "r"},
             "evidence": {"cured": True, "regressions": [], "also_cures": [],
                          "regression_corpus": [{"script": "a.py"}], "affected": {"outcome": "bug"},
                          "under_cure": {"outcome": "clean"}}}
    return {**claim, **over}


def test_only_gate_verified_drafts_without_regressions_count():
    task = {"key": "signature:abc", "payload": {"signature": "0123456789abcdef"}}
    draft = fix_draft(_claim(), "nightly-agent-fix-1-0", task)
    assert draft["signature"] == "0123456789abcdef" and agents.draft_problem(draft, minimum=1) is None
    assert draft["regressionCorpus"] == 1
    # Verified against fewer known bugs than the operator's minimum (default gate.MIN_REGRESSION): refused.
    assert "fewer than the minimum 8" in agents.draft_problem(draft)
    refused = fix_draft(_claim(verified=False), "a", task)
    assert "not verified by the gate" in agents.draft_problem(refused)
    worse = fix_draft(_claim(evidence={**_claim()["evidence"], "regressions": [{"script": "b.py"}]}), "a", task)
    assert "regressions" in agents.draft_problem(worse)
    assert agents.draft_problem({"cure": "x"}) is not None
    status = agents.fix_draft_status(draft, "job-1")
    assert status["cure"] == "--xla_disable_hlo_passes=algsimp" and status["job"] == "job-1"
    assert "verified" not in status  # the status holds what the gate found, not the flag


def test_a_fix_draft_is_taken_only_from_a_fix_agent_pod_of_the_campaign():
    c = camp(agents={"credentialSecretRef": SECRET, "roles": [{"role": "fix"}, {"role": "stress"}]})
    fix, stress = agents.agent_jobs(c, default_image="i")
    pod = f"{fix['metadata']['name']}-0-abcde"
    name = writer_name(pod)
    assert agents.writer_problem(c, name, fix) is None
    assert "no fix agent" in agents.writer_problem(c, writer_name(f"{stress['metadata']['name']}-0-x"), stress)
    worker = desired.worker_jobs(c, default_image="i")[0]
    assert "no fix agent" in agents.writer_problem(c, "w-0", worker)
    assert "no agent Job" in agents.writer_problem(c, "gone-0", None)
