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
# Engine files whose tests together took 15 s or more of a worker's time in a `make test`
# rehearsal (2026-12-06: PYTEST_ADDOPTS="--durations=0 --durations-min=1.5"): bisections,
# replays, campaigns, agents driving the engine. They are `slow` besides their cost, so that
# `make test-fast` stays a few minutes; tests/fuzz/test_golden.py and test_check.py stay fast
# on purpose (they guard the oracle's verdicts end to end).
SLOW_FILES = frozenset({
    "agents/test_adversarial.py", "agents/test_campaign_tools.py", "agents/test_gate.py",
    "agents/test_mcp_server.py", "agents/test_roles.py", "agents/test_sandbox.py",
    "bisect/test_bisect_invariant.py", "bisect/test_bisect_loops.py",
    "bisect/test_bisect_regions.py", "bisect/test_bitwise.py", "bisect/test_captured_values.py",
    "bisect/test_corpus_replay.py", "bisect/test_buffer_bundle.py", "bisect/test_bundle_gate.py",
    "bisect/test_clean_run_findings.py", "bisect/test_crash.py", "bisect/test_in_campaign.py",
    "bisect/test_localize.py", "bisect/test_real_traces.py", "bisect/test_repro.py",
    "bisect/test_stops_short.py",
    "buffers/test_campaign.py",
    "detection/test_invariant_declarations.py", "detection/test_invariants_inputs.py",
    "detection/test_invariants_replay.py", "detection/test_template_internals.py",
    "detection/test_componentwise_at_size.py",
    "devices/test_device_owner_campaign.py",
    "fuzz/test_campaign.py", "fuzz/test_eager_by_primitive.py", "fuzz/test_own_precision.py",
    "fuzz/test_traces.py",
    "fuzz/test_verdict_per_program.py",
    "report/test_html_page.py", "report/test_layout_coverage.py",
    "shapes/test_shapes.py",
    "spmd/test_bisect_shared_partitioner_bug.py", "spmd/test_bisect_spmd.py",
    "spmd/test_known_spmd_bugs.py", "spmd/test_spmd_faults.py",
    "spmd/test_multihost.py", "spmd/test_multihost_campaign.py",
    "spmd/test_multihost_findings.py", "spmd/test_slice_tpu_env.py",
    "storage/test_campaign_store.py",
    "traces/test_mutate_shapes.py", "traces/test_replay_oracle.py",
    "versions/test_bad_input.py", "versions/test_regression_range.py",
    "versions/test_cross_version.py",
})


def cost_of(path: Path) -> str:
    rel = path.relative_to(TESTS)
    if rel.as_posix() in COST_OF_FILE:
        return COST_OF_FILE[rel.as_posix()]
    if rel.stem.endswith("_pure"):
        return "pure"
    if len(rel.parts) < 2 or rel.parts[0] not in COST:
        raise pytest.UsageError(f"tests/{rel}: no cost for its folder; add it to COST in {__file__}")
    return COST[rel.parts[0]]


def slow(path: Path) -> bool:
    return path.relative_to(TESTS).as_posix() in SLOW_FILES


REAL_NODE_SCOPE = "real-node"


def scope_of(nodeid: str) -> str:
    """The xdist work unit of a test: every test that needs the real node is one unit, so one
    worker runs them all; any other test is a unit of its own (xdist's `load`)."""
    path = TESTS.parent / nodeid.split("::", 1)[0]
    return REAL_NODE_SCOPE if path.is_relative_to(TESTS) and cost_of(path) == "node" else nodeid
