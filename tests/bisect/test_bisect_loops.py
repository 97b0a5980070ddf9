"""A loop's later iterations and its condition (bisect/regions.py `_search_while`): a fault
that shows only from a later iteration on is localized to the op inside at that iteration,
and a condition that decides wrong (a wrong trip count, every body op right) to the
condition's op. Real compiles of injected faults: shift_right_logical (xla/faults), which
fires only on negative values that the loop reaches late, and loop_bound_fault (a test
plugin beside this file: registered faults are held to the fault corpus of tests/faults),
which makes a while condition's LT an LE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from findings import make_finding
from test_bisect_regions import TIMEOUT, _assert_localized_inside, result_listing
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.xla import compiler, cuts
from xla_sentinel.xla.faults import fault_path

LOOP_BOUND_FAULT = str(Path(__file__).resolve().parent / "loop_bound_fault.py")


def late_shift(x: Any, s: Any) -> Any:
    """A loop whose carried value falls by about 9 per iteration: from inputs 20..27 the
    shift's operand stays positive at iterations 0 and 1 and turns negative at iteration
    2, where an arithmetic and a logical shift first differ."""
    from jax import lax

    def body(i: Any, v: Any) -> Any:
        d = v - 9
        shifted = lax.shift_right_arithmetic(d * 3 + 1, s)
        return d + lax.min(shifted, 1)  # a logical shift's large value shows as 1

    return lax.fori_loop(0, 6, body, x - 1) * 2


def _regions_evidence(folder: Path) -> dict[str, Any]:
    record = json.loads((folder / "finding.json").read_text())
    return record["evidence"]["bisect"]["stages"]["regions"]


def test_a_fault_from_the_third_iteration_on_is_localized_with_its_iteration(tmp_path: Path) -> None:
    x = np.arange(21, 29, dtype=np.int32)
    s = np.array([1, 2, 3, 1, 2, 3, 1, 2], dtype=np.int32)
    folder = make_finding(tmp_path / "late-shift", late_shift, [x, s],
                          [fault_path("shift_right_logical")], dtype="s32")

    result = bisect_finding(folder, timeout=TIMEOUT)

    body = [op["name"] for op in result_listing(folder, result)]
    k = body.index("stablehlo.shift_right_arithmetic")
    w = result["stages"]["graph"]["culprit_index"]
    path = f"main/while#{w}/body/shift_right_arithmetic#{k}"
    _assert_localized_inside(folder, result, "while", path, "shift_right_arithmetic (s32->s32)")
    regions = _regions_evidence(folder)
    assert regions["iteration"] == 2 and regions["iterations"] == {f"main/while#{w}": 2}, regions
    trail = regions["trail"]
    assert trail[0]["exposed"] == "trips" and not trail[0]["fails"], trail
    assert trail[0]["reference"] == trail[0]["target"] == 6, trail
    # Every value of iterations 0 and 1 comes out right, of iteration 2 not.
    by_iteration = {t["iteration"]: t["fails"] for t in trail if "iteration" in t}
    assert by_iteration == {1: False, 2: True}, trail
    assert not any(t["fails"] for t in trail if t["path"][-1] == [0, 1, 0]), trail


def counted(x: Any) -> Any:
    from jax import lax

    return lax.fori_loop(0, 4, lambda i, v: v * 1.5 + i, x - 1.0) * 2.0


def test_a_condition_that_decides_wrong_is_localized_to_its_compare(tmp_path: Path) -> None:
    x = np.random.default_rng(7).normal(size=(6,)).astype(np.float32)
    folder = make_finding(tmp_path / "loop-bound", counted, [x], [LOOP_BOUND_FAULT])

    result = bisect_finding(folder, timeout=TIMEOUT)

    w = result["stages"]["graph"]["culprit_index"]
    # The condition as jax writes it: the bound (a constant), then the compare (#1).
    _assert_localized_inside(folder, result, "while", f"main/while#{w}/cond/compare#1",
                             "compare LT (s32->bool)")
    regions = _regions_evidence(folder)
    # The target runs 5 iterations for 4: the condition decided wrong before iteration 4,
    # on values it reads right there.
    assert regions["trips"] == {"reference": 4, "target": 5}, regions
    assert regions["iteration"] == 4 and regions["decision"] is True, regions
    control = [t for t in regions["trail"] if t["exposed"] == "arguments"]
    assert control and control[0]["path"][-1] == [0, 0, 4] and not control[0]["fails"], regions


def test_exposing_a_later_iteration_the_trip_count_and_the_condition() -> None:
    """`expose` at iteration k of a body, the trip count counted beside the loop, and the
    condition's values at check k (recomputed from what it reads there): against the
    loop's own arithmetic, on the reference compiler."""
    import jax
    from jax import lax

    def f(x: Any) -> Any:
        return lax.fori_loop(0, 5, lambda i, v: v * 2 + i, x)

    x = np.arange(4, dtype=np.float32)
    module = cuts.inline_calls(jax.jit(f).lower(x).as_text())
    body, cond = cuts.region_ops(module, [[2, 1]]), cuts.region_ops(module, [[2, 0]])
    mul = next(k for k, op in enumerate(body) if op["name"] == "stablehlo.multiply")
    lt = next(k for k, op in enumerate(cond) if op["name"] == "stablehlo.compare")
    assert [op["returned"] for op in cond] == [k == lt for k in range(len(cond))]

    def run(path: list[list[int]], ops: list[int]) -> list[np.ndarray]:
        return compiler.run_module(cuts.expose(module, path, ops), [x], {}).outputs

    v = x
    for k in range(5):
        (got,) = run([[2, 1, k]], [mul])
        np.testing.assert_array_equal(got, v * 2)
        v = v * 2 + k
    (never,) = run([[2, 1, 5]], [mul])  # past the last iteration: the zeros it starts from
    np.testing.assert_array_equal(never, np.zeros_like(x))
    (trips,) = run([[2, 0]], [len(cond)])
    assert trips == 5
    for k in range(7):
        decision, counter = run([[2, 0, k]], [lt, -1])
        # Check k reads the counter k (zeros past the loop's end, check 5 its last).
        assert (bool(decision), int(counter)) == ((k < 5, k) if k <= 5 else (False, 0))


