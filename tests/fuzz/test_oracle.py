"""The oracle separates legal floating-point differences from miscompiles."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from xla_sentinel.judge import oracle
from xla_sentinel.judge.oracle import OutputInfo, judge

RNG = np.random.default_rng(0)


def _no_noise() -> None:
    return None


def _sum_orders(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Two legal f32 summation orders of the rows of x, and the float64 truth."""
    forward = np.zeros(x.shape[1], np.float32)
    for row in x:
        forward = forward + row
    backward = np.zeros(x.shape[1], np.float32)
    for row in x[::-1]:
        backward = backward + row
    return forward, backward, x.astype(np.float64).sum(axis=0)


def test_legal_reassociation_passes() -> None:
    x = RNG.normal(size=(512, 16)).astype(np.float32)
    forward, backward, ref = _sum_orders(x)
    assert not np.array_equal(forward, backward)  # the orders really differ bitwise
    results = {"default": forward, "O0": backward}
    for name in results:
        j = judge(name, {k: [v] for k, v in results.items()}, [ref], [OutputInfo("f32")], _no_noise)
        assert j.verdict == "pass", j.evidence


def test_a_real_error_fails_with_evidence() -> None:
    x = RNG.normal(size=(64, 8)).astype(np.float32)
    ref = np.exp(x.astype(np.float64))
    good = np.exp(x)
    bad = good.copy()
    bad[3, 5] *= np.float32(1 + 1e-4)  # one element off by 1e-4 relative
    results = {"default": [bad], "O0": [good], "eager": [good]}
    j = judge("default", results, [ref], [OutputInfo("f32")], _no_noise)
    assert j.verdict == "mismatch"
    assert j.evidence["where"] == [3, 5]
    assert j.evidence["max_ulp"] > 100
    assert judge("O0", results, [ref], [OutputInfo("f32")], _no_noise).verdict == "pass"


def test_a_bug_shared_by_several_configurations_is_still_caught() -> None:
    x = RNG.normal(size=(32,)).astype(np.float32)
    ref = np.tanh(x.astype(np.float64))
    wrong = np.tanh(x).astype(ml_dtypes.bfloat16).astype(np.float32)
    results = {"default": [wrong], "O0": [wrong], "eager": [np.tanh(x)]}
    assert judge("default", results, [ref], [OutputInfo("f32")], _no_noise).verdict == "mismatch"


def test_the_noise_model_excuses_ill_conditioned_outputs() -> None:
    x = np.float32([1.0, 1e-7, -1.0])
    ref = np.array([x.astype(np.float64).sum()])  # cancels to ~1e-7
    a = np.array([np.float32(1e-7)])
    b = np.array([np.float32(1.1920929e-07)])  # another legal order
    results = {"default": [b], "O0": [a]}
    noisy = [[np.array([1.0e-07])], [np.array([1.1920929e-07])]]  # the antithetic sample flips
    assert judge("default", results, [ref], [OutputInfo("f32")], lambda: noisy).verdict == "pass"
    assert judge("default", results, [ref], [OutputInfo("f32")], lambda: noisy[:1]).verdict == "mismatch"
    assert judge("default", results, [ref], [OutputInfo("f32")], _no_noise).verdict == "mismatch"


def test_nan_where_reference_and_another_configuration_are_finite() -> None:
    ref = np.array([1.0, 2.0, 3.0])
    good = np.float32([1.0, 2.0, 3.0])
    bad = np.float32([1.0, np.nan, 3.0])
    results = {"default": [bad], "O0": [good]}
    j = judge("default", results, [ref], [OutputInfo("f32")], _no_noise)
    assert j.verdict == "nan_mismatch"
    assert j.evidence["where"] == [1] and j.evidence["actual_class"] == "nan"


def test_overflow_shared_by_every_configuration_is_legal() -> None:
    ref = np.array([1e5, 1.0])  # above f16's max: every f16 configuration gives inf
    inf = np.float16([np.inf, 1.0])
    results = {"default": [inf], "O0": [inf]}
    assert judge("default", results, [ref], [OutputInfo("f16")], _no_noise).verdict == "pass"


