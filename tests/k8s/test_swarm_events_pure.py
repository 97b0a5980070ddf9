"""Agent work started by events, the pure part (operator waves.py and agents.agent_job):
which events a campaign's state holds, when coverage has stopped growing, which waves are
due and which wait. test_swarm_events.py runs it against the API server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from xla_sentinel.agents import sources
from xla_sentinel.agents.spend import Budget, Spend
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import agents, desired, waves

SECRET = {"name": "model-key", "key": "api-key"}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def camp(roles: list[dict]) -> desired.Campaign:
    return desired.Campaign(name="nightly", namespace="fuzz", uid="u-1",
                            spec=parse_spec({"agents": {"roles": roles, "credentialSecretRef": SECRET}}))


def sig(ident: str, *, campaigns=("nightly",), repro="/b/repro.py", draft=None, state=None,
        status_state=None, regressed_at=None, generation=1) -> dict:
    status: dict = {"campaigns": list(campaigns)}
    if draft:
        status["fixDraft"] = draft
    if status_state:
        status["state"], status["regressedGeneration"] = status_state, regressed_at
    spec = {"signature": ident, "repro": repro}
    if state:
        spec["state"] = state
    return {"metadata": {"generation": generation}, "spec": spec, "status": status}


def test_signature_events_are_the_signatures_a_fix_agent_would_take():
    sigs = [sig("a1"), sig("b2", campaigns=("other",)), sig("c3", repro=""), sig("d4", draft={"cure": "x"}),
            sig("e5", state="fixed"), sig("f6", state="fixed", status_state="regressed", regressed_at=2, generation=2),
            sig("g7", state="fixed", status_state="regressed", regressed_at=1, generation=2)]
    # g7 regressed at an older generation: people marked it fixed again since.
    assert waves.signature_events("nightly", sigs) == ["signature:a1", "signature:f6"]


def test_reports_waiting_in_the_queue_are_reproduce_events():
    """The operator reads no ConfigMaps (tests/chart/test_security.py): a report reaches it
    as the reproduce task an agent pod seeded, open in the campaign's Leases."""
    waiting = sources.read_report("configmap/crash-1/issue.md", b"cumsum returns inf\n")
    ledger = waves.task_ledger([_lease(waiting.key, "open", role="reproduce"),
                                _lease("report:sha256:aa", "leased", role="reproduce"),
                                _lease("report:sha256:bb", "done", role="reproduce"),
                                _lease("gap:op:add", "open", role="stress")])
    assert ledger.reports == (waiting.key,)
    out = waves.plan({"reproduce", "stress"}, set(), list(ledger.reports), {}, {}, T0, ledger.settled)
    assert out.waves == {"reproduce": [waiting.key]}


def test_coverage_that_stops_growing_is_a_stress_event_once_per_level():
    plateau = 600.0
    level = waves.coverage_level([{"ops": {"add": 3, "tanh": 0}, "fusion_kinds": {"kLoop": 1}},
                                  {"ops": {"add": 1, "dot": 2}}])
    assert level == waves.CoverageLevel(2, 1)  # tanh never reached
    rec = waves.track_coverage({}, level, T0)
    assert waves.plateau_event(rec, T0 + timedelta(seconds=599), plateau) is None
    # Read again with the same level: `since` stays, so the plateau is measured from T0.
    rec = waves.track_coverage(rec, level, T0 + timedelta(seconds=300))
    assert rec["since"] == "2026-01-01T00:00:00Z"
    assert waves.plateau_event(rec, T0 + timedelta(seconds=600), plateau) == "coverage:2:1"
    # Growth restarts the clock; the new level is a new event.
    grown = waves.track_coverage(rec, waves.CoverageLevel(3, 1), T0 + timedelta(seconds=700))
    assert waves.plateau_event(grown, T0 + timedelta(seconds=1000), plateau) is None
    assert waves.plateau_event(grown, T0 + timedelta(seconds=1300), plateau) == "coverage:3:1"
    # Nothing covered: no stress agent has a gap to read.
    empty = waves.track_coverage({}, waves.CoverageLevel(0, 0), T0)
    assert waves.plateau_event(empty, T0 + timedelta(days=1), plateau) is None
    # Not read this time: the record is kept as it was.
    assert waves.track_coverage(rec, None, T0 + timedelta(seconds=5)) == rec


def test_the_workers_reports_are_read_a_few_times_per_plateau():
    assert waves.coverage_due({}, T0, 600.0)
    seen: waves.AgentsStatus = {"coverage": {"checked": "2026-01-01T00:00:00Z"}}
    assert not waves.coverage_due(seen, T0 + timedelta(seconds=149), 600.0)
    assert waves.coverage_due(seen, T0 + timedelta(seconds=150), 600.0)


