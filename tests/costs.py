"""What each test costs, from where it lives (pure, engine, cluster, node), and the xdist work
unit that follows from it: one table, read by tests/conftest.py's markers and scheduler."""

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


REAL_NODE_SCOPE = "real-node"


def scope_of(nodeid: str) -> str:
    """The xdist work unit of a test: every test that needs the real node is one unit, so one
    worker runs them all; any other test is a unit of its own (xdist's `load`)."""
    path = TESTS.parent / nodeid.split("::", 1)[0]
    return REAL_NODE_SCOPE if path.is_relative_to(TESTS) and cost_of(path) == "node" else nodeid
