"""Every test is marked by what it costs, from where it lives (tests/costs.py), so that a run can pick by cost
(`pytest -m pure`, `make test-fast`); the markers are declared in pyproject's
[tool.pytest.ini_options]. `slow` (a long campaign, bisection or replay) comes from
costs.SLOW_FILES, or is set on one test.

A folder missing from costs.COST, or a test that starts the control plane without being marked for
it, stops the collection: a new suite says what it costs once, here.

Under xdist the tests that need the machine's one real node go to one worker (RealNodeOnOneWorker),
so no worker waits on another's node lock; the rest are spread one test at a time.
"""

from __future__ import annotations

from typing import Any

import pytest
from costs import CONTROL_PLANE_COSTS, cost_of, scope_of, slow


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        cost = cost_of(item.path)
        if "control_plane" in item.fixturenames and cost not in CONTROL_PLANE_COSTS:
            raise pytest.UsageError(f"{item.nodeid} starts the control plane but is marked "
                                    f"{cost!r}: mark its file in COST_OF_FILE of tests/costs.py")
        item.add_marker(cost)
        if slow(item.path):
            item.add_marker("slow")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # Not `--dist loadgroup` with xdist_group marks: pytest 9.2 derives a test's nodeid from
    # its structured id, so the "@group" suffix xdist 3.8 writes into item._nodeid no longer
    # reaches the scheduler, and the marked node tests were spread over both workers (the
    # second one then waited on the first one's node lock). The grouping is ours instead.
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class RealNodeOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return RealNodeOnOneWorker(config, log)