def test_exposing_an_iteration_of_a_loop_inside_a_loop() -> None:
    """Each loop level picks its own iteration: the inner loop's iteration ki of the run
    the outer loop's iteration ko makes, and the inner trip count as that run counts it."""
    import jax
    from jax import lax

    def f(x: Any) -> Any:
        return lax.fori_loop(0, 3, lambda i, v: lax.fori_loop(0, 4, lambda j, w: w * 2 + j, v) + 100 * i, x)

    x = np.arange(2, dtype=np.float32)
    module = cuts.inline_calls(jax.jit(f).lower(x).as_text())
    wo = next(k for k, op in enumerate(cuts.region_ops(module, [])) if op["name"] == "stablehlo.while")
    wi = next(k for k, op in enumerate(cuts.region_ops(module, [[wo, 1]]))
              if op["name"] == "stablehlo.while")
    mul = next(k for k, op in enumerate(cuts.region_ops(module, [[wo, 1], [wi, 1]]))
               if op["name"] == "stablehlo.multiply")
    inner_cond = len(cuts.region_ops(module, [[wo, 1], [wi, 0]]))
    v = x
    for ko in range(3):
        w = v
        for ki in range(4):
            (got,) = compiler.run_module(cuts.expose(module, [[wo, 1, ko], [wi, 1, ki]], [mul]),
                                         [x], {}).outputs
            np.testing.assert_array_equal(got, w * 2)
            w = w * 2 + ki
        (trips,) = compiler.run_module(cuts.expose(module, [[wo, 1, ko], [wi, 0]], [inner_cond]),
                                       [x], {}).outputs
        assert trips == 4
        v = w + 100 * ko
