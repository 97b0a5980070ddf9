"""Fixtures for the SPMD tests: one worker process with virtual host devices."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from xla_sentinel.worker.client import Worker


@pytest.fixture(scope="module")
def probe() -> Iterator[Worker]:
    worker = Worker("spmd-probe")
    try:
        yield worker
    finally:
        worker.close()
