"""Fixtures for the SPMD tests: one worker process with virtual host devices."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from spmd_programs import SLOW_ENV
from xla_sentinel.worker.client import Worker


@pytest.fixture(scope="module")
def probe() -> Iterator[Worker]:
    worker = Worker("spmd-probe")
    try:
        yield worker
    finally:
        worker.close()


@pytest.fixture(scope="module")
def slow_flag(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The stall flag of slow_host_plugin.py: set in the environment the host processes (and
    a remote host's supervisor) inherit; the file exists while a test holds a host."""
    flag = tmp_path_factory.mktemp("slow") / "stall"
    previous = os.environ.get(SLOW_ENV)
    os.environ[SLOW_ENV] = str(flag)
    try:
        yield flag
    finally:
        if previous is None:
            os.environ.pop(SLOW_ENV, None)
        else:
            os.environ[SLOW_ENV] = previous
