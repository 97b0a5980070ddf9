"""Four findings of a 3,000-program clean run on unmodified jaxlib 0.10.2 (seed 33, default
generator), each a known XLA bug the bisector once failed on, bisected from their real
finding folders (tests/bisect/data/s33, copied as the campaign wrote them):

- s33-i45, `crash` of default: the SPMD partitioner aborts on a gather at u8 indices. Its
  module holds shard_map bodies, so each op cut alone kept them and was compiled
  partitioned: the float64 values aborted the reference worker too.
- s33-i348, `compile_error` of no_fusion_emitters: clamp of PRED. The float64 values cannot
  be computed (the reference's options have no fusion emitters either): a compiler
  failure is bisected without them.
- s33-i297, `mismatch` (bitwise bool) of a 4-device program: a dynamic_slice the
  partitioner clamps wrongly. The legal run and the values were partitioned the same way
  (the shard_map bodies again), so the reproduction passed.
- s33-i1166, `nan_mismatch` of f64_jit, the float64 reference itself: a YNNPACK max
  reduction over 12,297 elements drops NaN; bisected on the program promoted to float64
  under the reference's options, so the known-bug rule (fusion kind) matches.

Nothing is mocked: real jaxlib compiles, in real worker processes; the bugs are jaxlib's.
Each finding's `known_bug` is cleared first, so the match asserted is the bisector's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from shared import once
from xla_sentinel.bisect import bisect_finding

DATA = Path(__file__).parent / "data" / "s33"


def _bisect(program: str) -> Any:
    def build(root: Path) -> dict[str, Any]:
        folder = root / program
        shutil.copytree(DATA / program, folder)
        path = folder / "finding.json"
        record = json.loads(path.read_text())
        record["known_bug"] = None
        path.write_text(json.dumps(record, indent=1))
        result = bisect_finding(folder, timeout=120)
        repro = subprocess.run([sys.executable, "repro.py"], cwd=folder / result["repro"],
                               capture_output=True, text=True, timeout=300) if result["repro"] else None
        return {"result": result, "record": json.loads(path.read_text()),
                "repro_rc": repro.returncode if repro else None,
                "repro_out": (repro.stdout + repro.stderr)[-2000:] if repro else ""}
    return build


@pytest.fixture(scope="module")
def bisected(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Any:
    def get(program: str) -> dict[str, Any]:
        return once(tmp_path_factory, worker_id, f"clean-{program}", _bisect(program))
    return get


def _localized(done: dict[str, Any], culprit_op: str, known_bug: str) -> dict[str, Any]:
    result, record = done["result"], done["record"]
    assert result["status"] == "localized", result["stages"]
    assert result["culprit_op"] == culprit_op
    assert record["culprit_op"] == culprit_op
    assert record["known_bug"] == known_bug
    assert done["repro_rc"] == 1 and "BUG" in done["repro_out"], done["repro_out"]
    return result


def test_spmd_gather_crash_localized_to_the_gather(bisected: Any) -> None:
    result = _localized(bisected("s33-i45"), "gather (s32,u8->s32)", "xla-spmd-gather-narrow-indices")
    assert result["stages"]["reproduce"]["verdict"] == "crash"
    assert "values" not in result  # each op alone runs unsharded: the values are there


def test_compile_error_without_values_localized_to_the_clamp(bisected: Any) -> None:
    result = _localized(bisected("s33-i348"), "clamp (bool->bool)",
                        "xla-cpu-clamp-pred-no-fusion-emitters")
    assert result["values"].startswith("unavailable: ")
    assert "Clamp unimplemented for PRED" in result["values"]
    assert result["stages"]["reproduce"]["values"] == result["values"]
    assert result["stages"]["reduce"]["ops_after"] == 1


def test_spmd_dynamic_slice_mismatch_reproduced_and_localized(bisected: Any) -> None:
    result = _localized(bisected("s33-i297"), "dynamic_slice (bool,u8->bool)", "xla-spmd-dynamic-slice-clamp")
    assert result["stages"]["reproduce"]["verdict"] == "mismatch"
    # Disabling algsimp alone cures it (passes.PASS_DISABLES, tried before the pair).
    assert result["culprit_pass"] == "xla_disable_hlo_passes=algsimp"


def test_f64_reference_finding_bisected_in_float64(bisected: Any) -> None:
    result = _localized(bisected("s33-i1166"), "reduce (f64->f64)", "xla-cpu-ynn-fusion-drops-nan")
    assert result["stages"]["reproduce"]["verdict"] == "nan_mismatch"
    assert "promoted to float64" in result["module"]
    assert "numpy's float64 values" in result["module"] and "otherwise" not in result["module"]
    assert result["fusion_kind"] == "kCustom:__ynn_fusion"
    assert result["culprit_pass"] == "xla_cpu_experimental_ynn_fusion_type="