def test_nan_against_an_infinite_reference_is_legal() -> None:
    """inf - inf after an intermediate overflow: NaN or -inf depending on FMA and order."""
    ref = np.array([-np.inf, 2.0])
    results = {"O0": [np.float32([np.nan, 2.0])], "default": [np.float32([-np.inf, 2.0])]}
    assert judge("O0", results, [ref], [OutputInfo("f32")], _no_noise).verdict == "pass"


def test_lost_nan_propagation_is_flagged() -> None:
    ref = np.array([np.nan, 1.0])
    results = {"default": [np.float32([5.0, 1.0])], "O0": [np.float32([np.nan, 1.0])]}
    j = judge("default", results, [ref], [OutputInfo("f32")], _no_noise)
    assert j.verdict == "nan_mismatch" and j.evidence["expected_class"] == "nan"


def test_integers_are_exact_unless_they_depend_on_floats() -> None:
    ref = np.int32([1, 2, 3])
    off = np.int32([1, 2, 4])
    pure = judge("default", {"default": [off], "O0": [ref]}, [ref], [OutputInfo("s32", tainted=False)],
                 _no_noise)
    assert pure.verdict == "mismatch"
    # A float-dependent integer (floor of a sum) may flip legally: the noise model flips too.
    flipped = judge("default", {"default": [off], "O0": [ref]}, [ref], [OutputInfo("s32", tainted=True)],
                    lambda: [[ref], [off]])
    assert flipped.verdict == "pass"
    # ... but not when every other configuration and the noise model agree with the reference.
    stable = judge("default", {"default": [off], "O0": [ref]}, [ref], [OutputInfo("s32", tainted=True)],
                   lambda: [[ref], [ref]])
    assert stable.verdict == "mismatch"


def test_ulp_distance_counts_representable_steps() -> None:
    a = np.float32([1.0])
    b = np.nextafter(np.nextafter(a, np.float32(2)), np.float32(2))
    assert oracle.ulp_distance(a, b, "f32") == 2
    assert oracle.ulp_distance(np.float32([-0.0]), np.float32([0.0]), "f32") == 0


def test_references_that_disagree_mark_the_program_unjudgeable() -> None:
    infos = [OutputInfo("f32")]
    assert oracle.references_agree([np.array([1.0])], [np.array([1.0 + 1e-12])], infos)
    assert not oracle.references_agree([np.array([1.0])], [np.array([1.1])], infos)


def test_the_literal_per_op_result_is_legal_even_when_excess_precision_is_closer() -> None:
    """f16 rounded op by op lands on a tie that a later rounding breaks upwards; a target
    that keeps excess precision lands next to float64. The literal result is still legal;
    one that agrees with neither is not."""
    ref = np.array([0.5546])
    literal = np.float16([0.6353])
    excess = np.float16([0.5547])
    results = {"default": [literal], "no_fusion_emitters": [excess], "eager": [literal]}
    info = [OutputInfo("f16")]
    assert judge("default", results, [ref], info, _no_noise).verdict == "pass"
    wrong = {**results, "default": [np.float16([0.7])]}
    assert judge("default", wrong, [ref], info, _no_noise).verdict == "mismatch"


def test_normwise_error_of_huge_float64_values_is_finite() -> None:
    # Squares of values beyond 1e154 overflow: the error was inf / inf = NaN, and NaN is
    # over no threshold, so a wrong f64 output of that size always passed.
    ref = np.array([3e200, -1e250, 5e180])
    assert oracle.normwise_error(ref * (1 + 1e-10), ref, "f64") == pytest.approx(1e-10, rel=1e-3)
    assert oracle.normwise_error(ref, ref, "f64") == 0.0
    wrong = ref.copy()
    wrong[1] = 1e249
    assert oracle.normwise_error(wrong, ref, "f64") == pytest.approx(1.1, rel=1e-3)
    assert oracle.normwise_error(np.array([1e300, 0.0]), np.zeros(2), "f64") == float("inf")
    judged = oracle.judge("default", {"default": [wrong], "other": [ref]}, [ref],
                          [oracle.OutputInfo("f64")], lambda: None)
    assert judged.verdict == "mismatch"
