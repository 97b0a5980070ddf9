"""The `x64` fixture, shared by the suites that evaluate float64 references in-process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def x64() -> Iterator[None]:
    """float64 for one test, restored afterwards: a process-wide x64 leaks into other
    suites when xdist runs them in the same worker (jax then emits s64 indices, and the
    fault suite's captured HLO changes)."""
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)
