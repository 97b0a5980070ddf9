"""The shipped workloads (examples/workloads/) recorded from a real run and replayed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from xla_sentinel.core.program import load_arrays, result_dtypes
from xla_sentinel.programs import traces
from xla_sentinel.programs.record import recording
from xla_sentinel.xla import compiler

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"


def _workload(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"workload_{name}", WORKLOADS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("name", ["decoder_kv_cache", "moe_topk"])
def test_recorded_workload_replays_bitwise_on_default_target(tmp_path: Path, name: str) -> None:
    with recording(tmp_path, with_values=True) as rec:
        returned = _workload(name).main()
    assert rec.errors == []
    [trace] = rec.traces  # parameters come from numpy: the step is the only compile
    program = traces.load(trace)
    replayed = compiler.run_module(program.module, program.inputs, options={}).outputs
    recorded = load_arrays(trace / "outputs.npz", result_dtypes(program.module))
    assert len(replayed) == len(recorded)
    for got, want in zip(replayed, recorded, strict=True):
        assert got.dtype == want.dtype and _bits(got) == _bits(want)
    if name == "moe_topk":  # one call: what the program saw is what was recorded
        assert _bits(np.asarray(returned)) == _bits(recorded[0])
