"""The noise model: what legal rounding can do to a program's outputs.

The case is clean-run program s5-i4440 cut down: f16 floor(rsqrt(|x| + 0.5)) with
|x| + 0.5 = 1 + 2^-10. rsqrt is 0.99951207, which rounds to 0.99951172 (floor 0); one
configuration's rsqrt came out one ulp high, 1.0 (floor 1). No op-level guarantee
forbids that, so the oracle must not call it a miscompile.
"""

from __future__ import annotations

import numpy as np
import pytest
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.judge.oracle import OutputInfo, judge
from xla_sentinel.programs import evaluate
from xla_sentinel.worker import handlers
from xla_sentinel.worker.protocol import Noise

pytestmark = pytest.mark.usefixtures("x64")

GRAPH = Graph(
    values=[Value([8], "f16", False, input=0),
            Value([8], "f16", True, node=0),
            Value([8], "f16", True, node=1)],
    nodes=[Node("rsqrt", [0], {}),
           Node("floor", [1], {}, True)],
    outputs=[2])
# rsqrt's domain guard takes |x| + 0.5; element 0 lands on 1 + 2^-10, the others far
# from any integer after rsqrt.
X = np.array([-0.5009765625, 0.1, 3.0, -0.2, 7.0, 0.05, -2.0, 0.3], np.float16)


def _noise_samples(x: np.ndarray = X) -> list[list[np.ndarray]]:
    return handlers.noise(Noise(GRAPH, [x], seed=7)).samples


def test_directed_samples_move_every_op_one_ulp_each_way() -> None:
    up = evaluate.eager(GRAPH, [X], promote=True, sign=1.0, directed=True)[0]
    down = evaluate.eager(GRAPH, [X], promote=True, sign=-1.0, directed=True)[0]
    ref = evaluate.eager(GRAPH, [X], promote=True)[0]

    assert ref[0] == 0.0 and up[0] > 1.0 and down[0] == 0.0
    # floor's own output is moved too, by half an ulp: floor is exact, unlike rsqrt.
    ones = ref == 1.0
    np.testing.assert_allclose(up[ones], 1 + 2.0**-11)
    np.testing.assert_allclose(down[ones], 1 - 2.0**-11)


def test_a_floor_flipped_by_a_one_ulp_rsqrt_is_legal() -> None:
    ref = evaluate.eager(GRAPH, [X], promote=True)
    literal = evaluate.eager(GRAPH, [X])
    one_ulp_high = [literal[0].copy()]
    one_ulp_high[0][0] = 1.0
    results = {"no_fusion_emitters": one_ulp_high, "default": literal}
    samples = _noise_samples()
    info = [OutputInfo("f16", True)]

    j = judge("no_fusion_emitters", results, ref, info, lambda: samples, discrete=True)
    assert j.verdict == "pass", j.evidence
    # The random samples alone (U(-u, u) per op) do not reach the flip.
    j = judge("no_fusion_emitters", results, ref, info, lambda: samples[:2], discrete=True,
              literal="none")
    assert j.verdict == "mismatch"


def test_a_flip_no_ulp_explains_is_still_flagged() -> None:
    # Without the element next to the tie, no noise sample flips anything, and a floor
    # of rsqrt(3.5) = 0.53 that comes out 1 is a miscompile. (Where a program does have
    # a legal flip, the normwise rule excuses one flip of that size anywhere in that
    # output: a known limit of judging outputs as a whole, docs/architecture.md.)
    x = X.copy()
    x[0] = 3.0
    ref = evaluate.eager(GRAPH, [x], promote=True)
    literal = evaluate.eager(GRAPH, [x])
    wrong = [literal[0].copy()]
    wrong[0][2] = 1.0
    results = {"no_fusion_emitters": wrong, "default": literal}
    samples = _noise_samples(x)

    j = judge("no_fusion_emitters", results, ref, [OutputInfo("f16", True)], lambda: samples,
              discrete=True, literal="none")
    assert j.verdict == "mismatch", j.evidence


# Clean-run program s6-i1097 cut down: an f32 dot whose row is [1.7e38, 1.7e38, 0] and
# column [-1.25, 3, 2.47]. The float64 result, 2.97e38, is finite in f32, but the product
# 1.7e38 * 3 is not: O0 rounds it to inf, a target that fuses the multiply-add does not.
DOT = Graph(
    values=[Value([1, 3], "f32", False, input=0),
            Value([3, 1], "f32", False, input=1),
            Value([1, 1], "f32", True, node=0),
            Value([1, 1], "f32", True, node=1)],
    nodes=[Node("dot_general", [0, 1],
                {"lhs_contract": [1], "rhs_contract": [0], "lhs_batch": [], "rhs_batch": []}),
           Node("neg", [2], {})],
    outputs=[2, 3, 1])