def test_each_event_starts_one_wave_and_a_busy_role_waits():
    events = ["signature:a1", "report:sha256:00ff", "coverage:2:1", "signature:b2", "nonsense:1"]
    first = waves.plan({"fix", "reproduce", "stress"}, {"stress"}, events, {}, {"ops": 2}, T0)
    assert first.waves == {"fix": ["signature:a1", "signature:b2"], "reproduce": ["report:sha256:00ff"]}
    assert first.status["pending"] == ["coverage:2:1"] and first.status["waves"] == 2
    assert first.status["started"] == ["signature:a1", "signature:b2", "report:sha256:00ff"]
    # The same events again: nothing new but the stress event, now that its role is free.
    again = waves.plan({"fix", "reproduce", "stress"}, set(), events, first.status, {"ops": 2}, T0)
    assert again.waves == {"stress": ["coverage:2:1"]} and again.status["pending"] == []
    assert again.status["waves"] == 3
    # A role the campaign does not run starts nothing and waits for nothing.
    only_fix = waves.plan({"fix"}, set(), ["report:sha256:00ff", "coverage:2:1"], {}, {}, T0)
    assert only_fix.waves == {} and only_fix.status["pending"] == []


def test_started_events_are_bounded():
    prev: waves.AgentsStatus = {"started": [f"signature:{i}" for i in range(waves.STARTED_KEPT)]}
    out = waves.plan({"fix"}, set(), ["signature:new"], prev, {}, T0)
    assert len(out.status["started"]) == waves.STARTED_KEPT and out.status["started"][-1] == "signature:new"
    assert out.status["started"][0] == "signature:1"


@pytest.mark.parametrize("value, error", [("soon", "is not a number"), ("0", "above 0"), ("-3", "above 0")])
def test_a_bad_plateau_is_refused_by_name(value, error):
    with pytest.raises(ValueError, match=rf"\$XLA_SENTINEL_AGENT_PLATEAU_SECONDS: .*{error}"):
        waves.plateau_seconds({waves.PLATEAU_ENV: value})
    assert waves.plateau_seconds({}) == waves.PLATEAU_SECONDS
    assert waves.plateau_seconds({waves.PLATEAU_ENV: "2.5"}) == 2.5


def test_a_wave_job_is_its_roles_job_with_one_pod_per_event_and_a_name_of_its_own():
    c = camp([{"role": "fix", "replicas": 4}, {"role": "stress", "replicas": 3}])
    fix, stress = c.spec.agents.roles
    first = agents.agent_job(c, fix, default_image="runner:1")
    wave = agents.agent_job(c, fix, default_image="runner:1", wave=waves.wave_id(["signature:a1"]),
                            events=["signature:a1"])
    assert wave["metadata"]["name"] != first["metadata"]["name"]
    assert wave["spec"]["completions"] == wave["spec"]["parallelism"] == 1  # one task, one pod
    assert wave["metadata"]["labels"][agents.WAVE_LABEL] == waves.wave_id(["signature:a1"])
    assert wave["metadata"]["annotations"][agents.EVENTS_ANNOTATION] == '["signature:a1"]'
    assert wave["spec"]["template"]["spec"] == first["spec"]["template"]["spec"]
    assert wave["spec"]["ttlSecondsAfterFinished"] == agents.WAVE_TTL_SECONDS and "ttlSecondsAfterFinished" not in first["spec"]
    # A stress wave reads the gaps of a plateau: many tasks, every replica.
    assert agents.agent_job(c, stress, default_image="runner:1", wave="abc123",
                            events=["coverage:2:1"])["spec"]["completions"] == 3
    assert waves.wave_id(["b", "a"]) == waves.wave_id(["a", "b"]) != waves.wave_id(["a"])


def test_a_change_of_the_campaign_keeps_its_current_waves_and_retires_old_ones():
    c = camp([{"role": "fix"}])
    (fix,) = c.spec.agents.roles
    first = agents.agent_job(c, fix, default_image="r")
    wave = agents.agent_job(c, fix, default_image="r", wave="abc123", events=["signature:a1"])
    old = agents.agent_job(camp([{"role": "fix", "replicas": 2}]), fix, default_image="r", wave="def456",
                           events=["signature:b2"])
    assert old["metadata"]["labels"][agents.AGENT_REVISION_LABEL] != agents.revision(c.spec)
    create, delete, _ = agents.plan_agents(c, agents.agent_jobs(c, default_image="r"), [first, wave, old])
    assert create == [] and delete == [old["metadata"]["name"]]
    # A role no longer listed takes its waves with it.
    stress_only = camp([{"role": "stress"}])
    _, delete, _ = agents.plan_agents(stress_only, agents.agent_jobs(stress_only, default_image="r"), [wave])
    assert delete == [wave["metadata"]["name"]]


