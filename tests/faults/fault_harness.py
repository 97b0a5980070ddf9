"""Helpers for the fault-suite tests: load a fault by file path (as `--inject-pass` does),
compile with and without it, and capture the HLO module each fault would see.

Named uniquely (not conftest helpers) because test folders share one import namespace."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

import jax
import jax.extend.xla
import numpy as np
from xla_sentinel.xla.faults import fault_path

_STAGE = jax.extend.xla.PipelineStage.PRE_SCHEDULER


def load_fault(name: str) -> ModuleType:
    """Import the fault module from its file, standalone, the way the plugin loader does."""
    spec = importlib.util.spec_from_file_location(f"injected_{name}", fault_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def registered(name: str, transform: Callable[[bytes], bytes | None]) -> Iterator[None]:
    jax.extend.xla.register_hlo_module_transformation(transform, name=name, platforms="cpu",
                                                      stage=_STAGE)
    jax.clear_caches()
    try:
        yield
    finally:
        jax.extend.xla.clear_hlo_module_transformation(name, stage=_STAGE, platforms="cpu")
        jax.clear_caches()


def run(f: Callable, *args: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree.leaves(jax.jit(f)(*args))]


def run_with_fault(fault: str, f: Callable, *args: np.ndarray) -> list[np.ndarray]:
    with registered(f"test_{fault}", load_fault(fault).transform):
        return run(f, *args)


def captured_proto(f: Callable, *args: np.ndarray) -> bytes:
    """The serialized module a PRE_SCHEDULER plugin receives when `f` compiles."""
    seen: list[bytes] = []

    def spy(proto: bytes) -> None:
        seen.append(proto)

    with registered("test_spy", spy):
        jax.jit(f).lower(*args).compile()
    assert len(seen) == 1
    return seen[0]
