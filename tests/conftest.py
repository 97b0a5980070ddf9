"""Every test is marked by what it costs, from where it lives, so that a run can pick by cost
(`pytest -m pure`, `make test-fast`); the markers are declared in pyproject's
[tool.pytest.ini_options]. `slow` (a long campaign) is set on the test itself.

A folder missing from COST, or a test that starts the control plane without being marked for
it, stops the collection: a new suite says what it costs once, here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent

# pure: the code under test in this process (short tool runs such as helm or promtool
# allowed); engine: starts local processes: engine workers (jax, XLA), campaigns, a browser,
# an emulator; cluster: starts the test control plane (tests/controlplane) or the built
# images' containers; node: needs the machine's one real node (tests/node/conftest.py).
COST = {
    "agents": "engine",
    "bisect": "engine",
    "buffers": "engine",
    "chart": "pure",
    "detection": "engine",
    "devices": "engine",
    "faults": "engine",
    "fuzz": "engine",
    "inputs": "engine",
    "k8s": "cluster",
    "layout": "pure",
    "node": "node",
    "report": "engine",
    "shapes": "engine",
    "spmd": "engine",
    "storage": "engine",
    "traces": "engine",
    "versions": "engine",
    "worker": "engine",
}
# Files that cost other than their folder says; besides these, a file named *_pure.py (the
# operator's pure functions beside tests/k8s's API suites) is pure.
COST_OF_FILE = {
    "chart/test_images.py": "cluster",  # runs the built images in containers
}
CONTROL_PLANE_COSTS = ("cluster", "node")


def cost_of(path: Path) -> str:
    rel = path.relative_to(TESTS)
    if rel.as_posix() in COST_OF_FILE:
        return COST_OF_FILE[rel.as_posix()]
    if rel.stem.endswith("_pure"):
        return "pure"
    if len(rel.parts) < 2 or rel.parts[0] not in COST:
        raise pytest.UsageError(f"tests/{rel}: no cost for its folder; add it to COST in {__file__}")
    return COST[rel.parts[0]]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        cost = cost_of(item.path)
        if "control_plane" in item.fixturenames and cost not in CONTROL_PLANE_COSTS:
            raise pytest.UsageError(f"{item.nodeid} starts the control plane but is marked "
                                    f"{cost!r}: mark its file in COST_OF_FILE of {__file__}")
        item.add_marker(cost)
