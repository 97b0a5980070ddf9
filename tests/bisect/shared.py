"""Build expensive test data once per test run, even when pytest-xdist splits a module's
tests across workers: the first worker builds under a file lock, the others read it."""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def _plain(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def once(factory: pytest.TempPathFactory, worker_id: str, name: str,
         build: Callable[[Path], Any]) -> Any:
    """`build(folder)`'s JSON result, computed by one worker of this run only."""
    root = factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # the folder this run's workers share
    folder = root / f"shared-{name}"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = folder / "result.json"
        if not result.exists():
            folder.mkdir(exist_ok=True)
            result.write_text(json.dumps(build(folder), default=_plain))
        return json.loads(result.read_text())