ROW = np.float32([[1.7014117e38, 1.7014117e38, 0.0]])
COLUMN = np.float32([[-1.254481], [3.0], [2.4702647]])


def test_overflow_prone_marks_outputs_behind_a_sum_of_huge_terms() -> None:
    assert evaluate.overflow_prone(DOT, [ROW, COLUMN]) == [True, True, False]
    # Same program, terms that stay in range: nothing is prone.
    assert evaluate.overflow_prone(DOT, [ROW / 1e3, COLUMN]) == [False, False, False]


def test_overflow_prone_marks_an_intermediate_beyond_its_dtype() -> None:
    # f16: x * x = 90000 > 65504, then * 0.1 brings it back in range; a target that keeps
    # the f16 intermediate in f32 (excess precision) stays finite, the literal one does not.
    graph = Graph(values=[Value([2], "f16", False, input=0),
                          Value([2], "f16", False, input=1),
                          Value([2], "f16", True, node=0),
                          Value([2], "f16", True, node=1)],
                  nodes=[Node("mul", [0, 0], {}),
                         Node("mul", [2, 1], {})],
                  outputs=[3])
    tenth = np.float16([0.1, 0.1])
    assert evaluate.overflow_prone(graph, [np.float16([300.0, 1.0]), tenth]) == [True]
    assert evaluate.overflow_prone(graph, [np.float16([200.0, 1.0]), tenth]) == [False]


def test_a_non_finite_result_is_no_verdict_only_where_overflow_is_legal() -> None:
    ref = evaluate.eager(DOT, [ROW, COLUMN], promote=True)
    fma = [np.float32(r) for r in ref]  # the fused target: finite, next to float64
    rounded = [np.full_like(fma[0], np.inf), np.full_like(fma[1], -np.inf), fma[2]]
    results = {"O0": rounded, "default": fma}
    infos = [OutputInfo("f32", True)] * 3

    prone = evaluate.overflow_prone(DOT, [ROW, COLUMN])
    assert judge("O0", results, ref, infos, _noise_samples_of(DOT, [ROW, COLUMN]),
                 overflow_prone=lambda: prone).verdict == "pass"
    j = judge("O0", results, ref, infos, _noise_samples_of(DOT, [ROW, COLUMN]),
              overflow_prone=lambda: [False, False, False])
    assert j.verdict == "nan_mismatch" and j.output == 0


def _noise_samples_of(graph: Graph, inputs: list[np.ndarray]):
    reply = handlers.noise(Noise(graph, inputs, seed=7))
    assert reply.overflow == evaluate.overflow_prone(graph, inputs)
    return lambda: reply.samples


def _reduction(op: str, shape: list[int], attrs: dict) -> Graph:
    return Graph(values=[Value(shape, "f16", False, input=0),
                         Value([1], "f16", True, node=0)],
                 nodes=[Node(op, [0], attrs)],
                 outputs=[1])


def test_a_long_sum_may_move_by_sqrt_n_times_its_terms_magnitude() -> None:
    # 400 terms that cancel: one rounding of the result would allow almost nothing, while
    # each of the 400 additions rounds at the size of the partial sums.
    x = np.float16(np.where(np.arange(400) % 2 == 0, 3.0, -3.0))
    x[0] = 3.5
    graph = _reduction("reduce_sum", [1, 400], {"axes": [1]})
    (ref,) = evaluate.eager(graph, [x[None]], promote=True)
    (up,) = evaluate.eager(graph, [x[None]], promote=True, sign=1.0, directed=True)

    np.testing.assert_allclose(up - ref, 2.0**-11 * np.sqrt(400) * 1200.5)


def test_a_long_product_may_move_by_sqrt_n_roundings() -> None:
    x = np.float16(np.full((1, 3264), 1.0001))  # the guard keeps products near 1
    graph = _reduction("reduce_prod", [1, 3264], {"axes": [1]})
    (ref,) = evaluate.eager(graph, [x], promote=True)
    (down,) = evaluate.eager(graph, [x], promote=True, sign=-1.0, directed=True)

    np.testing.assert_allclose(down, ref * (1 - 2.0**-11 * np.sqrt(3264)))


def test_overflow_prone_counts_the_finite_terms_of_a_sum_that_holds_an_inf() -> None:
    # s25-i256 (f16): sum([inf, -32750 x 3]) is inf in float64 and where it is accumulated
    # in f32, NaN where the three -32750 meet first (-inf) and then the inf.
    graph = Graph(values=[Value([4], "f16", False, input=0),
                          Value([], "f16", True, node=0),
                          Value([], "f16", True, node=1)],
                  nodes=[Node("reduce_sum", [0], {"axes": [0]}),
                         Node("logistic", [1], {})],
                  outputs=[2])
    assert evaluate.overflow_prone(graph, [np.float16([np.inf, -32750, -32750, -32750])]) == [True]
    assert evaluate.overflow_prone(graph, [np.float16([np.inf, -3, -3, -3])]) == [False]