def test_a_job_is_finished_by_its_conditions():
    assert not waves.job_finished({"status": {"active": 1}})
    assert waves.job_finished({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    assert waves.job_finished({"status": {"conditions": [{"type": "Failed", "status": "True"}]}})
    assert not waves.job_finished({"status": {"conditions": [{"type": "Suspended", "status": "True"}]}})


def _lease(key: str, state: str, spent: dict | None = None, result: dict | None = None, role: str = "fix") -> dict:
    from xla_sentinel.agents import kube_tasks as kt

    ann = {kt.KEY_ANNOTATION: key, kt.STATE_ANNOTATION: state}
    if spent is not None:
        ann[kt.SPENT_ANNOTATION] = json.dumps(spent)
    if result is not None:
        ann[kt.RESULT_ANNOTATION] = json.dumps(result)
    return {"metadata": {"annotations": ann, "labels": {kt.ROLE_LABEL: role}}}


def test_the_ledger_sums_the_tasks_spending_and_names_the_dropped_ones():
    leases = [_lease("signature:a", "done", {"tokens": 1000, "usd": 0.25, "unpricedTokens": 0}),
              _lease("signature:b", "dropped", {"tokens": 500, "usd": 0.0, "unpricedTokens": 500},
                     {"error": "dropped after 3 failed attempts", "failures": ["crash"]}),
              _lease("gap:op:add", "open", role="stress"),
              {"metadata": {"annotations": {"xlasentinel.dev/task-spent": "{garbled"}}}]
    ledger = waves.task_ledger(leases)
    assert ledger.spent == Spend(1500, 0.25, 500)
    assert ledger.states == {"done": 1, "dropped": 1, "open": 2}
    assert ledger.dropped == [{"key": "signature:b", "role": "fix", "error": "dropped after 3 failed attempts"}]
    record = waves.spending_record(ledger, Budget(tokens=1200, usd=1.0))
    assert record == {"tokens": 1500, "usd": 0.25, "unpricedTokens": 500, "tokensLeft": 0, "usdLeft": 0.75,
                      "exhausted": "campaign budget spent: 1500 of 1200 tokens"}
    assert "exhausted" not in waves.spending_record(ledger, Budget())


def test_the_agent_pods_get_the_campaign_budget_and_the_attempts():
    c = desired.Campaign(name="nightly", namespace="fuzz", uid="u-1", spec=parse_spec({"agents": {
        "roles": [{"role": "fix"}], "credentialSecretRef": SECRET, "taskAttempts": 2,
        "spending": {"tokens": 5_000_000, "usd": 12.5}}}))
    args = agents.agent_job(c, c.spec.agents.roles[0], default_image="r")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--task-attempts") + 1] == "2"
    assert args[args.index("--campaign-max-tokens") + 1] == "5000000"
    assert args[args.index("--campaign-max-usd") + 1] == "12.5"
    assert agents.spending_budget(c.spec) == Budget(5_000_000, 12.5)
    # The agent's own flags accept what the operator passes.
    from xla_sentinel.cli.main import build_parser
    parsed = build_parser().parse_args(["agent", *args[1:]])
    assert (parsed.campaign_max_tokens, parsed.campaign_max_usd, parsed.task_attempts) == (5_000_000, 12.5, 2)
    plain = camp([{"role": "fix"}])
    plain_args = agents.agent_job(plain, plain.spec.agents.roles[0], default_image="r")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--campaign-max-tokens" not in plain_args and agents.spending_budget(plain.spec) == Budget()


@pytest.mark.parametrize("spending, error", [({"tokens": 0}, "spec.agents.spending.tokens: must be >= 1"),
                                             ({"usd": -1}, "spec.agents.spending.usd: must be > 0")])
def test_a_bad_campaign_budget_is_refused_by_name(spending, error):
    from xla_sentinel.spec.campaign import SpecError
    with pytest.raises(SpecError, match=error):
        parse_spec({"agents": {"roles": [{"role": "fix"}], "credentialSecretRef": SECRET, "spending": spending}})


def test_an_event_whose_task_an_earlier_agent_settled_starts_nothing():
    leases = [_lease("signature:a1", "done"), _lease("report:sha256:00ff", "refused", role="reproduce"),
              _lease("signature:b2", "leased")]
    ledger = waves.task_ledger(leases)
    assert ledger.settled == {"signature:a1", "report:sha256:00ff"}
    events = ["signature:a1", "signature:b2", "report:sha256:00ff"]
    assert waves.startable(events, {}, {"fix"}) and not waves.startable(events, {}, {"stress"})
    out = waves.plan({"fix", "reproduce"}, set(), events, {}, {}, T0, ledger.settled)
    assert out.waves == {"fix": ["signature:b2"]}
    assert sorted(out.status["started"]) == sorted(events)  # not looked at again
    assert not waves.startable(events, out.status, {"fix", "reproduce"})
