"""The agent tests need the agents extra (skipped with a reason where it is not installed)
and share one cache of reproducer outcomes per test run. Their shared pieces are in
agent_fixtures.py."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp", reason="the agents extra (pip install -e '.[agents]') is not installed")
pytest.importorskip("pydantic_ai", reason="the agents extra (pip install -e '.[agents]') is not installed")

from xla_sentinel.agents.sandbox import Sandbox, SandboxError  # noqa: E402  (after the skips)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    """The local sandbox this machine can make (bubblewrap or unshare); skipped with the
    reason where it can make none."""
    try:
        return Sandbox.detect()
    except SandboxError as e:
        pytest.skip(str(e))


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on this machine's loopback, for agent code to try to reach: its port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.fixture(scope="session", autouse=True)
def _outcomes_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Reproducer outcomes are remembered per jaxlib (gate.outcomes_path). The tests share
    one cache per test run, in pytest's temporary folder of the run (both xdist workers'
    folders sit in it; pytest removes old runs'), never the user's and never an earlier
    run's, so every outcome they assert was computed in this run."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ["XLA_SENTINEL_OUTCOMES"] = str(run / "repro-outcomes.sqlite")