def test_overflow_prone_counts_finite_f64_terms_that_add_up_beyond_float64() -> None:
    # Clean run s41-i31 cut down: f64 terms each finite whose magnitudes add up beyond
    # 1.8e308. numpy's float64 sum was -inf, the default target's -1.35e308, f64_eager's
    # another inf/NaN pattern: all legal, as the order of the additions decides.
    f64_dot = Graph(values=[Value([1, 3], "f64", False, input=0), Value([3, 1], "f64", False, input=1),
                            Value([1, 1], "f64", True, node=0)],
                    nodes=[Node("dot_general", [0, 1], {"lhs_contract": [1], "rhs_contract": [0],
                                                        "lhs_batch": [], "rhs_batch": []})],
                    outputs=[2])
    row = np.float64([[-1.2e308, -1.2e308, 1.0e308]])
    column = np.float64([[1.0], [1.0], [1.0]])
    assert evaluate.overflow_prone(f64_dot, [row, column]) == [True]
    assert evaluate.overflow_prone(f64_dot, [row / 10, column]) == [False]


# A NaN that only the program's own precision makes, every value in range: f16
# (1 + 23/1024)^2 is 1.0454 exactly and rounds up to 1 + 47/1024; times 62656 it is
# 65532, which rounds to inf (inf - inf: NaN), where float64 has 65502 (finite in f16,
# so no overflow rule applies). XLA:CPU rounds each f16 op as written (every preset gives
# NaN); a configuration that keeps excess precision between ops (as XLA's
# xla_allow_excess_precision permits) stays finite, as float64 does.
CANCEL = Graph(
    values=[Value([2], "f16", False, input=0),
            Value([2], "f16", False, input=1),
            Value([2], "f16", True, node=0),
            Value([2], "f16", True, node=1),
            Value([2], "f16", True, node=2)],
    nodes=[Node("mul", [0, 0], {}),
           Node("mul", [2, 1], {}),
           Node("sub", [3, 3], {})],
    outputs=[4])
CANCEL_X = np.float16([1 + 23 / 1024, 1.5])
CANCEL_Z = np.float16([62656, 3.0])


def _cancel_results(literal_nan: bool = True) -> tuple[dict, list[np.ndarray]]:

    from xla_sentinel.xla import compiler

    inputs = [CANCEL_X, CANCEL_Z]
    ref = evaluate.eager(CANCEL, inputs, promote=True)
    literal = evaluate.eager(CANCEL, inputs)
    o0 = compiler.run_module(evaluate.lower_text(CANCEL), inputs,
                            {"xla_backend_optimization_level": 0}).outputs
    assert np.isnan(literal[0][0]) and np.isnan(np.asarray(o0[0])[0]) and ref[0][0] == 0.0
    excess = [np.float16(r) for r in ref]  # f32 kept between the ops: finite, as float64
    if not literal_nan:
        literal = excess
    return {"O0": [np.asarray(o) for o in o0], "excess_precision": excess, "eager": literal}, ref


def test_a_nan_the_programs_own_precision_makes_in_range_is_legal() -> None:
    results, ref = _cancel_results()
    j = judge("O0", results, ref, [OutputInfo("f16", True)], lambda: None,
              overflow_prone=lambda: evaluate.overflow_prone(CANCEL, [CANCEL_X, CANCEL_Z]))
    assert evaluate.overflow_prone(CANCEL, [CANCEL_X, CANCEL_Z]) == [False]
    assert j.verdict == "pass", j.evidence


def test_a_nan_the_own_precision_does_not_make_is_still_flagged() -> None:
    # The same NaN where op-by-op evaluation at f16 stays finite is the target's own.
    results, ref = _cancel_results(literal_nan=False)
    j = judge("O0", results, ref, [OutputInfo("f16", True)], lambda: None)
    assert j.verdict == "nan_mismatch" and j.evidence["actual_class"] == "nan", j.evidence


def test_a_dropped_nan_is_flagged_even_where_the_literal_drops_it() -> None:
    # float64 NaN, target finite: more precision never makes a NaN, so a literal that
    # also drops it (a reference sharing XLA's NaN-dropping reduction) excuses nothing.
    ref = [np.array([np.nan, 1.0])]
    finite = [np.float16([2.0, 1.0])]
    results = {"default": finite, "O0": [np.float16([np.nan, 1.0])], "eager": finite}
    j = judge("default", results, ref, [OutputInfo("f16", True)], lambda: None)
    assert j.verdict == "nan_mismatch" and j.evidence["expected_class"] == "nan", j.evidence
