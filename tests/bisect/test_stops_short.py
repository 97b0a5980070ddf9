"""Where the bisector stops short on three real findings of today's clean runs (unmodified
jaxlib, default target), bisected from their folders as the campaign wrote them
(tests/bisect/data), pinning the causes docs/bisect.md ("Where it stops short") gives:

- s34-i1659, `mismatch` (bitwise) of a 4-device program: a pmax of
  where(partition_id == 1, x, -inf) whose max all-reduce drops the NaN of x. Every
  reference the bisector has (the legal compile, the float64 values) runs the manual
  computation through XLA's all-reduce on its devices and shares the bug, so the finding
  is not reproduced.
- s33-i1632 and s33-i2033, `crash`: the SPMD partitioner aborts in HandlePad. The pad is
  an op of @main, named by the suffix search; reduce keeps it with the region op that
  reads it (neither fails alone) and moves a compiler failure's culprit to that region op;
  the regions stage finds no prefix of the region's ops that crashes on its own.

Nothing is mocked: real jaxlib compiles in real worker processes; the bugs are jaxlib's.
When a fix lands (a reference for collectives outside XLA, a crash named by its abort),
these tests fail and the documentation must change with them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shared import once
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.bisect.pipeline import open_context

DATA = Path(__file__).parent / "data"


def _bisect(group: str, program: str) -> Any:
    def build(root: Path) -> dict[str, Any]:
        folder = root / program
        shutil.copytree(DATA / group / program, folder)
        result = bisect_finding(folder, timeout=120)
        return {"result": result, "record": json.loads((folder / "finding.json").read_text())}
    return build


@pytest.fixture(scope="module")
def bisected(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Any:
    def get(group: str, program: str) -> dict[str, Any]:
        return once(tmp_path_factory, worker_id, f"short-{program}", _bisect(group, program))
    return get


def test_pmax_dropping_nan_is_shared_by_every_reference(bisected: Any, tmp_path: Path) -> None:
    out = bisected("s34", "s34-i1659")
    assert out["result"]["status"] == "not_reproduced"
    assert out["record"]["evidence"]["bisect"]["stages"]["reproduce"]["verdict"] == "pass"

    folder = tmp_path / "s34-i1659"
    shutil.copytree(DATA / "s34" / "s34-i1659", folder)
    ctx = open_context(folder)
    try:
        returns = list(dict.fromkeys(v for v in ctx.info["returns"] if ctx.defined_at(v) >= 0))
        case = ctx.case(list(range(len(ctx.ops))), returns)
        assert case is not None
        region = ctx.info["returns"][0]
        assert ctx.ops[ctx.defined_at(region)]["name"] == "sdy.manual_computation"
        assert np.isnan(ctx.program.inputs[0][0, 0])  # the NaN that device 1 hands the pmax
        # The float64 value of the region: XLA's all-reduce on the region's 4 devices.
        assert np.isneginf(ctx.values[region][0, 0])
        target = ctx.lab.run_target(case.module, case.inputs).ran
        assert target is not None
        legal = ctx.lab.legal(case.module, case.inputs)
        k = case.outputs.index(region)
        assert np.isneginf(target.outputs[k][0, 0])
        # The legal compile keeps the devices of the manual computation (partition_id is
        # not 0 everywhere: x comes through) and drops the NaN the same way, bitwise alike.
        np.testing.assert_array_equal(legal[k], target.outputs[k])
        assert np.array_equal(legal[k][1:], ctx.program.inputs[0][1:])
        assert not case.infos[k].bitwise
    finally:
        ctx.lab.close()


@pytest.mark.parametrize(("program", "region_op"), [
    ("s33-i1632", "sdy.manual_computation (bool->bool)"),
    ("s33-i2033", "case (s32->f16)"),
])
def test_partitioner_pad_crash_moves_to_the_region_op_that_reads_it(bisected: Any, program: str,
                                                                   region_op: str) -> None:
    out = bisected("s33", program)
    stages = out["record"]["evidence"]["bisect"]["stages"]
    assert out["result"]["status"] == "localized"
    assert stages["graph"]["culprit_op"].startswith("pad (")  # an op of @main
    reduce = stages["reduce"]
    assert reduce["kept_ops"][0] == "stablehlo.pad" and len(reduce["kept_ops"]) == 2
    assert reduce["culprit_alone_fails"] is False
    assert reduce["culprit_moved"] == {"from": stages["graph"]["culprit_op"], "to": region_op}
    assert out["result"]["culprit_op"] == region_op
    # The regions stage asks the region's prefixes whether they still crash: none does (the
    # pad outside, read by the region op, is what the partitioner aborts on), so nothing
    # inside is named and the culprit stays the region op.
    regions = stages["regions"]
    assert regions["inner_op"] is None and "crashes on its own" in regions["note"], regions
    assert not any(step.get("crashes") and step.get("exposed") != "arguments" for step in regions["trail"])
