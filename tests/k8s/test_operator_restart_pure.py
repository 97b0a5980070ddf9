"""The gate on kopf's readiness (main.GatedToggleSet) and the report backlog
(runtime.Backlog), without a cluster: kopf's own ToggleSet and asyncio, as the operator
runs them. tests/k8s/test_operator_restart.py runs both on the real control plane."""

from __future__ import annotations

import asyncio

from kopf._cogs.aiokits import aiotoggles
from xla_sentinel_operator.bodies import WorkerReport
from xla_sentinel_operator.main import GatedToggleSet, gate_kopf_readiness
from xla_sentinel_operator.runtime import Backlog


async def test_waiters_return_only_once_every_listed_object_is_indexed() -> None:
    ready = GatedToggleSet(all)
    listing = await ready.make_toggle(name="listing")
    returned: list[int] = []

    async def obj(i: int) -> None:  # as kopf's task of one listed object
        toggle = await ready.make_toggle(name=str(i))
        await asyncio.sleep(0)
        await ready.drop_toggle(toggle)
        await ready.wait_for(True)
        returned.append(i)

    tasks = [asyncio.create_task(obj(i)) for i in range(300)]
    for _ in range(10):
        await asyncio.sleep(0)
    assert not returned  # the listing is not over: nobody may go on
    await ready.drop_toggle(listing)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert sorted(returned) == list(range(300))


async def test_a_paused_operator_waits_for_its_toggles_turned_off_and_on() -> None:
    # kopf's pausing set (peering): any toggle on pauses; waiters wait for off.
    paused = GatedToggleSet(any)
    toggle = await paused.make_toggle(True, name="peering")
    waiters = [asyncio.create_task(paused.wait_for(False)) for _ in range(20)]
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waiters)
    await toggle.turn_to(False)
    await asyncio.wait_for(asyncio.gather(*waiters), 30)
    assert paused.is_off()


async def test_a_cancelled_waiter_does_not_hold_up_the_others() -> None:
    ready = GatedToggleSet(all)
    blocker = await ready.make_toggle(name="blocker")
    first = asyncio.create_task(ready.wait_for(True))  # holds the gate
    others = [asyncio.create_task(ready.wait_for(True)) for _ in range(5)]
    await asyncio.sleep(0.01)
    first.cancel()
    await ready.drop_toggle(blocker)
    await asyncio.wait_for(asyncio.gather(*others), 30)
    assert first.cancelled()


def test_kopf_builds_its_toggle_sets_gated_once_installed() -> None:
    gate_kopf_readiness()
    assert aiotoggles.ToggleSet is GatedToggleSet
    assert isinstance(aiotoggles.ToggleSet(all), GatedToggleSet)


async def test_the_backlog_ingests_the_latest_of_a_report_once_at_a_bounded_concurrency() -> None:
    backlog = Backlog(workers=3)
    done: list[tuple[str, int]] = []
    running, most = 0, 0
    release = asyncio.Event()

    def ingestion(name: str, version: int):  # type: ignore[no-untyped-def]
        async def work(_: object) -> None:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await release.wait()
            running -= 1
            done.append((name, version))

        return work

    workers = [asyncio.create_task(backlog.work()) for _ in range(backlog.workers)]
    try:
        for i in range(20):
            await backlog.put(("ns", f"r{i}"), ingestion(f"r{i}", 1))
        await asyncio.sleep(0.01)
        assert len(backlog.running) == 3 and len(backlog) == 20
        # Newer events of waiting reports replace theirs; a running one's comes after it.
        await backlog.put(("ns", "r10"), ingestion("r10", 2))
        await backlog.put(("ns", "r0"), ingestion("r0", 2))
        backlog.drop(("ns", "r11"))  # deleted while it waited
        assert backlog.holds(("ns", "r0")) and not backlog.holds(("ns", "r11"))
        release.set()
        for _ in range(200):
            if not len(backlog):
                break
            await asyncio.sleep(0.01)
        assert not len(backlog)
        assert most == 3
        assert ("r10", 1) not in done and ("r10", 2) in done
        assert done.index(("r0", 1)) < done.index(("r0", 2))
        assert not any(name == "r11" for name, _ in done)
        assert len(done) == 20  # 19 reports (r11 dropped), r0 twice
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def report_body(name: str, version: int) -> WorkerReport:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(version)},
            "spec": {"result": f"{name} at version {version}"}}


async def test_the_backlog_keeps_at_most_its_bound_of_reports_and_the_rest_by_name() -> None:
    # A restarted operator's listing puts every report here at once: past the bound only
    # the name waits, and the ingestion is handed None (it then reads the report itself).
    backlog = Backlog(workers=2, bodies_kept=5)
    given: dict[str, WorkerReport | None] = {}

    def ingestion(name: str):  # type: ignore[no-untyped-def]
        async def work(report: WorkerReport | None) -> None:
            given[name] = report

        return work

    for i in range(50):
        await backlog.put(("ns", f"r{i}"), ingestion(f"r{i}"), report_body(f"r{i}", 1))
        held = [r for _, r in backlog.pending.values() if r is not None]
        assert len(held) == backlog.kept <= 5
    assert len(backlog) == 50 and backlog.kept == 5
    assert [k[1] for k, (_, r) in backlog.pending.items() if r is not None] == [f"r{i}" for i in range(5)]
    # A newer event of a report kept whole replaces it, within the bound; one of a report
    # kept by name stays by name while the bound is full.
    await backlog.put(("ns", "r2"), ingestion("r2"), report_body("r2", 2))
    await backlog.put(("ns", "r40"), ingestion("r40"), report_body("r40", 2))
    assert backlog.kept == 5 and backlog.pending[("ns", "r40")][1] is None
    assert backlog.pending[("ns", "r2")][1] == report_body("r2", 2)
    backlog.drop(("ns", "r3"))  # deleted while it waited: its place is free again
    assert backlog.kept == 4
    await backlog.put(("ns", "r41"), ingestion("r41"), report_body("r41", 2))
    assert backlog.pending[("ns", "r41")][1] == report_body("r41", 2) and backlog.kept == 5

    workers = [asyncio.create_task(backlog.work()) for _ in range(backlog.workers)]
    try:
        for _ in range(200):
            if not len(backlog):
                break
            await asyncio.sleep(0.01)
        assert not len(backlog) and backlog.kept == 0
        assert len(given) == 49 and "r3" not in given
        assert {n: r for n, r in given.items() if r is not None} == {
            "r0": report_body("r0", 1), "r1": report_body("r1", 1), "r2": report_body("r2", 2),
            "r4": report_body("r4", 1), "r41": report_body("r41", 2)}
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
