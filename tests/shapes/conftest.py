"""Fixtures for the program-shape tests."""

from jax_x64 import x64  # noqa: F401  (a fixture, used by name)
