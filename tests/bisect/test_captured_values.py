"""A cond whose branches read values of @main that are not its operands (the implicit
captures StableHLO allows in case, if and while regions; jax lowers every `lax.cond` so)
is cut like any other op: what its regions capture becomes parameters of the cut, in the
single-op modules of the float64 values (serve.every_value) and in the cases the stages
build (context.subgraph). Before, every cut of such an op failed to verify ("using value
defined outside the region") and the bisection of s31-i2080 stopped at its first request.

The bug bisected is a real one of jaxlib 0.10.2 (bench/repros/shift_set_then_reshape.py):
a shift-register step whose result is reshaped comes out as x[0] everywhere; here, as in
s31-i2080, the step is a one-trip loop on the cond's result. (Without the loop, the legal
configuration, compiled whole, shares the bug: the reduced case still fails against the
float64 values, but its bundle's expected values are the legal, wrong ones and no cure
is found.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from findings import make_finding, shift_inputs
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.xla.cuts import CutError, Parsed
from xla_sentinel.xla.faults import fault_path

TIMEOUT = 120.0


def shift_after_cond(x: Any, p: Any) -> Any:
    """y computed before a cond that closes over it, the shift (a one-trip fori_loop of
    s31-i2080's loop_shift) and the reshape after it."""
    from jax import lax

    y = x * 3 - 1
    c = lax.cond(p, lambda: -y, lambda: y + x)
    shifted = lax.fori_loop(0, 1, lambda i, v: v.at[1:].set(v[:-1]).at[0].set(-v[0]), c)
    return shifted[:, None]


def shift_inputs_7() -> list[np.ndarray]:
    return [np.array([12, -7, -3, -3, 12, 13, 0], np.int32), np.array(True)]


def captured_shift(x: Any, s: Any) -> Any:
    """A cond whose taken branch shifts captured values right (what shift_right_logical
    corrupts), between ops that compute and use them."""
    from jax import lax

    scaled = x * 3 + 1
    picked = lax.cond(s[0, 0] >= 0, lambda: lax.shift_right_arithmetic(scaled, s),
                      lambda: scaled - s)
    return picked + (x & 7)


def _case_index(info: dict[str, Any]) -> int:
    return next(i for i, op in enumerate(info["ops"]) if op["name"] == "stablehlo.case")


def test_a_cut_takes_what_a_region_captures_as_a_parameter() -> None:
    import jax

    module = jax.jit(shift_after_cond).lower(*shift_inputs_7()).as_text()
    parsed = Parsed(module)
    info = parsed.info()
    k = _case_index(info)
    case = info["ops"][k]
    # jax reads y (and x) in the branches, not as operands of the case.
    assert "stablehlo.case" in module and case["captures"], case
    made = {r["vid"]: i for i, op in enumerate(info["ops"]) for r in op["results"]}
    y = next(v for v in case["captures"] if v in made)
    assert y in case["operands"] and made[y] < k
    # The op alone: its index and its captures are the parameters, and it verifies.
    text = parsed.cut([k], case["operands"], [r["vid"] for r in case["results"]])
    assert "stablehlo.case" in text
    # A cut that neither keeps nor feeds a captured value is refused, not left unverifiable.
    with pytest.raises(CutError, match=f"reads {y}"):
        parsed.cut([k], [v for v in case["operands"] if v != y], [r["vid"] for r in case["results"]])
    # Kept with its producer, the captured value is no parameter.
    keep = [made[y], k]
    made_here = {r["vid"] for i in keep for r in info["ops"][i]["results"]}
    params = list(dict.fromkeys(v for i in keep for v in info["ops"][i]["operands"]
                                if v not in made_here))
    assert y not in params
    assert parsed.cut(keep, params, [r["vid"] for r in case["results"]]).count("stablehlo.case") == 1


def repro(bundle: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "repro.py", *args], cwd=bundle, capture_output=True,
                          text=True, timeout=TIMEOUT, env=env)


def test_a_real_bug_after_a_capturing_cond_is_localized(tmp_path: Path) -> None:
    folder = make_finding(tmp_path / "shift-after-cond", shift_after_cond, shift_inputs_7(),
                          dtype="s32", evidence={"reason": "bitwise", "output": 0})

    result = bisect_finding(folder, timeout=TIMEOUT)

    assert result["reproduces"], result["stages"]["reproduce"]
    assert result["status"] == "localized", result["stages"]
    info = Parsed((folder / "program" / "module.mlir").read_text()).info()
    # After the cond: the suffix search stops at the loop's trip count (a constant, which
    # the bug needs as one: algsimp unrolls the loop), and reduce moves the culprit on to
    # the last op of the reduced case that computes something, the reshape.
    graph = result["stages"]["graph"]
    assert graph["culprit_index"] > _case_index(info), graph
    assert result["culprit_op"] == "broadcast_in_dim (s32->s32)", result["stages"]["reduce"]
    assert "stablehlo.while" in result["stages"]["reduce"]["kept_ops"], result["stages"]["reduce"]
    assert "algsimp" in result["stages"]["passes"]["curing_passes"], result["stages"]["passes"]
    bundle = folder / result["repro"]
    shown = repro(bundle)
    assert shown.returncode == 1 and "BUG" in shown.stdout, shown.stdout + shown.stderr
    cured = repro(bundle, "--xla-option", "xla_disable_hlo_passes=algsimp")
    assert cured.returncode == 0, cured.stdout + cured.stderr
    assert json.loads((folder / "finding.json").read_text())["culprit_op"] == result["culprit_op"]


def test_a_fault_inside_a_branch_is_localized_to_the_op_in_it(tmp_path: Path) -> None:
    # The suffix search stops at the case: the reduced case keeps it, its captured values
    # fed as parameters with their float64 reference values; the regions stage
    # (bisect/regions.py) then names the shift inside the taken branch.
    inputs = shift_inputs()
    inputs[1][0, 0] = 1  # the shifting branch is taken
    folder = make_finding(tmp_path / "captured-shift", captured_shift, inputs,
                          [fault_path("shift_right_logical")], dtype="s32")

    result = bisect_finding(folder, timeout=TIMEOUT)

    assert result["status"] == "localized", result["stages"]
    assert result["stages"]["graph"]["culprit_op"].startswith("case ("), result["stages"]["graph"]
    k = result["stages"]["graph"]["culprit_index"]
    assert result["culprit_op"] == "shift_right_arithmetic (s32->s32)", result["stages"]["regions"]
    assert re.fullmatch(rf"main/case#{k}/branch\d/shift_right_arithmetic#\d+", result["culprit_path"]), \
        result["stages"]["regions"]
    reduce = result["stages"]["reduce"]
    assert "stablehlo.case" in reduce["kept_ops"] and reduce["ops_after"] < reduce["ops_before"], reduce
    module = (folder / result["repro"] / "module.mlir").read_text()
    assert module.count("stablehlo.case") == 1
