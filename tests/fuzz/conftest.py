"""Fixtures for the engine tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def x64() -> Iterator[None]:
    """float64 for the tests that evaluate references in-process, restored afterwards:
    a process-wide x64 leaks into other suites (the HLO jax emits changes, e.g. s64
    indices) when xdist runs them in the same worker."""
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)
