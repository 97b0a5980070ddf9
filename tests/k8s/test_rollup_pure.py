"""Roll-up over time: Stalled from recent failures only (and cleared when a recreated Job
runs), failed worker Jobs recreated with exponential backoff, Ready only while workers run
or the campaign is done, the budget clock started by the first running worker, and the
operator's /healthz judgement. Pure functions, no API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from xla_sentinel.cluster.report import WorkerReport
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, rollup
from xla_sentinel_operator.metrics import Liveness

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SPEC = parse_spec({"workers": 4, "budget": {"continuous": True}})
REV = desired.revision(SPEC)


def job(uid: str, *, failed: int = 0, active: int = 0, failed_condition: bool = False) -> dict:
    status: dict = {"failed": failed, "active": active, "ready": active}  # the pods run
    if failed_condition:
        status["conditions"] = [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]
    return {"metadata": {"name": "nightly-main-r", "uid": uid,
                         "labels": {desired.REVISION_LABEL: REV, desired.GROUP_LABEL: "main"}},
            "spec": {"completions": 4}, "status": status}


def ready(st: dict) -> str:
    return next(c["status"] for c in st["conditions"] if c["type"] == "Ready")


def test_stalled_needs_recent_failures_and_clears_when_they_age_out():
    st = rollup.status(SPEC, 1, [job("a", failed=3, active=1)], [], REV, {}, T0)
    assert (st["phase"], st["conditions"][0]["reason"]) == ("Stalled", "WorkersFailing")
    later = rollup.status(SPEC, 1, [job("a", failed=3, active=4)], [], REV, st,
                          T0 + rollup.FAILURE_WINDOW + timedelta(seconds=1))
    assert later["phase"] == "Running" and ready(later) == "True"


def test_failures_spread_over_time_do_not_stall():
    st: dict = {}
    for minute in range(0, 60, 15):  # one failed pod every 15 minutes: preemptions
        st = rollup.status(SPEC, 1, [job("a", failed=minute // 15 + 1, active=4)], [], REV, st,
                           T0 + timedelta(minutes=minute))
        assert st["phase"] == "Running", minute


def test_a_recreated_job_starts_without_the_old_failures():
    st = rollup.status(SPEC, 1, [job("a", failed=5)], [], REV, {}, T0)
    assert st["phase"] == "Stalled"
    st = rollup.status(SPEC, 1, [job("b", active=4)], [], REV, st, T0 + timedelta(minutes=1))
    assert st["phase"] == "Running"


def test_a_failed_job_is_recreated_with_exponential_backoff():
    record, (r,) = rollup.retries({}, [job("a", failed_condition=True)], REV, T0)
    assert (r.attempts, r.now, r.at) == (1, False, T0 + timedelta(seconds=30))
    # The same failed Job read again counts no new attempt; it is due once the delay passed.
    record, (r,) = rollup.retries(record, [job("a", failed_condition=True)], REV, T0 + timedelta(seconds=30))
    assert (r.attempts, r.now) == (1, True)
    # Deleted and not yet recreated: the count survives the gap.
    record, due = rollup.retries(record, [], REV, T0 + timedelta(seconds=31))
    assert due == [] and record["main"]["attempts"] == 1
    # The recreated Job fails too: attempt 2 waits twice as long.
    record, (r,) = rollup.retries(record, [job("b", failed_condition=True)], REV, T0 + timedelta(minutes=5))
    assert (r.attempts, r.at) == (2, T0 + timedelta(minutes=5, seconds=60))
    assert rollup.retry_delay(30) == rollup.RETRY_MAX


def test_retry_count_resets_once_the_recreated_job_runs_cleanly():
    record = {"main": {"attempts": 3, "failedUid": "a", "nextRetry": "2026-11-29T12:04:00Z"}}
    running = [job("b", active=4)]
    failures = rollup.recent_failures({}, running, T0)
    assert rollup.healthy_again(record, running, REV, failures) == {}
    failing = [job("b", active=4, failed=1)]
    assert rollup.healthy_again(record, failing, REV, rollup.recent_failures({}, failing, T0)) == record


def test_stalled_message_says_when_the_failed_job_is_recreated():
    st = rollup.status(SPEC, 1, [job("a", failed_condition=True)], [], REV, {}, T0)
    stalled = next(c for c in st["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and "attempt 1" in stalled["message"]
    assert st["retries"]["main"]["attempts"] == 1


def test_ready_only_while_workers_run_or_when_done():
    idle = rollup.status(SPEC, 1, [job("a")], [WorkerReport(worker="main-0", updated="2026-11-29T11:00:00Z")],
                         REV, {}, T0)
    assert (idle["phase"], ready(idle)) == ("Pending", "False")
    fresh = rollup.status(SPEC, 1, [job("a")], [WorkerReport(worker="main-0", updated="2026-11-29T11:59:30Z")],
                          REV, {}, T0)
    assert (fresh["phase"], ready(fresh)) == ("Running", "True")
    done = rollup.status(parse_spec({"workers": 4, "budget": {"programs": 1}}), 1, [job("a")],
                         [WorkerReport(worker="main-0", programs=1)], desired.revision(parse_spec(
                             {"workers": 4, "budget": {"programs": 1}})), {}, T0)
    assert ready(done) == "True"
    suspended = rollup.health(parse_spec({"suspend": True}), [], [], "r", 0, None, T0)
    assert suspended.phase == "Suspended"
    assert ready({"conditions": rollup.conditions(suspended, 1, [], "t")}) == "False"


def test_pending_pods_are_not_running_workers():
    # A Job counts Pending pods (no node, image pulling) as active; they have done nothing.
    pending = {**job("a"), "status": {"active": 4, "ready": 0}}
    st = rollup.status(SPEC, 1, [pending], [], REV, {}, T0)
    assert (st["phase"], ready(st)) == ("Pending", "False") and "startTime" not in st
    st = rollup.status(SPEC, 1, [{**pending, "status": {"active": 4, "ready": 1}}], [], REV, st, T0)
    assert (st["phase"], ready(st)) == ("Running", "True")


def test_budget_clock_starts_when_a_worker_first_runs():
    spec = parse_spec({"workers": 4, "budget": {"seconds": 60}})
    rev = desired.revision(spec)
    queued = {**job("a"), "metadata": {**job("a")["metadata"], "labels": {
        desired.REVISION_LABEL: rev, desired.GROUP_LABEL: "main"}}}
    st = rollup.status(spec, 1, [queued], [], rev, {}, T0)
    assert "startTime" not in st and st["phase"] == "Pending"
    # An hour queued later, the first pod runs: the clock starts now, not at creation.
    running = {**queued, "status": {"active": 4, "ready": 4}}
    st = rollup.status(spec, 1, [running], [], rev, st, T0 + timedelta(hours=1))
    assert st["startTime"] == "2026-11-29T13:00:00Z" and st["phase"] == "Running"
    done = {**queued, "status": {"succeeded": 4}}
    st = rollup.status(spec, 1, [done], [], rev, st, T0 + timedelta(hours=1, seconds=61))
    assert st["phase"] == "Completed"


def test_healthz_follows_api_calls_and_rollups():
    assert Liveness().healthy(100.0, 10.0) == (False, "starting")
    live = Liveness(started=True, last_api_ok=95.0)
    assert live.healthy(100.0, 10.0)[0]
    assert not live.healthy(151.0, 10.0)[0]  # no API answer for 5 intervals
    live = Liveness(started=True, last_api_ok=149.0, last_rollup=90.0, campaigns=True, acting=True)
    assert live.healthy(139.0, 10.0)[0] and not live.healthy(141.0, 10.0)[0]
    # A paused peer never rolled up: judged by its API calls alone.
    assert Liveness(started=True, last_api_ok=149.0, campaigns=True).healthy(150.0, 10.0)[0]


def test_a_standby_replica_is_healthy_however_long_ago_it_last_rolled_up():
    # It led, rolled up, then a peer took over: it does nothing now, by design.
    live = Liveness(started=True, last_api_ok=1000.0, last_rollup=90.0, campaigns=True)
    live.act(True, 80.0)
    assert not live.healthy(1000.0, 10.0)[0]  # while acting, stopped roll-ups are a fault
    assert live.act(False, 100.0)
    assert live.healthy(1000.0, 10.0) == (True, "standby")


def test_a_replica_that_takes_over_has_the_limit_to_roll_up_from_then():
    live = Liveness(started=True, last_api_ok=1000.0, last_rollup=90.0, campaigns=True)
    assert live.act(True, 990.0) and not live.act(True, 995.0)  # a change once
    live.last_api_ok = 1040.0
    assert live.healthy(1000.0, 10.0)[0]  # 10 s since it began to lead
    assert not live.healthy(1041.0, 10.0)[0]  # and still no roll-up 51 s (5 intervals) later
    live.last_rollup = 1040.0
    assert live.healthy(1041.0, 10.0)[0]


def test_a_spent_budget_waits_for_ready_workers_to_finish_their_shards():
    from datetime import UTC, datetime

    from xla_sentinel.spec.campaign import parse_spec
    from xla_sentinel_operator import desired, rollup

    spec = parse_spec({"workers": 2, "budget": {"programs": 10}})
    rev = desired.revision(spec)
    job = {"metadata": {"name": "j", "uid": "u", "labels": {desired.REVISION_LABEL: rev,
                                                           desired.GROUP_LABEL: "main"}},
           "spec": {"completions": 2}, "status": {"active": 2, "ready": 1}}
    now = datetime(2026, 12, 1, tzinfo=UTC)
    h = rollup.health(spec, [job], [], rev, 10, now, now)
    assert (h.phase, h.reason) == ("Running", "Finishing")
    job["status"]["ready"] = 0  # only Pending pods left: they have done nothing yet
    assert rollup.health(spec, [job], [], rev, 10, now, now).phase == "Completed"


def test_a_short_rollup_interval_still_gives_a_busy_operator_thirty_seconds():
    live = Liveness(started=True, last_api_ok=100.0, last_rollup=100.0, campaigns=True, acting=True)
    assert live.healthy(129.0, 0.3)[0]
    assert not live.healthy(131.0, 0.3)[0]


def test_liveness_holds_while_only_the_api_server_is_unreachable():
    # A control-plane upgrade: the API server gone for minutes. Unready, not restarted.
    live = Liveness(started=True, last_api_ok=100.0, last_rollup=100.0, campaigns=True, acting=True)
    live.api_failed()
    assert live.healthy(400.0, 10.0) == (False, "no successful API call recently")
    assert live.alive(400.0, 10.0)[0]
    # The API is back: roll-ups get their whole limit from then, not from before the outage.
    live.api_answered(400.0)
    assert live.alive(440.0, 10.0)[0] and live.healthy(440.0, 10.0)[0]
    live.api_answered(450.0)  # the heartbeat keeps answering; no roll-up comes
    assert live.alive(451.0, 10.0) == (False, "roll-ups stopped")  # wedged with the API up
    assert not live.healthy(451.0, 10.0)[0]
    assert Liveness().alive(1.0, 10.0) == (False, "starting")


async def test_the_probes_are_served_apart_on_the_metrics_port():
    import aiohttp
    from xla_sentinel_operator.metrics import Metrics, serve

    state = {"ready": (False, "no successful API call recently"), "alive": (True, "API server unreachable")}
    runner, port = await serve(Metrics(), "127.0.0.1", 0, lambda: state["ready"],
                               alive=lambda: state["alive"])
    try:
        async with aiohttp.ClientSession() as http:
            got = {p: (await http.get(f"http://127.0.0.1:{port}/{p}")).status
                   for p in ("livez", "readyz", "healthz")}
        assert got == {"livez": 200, "readyz": 503, "healthz": 503}
    finally:
        await runner.cleanup()


async def test_the_triage_page_has_its_own_port_and_asks_for_the_token(tmp_path):
    import aiohttp
    from xla_sentinel_operator.metrics import Metrics, serve, serve_page

    token = tmp_path / "token"
    token.write_text("s3cret\n")

    async def page(ns):
        return "<html>ok</html>" if ns == "fuzz" else None

    metrics, mport = await serve(Metrics(), "127.0.0.1", 0, lambda: (True, "ok"))
    pages, pport = await serve_page("127.0.0.1", 0, page, str(token))
    try:
        async with aiohttp.ClientSession() as http:
            async def get(port, path, auth=None):
                headers = {"Authorization": auth} if auth else {}
                async with http.get(f"http://127.0.0.1:{port}{path}", headers=headers) as r:
                    return r.status
            assert await get(mport, "/namespaces/fuzz") == 404  # not on the metrics port
            assert await get(pport, "/namespaces/fuzz") == 401
            assert await get(pport, "/namespaces/fuzz", "Bearer wrong") == 401
            assert await get(pport, "/namespaces/fuzz", "Basic s3cret") == 401
            assert await get(pport, "/namespaces/fuzz", "Bearer s3cret") == 200
            assert await get(pport, "/namespaces/other", "Bearer s3cret") == 404
            token.write_text("rotated")  # read at each request
            assert await get(pport, "/namespaces/fuzz", "Bearer s3cret") == 401
            assert await get(pport, "/namespaces/fuzz", "Bearer rotated") == 200
    finally:
        await metrics.cleanup()
        await pages.cleanup()
