"""The agent tests need the agents extra (skipped with a reason where it is not installed)
and share one cache of reproducer outcomes per test run. Their shared pieces are in
agent_fixtures.py."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("mcp", reason="the agents extra (pip install -e '.[agents]') is not installed")
pytest.importorskip("pydantic_ai", reason="the agents extra (pip install -e '.[agents]') is not installed")


@pytest.fixture(scope="session", autouse=True)
def _outcomes_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Reproducer outcomes are remembered per jaxlib (gate.outcomes_path). The tests share
    one cache per test run, in pytest's temporary folder of the run (both xdist workers'
    folders sit in it; pytest removes old runs'), never the user's and never an earlier
    run's, so every outcome they assert was computed in this run."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ["XLA_SENTINEL_OUTCOMES"] = str(run / "repro-outcomes.sqlite")
