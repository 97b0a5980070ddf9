"""The oracle as a chain of named per-output rules (oracle.RULES): each rule answers for
the outputs it owns and None for the others, the first answer decides an output, and the
noise model behind them is drawn once."""

from __future__ import annotations

import numpy as np
import pytest
from xla_sentinel.core.model import Verdict
from xla_sentinel.judge import oracle
from xla_sentinel.judge.noise import NoiseDraw, NoiseModel, Samples
from xla_sentinel.judge.oracle import OutputInfo

RNG = np.random.default_rng(3)
X = RNG.normal(size=(16, 8))
REF = np.exp(X)
GOOD = REF.astype(np.float32)
OFF = (REF * (1 + 1e-4)).astype(np.float32)  # about 1,700 ulps: wrong normwise
INDICES = np.arange(12, dtype=np.int32)
FLOAT_RULES = (oracle.nan_pattern, oracle.as_written, oracle.normwise, oracle.componentwise)


def _output(actual: np.ndarray, expected: np.ndarray, info: OutputInfo | None = None,
            noise: Samples | None = None, **others: np.ndarray) -> oracle.Output:
    """Output 0 of a one-output case judging `target`, beside the configurations `others`."""
    results = {"target": [actual], **{name: [v] for name, v in others.items()}}
    case = oracle.Case("target", results, [expected], [info or OutputInfo("f32")], NoiseModel.of(lambda: noise))
    return oracle.Output(case, 0)


def _never(out: oracle.Output) -> oracle.Judgement | None:
    raise AssertionError("a rule after the one that decided the output was asked")


def test_the_rules_are_asked_in_this_order() -> None:
    assert oracle.RULES == (oracle.shape, oracle.bitwise, oracle.integer, oracle.nan_pattern,
                            oracle.as_written, oracle.normwise, oracle.componentwise)


@pytest.mark.parametrize("rule", oracle.RULES, ids=lambda r: r.__name__)
def test_no_rule_answers_for_a_right_float_output(rule: oracle.Rule) -> None:
    assert rule(_output(GOOD, REF, O0=GOOD)) is None


@pytest.mark.parametrize("rule", FLOAT_RULES, ids=lambda r: r.__name__)
def test_the_float_rules_pass_over_a_wrong_integer_output(rule: oracle.Rule) -> None:
    wrong = INDICES[::-1].copy()
    assert rule(_output(wrong, INDICES, OutputInfo("s32", tainted=False), O0=INDICES)) is None


def test_shape_owns_another_shape_only() -> None:
    j = oracle.shape(_output(GOOD[:4], REF, O0=GOOD))
    assert j is not None and j.verdict is Verdict.MISMATCH
    assert j.evidence == {"reason": "shape", "actual_shape": [4, 8], "expected_shape": [16, 8]}


def test_bitwise_owns_only_outputs_fixed_bitwise() -> None:
    one_ulp = np.nextafter(GOOD, np.float32(np.inf))
    assert oracle.bitwise(_output(one_ulp, REF, OutputInfo("f32"), eager=GOOD)) is None
    j = oracle.bitwise(_output(one_ulp, REF, OutputInfo("f32", bitwise=True), eager=GOOD))
    assert j is not None and j.verdict is Verdict.MISMATCH and j.evidence["against"] == "eager"


def test_integer_passes_a_right_integer_output_without_asking_the_later_rules() -> None:
    out = _output(INDICES, INDICES, OutputInfo("s32", tainted=False), O0=INDICES)
    j = oracle.decide(out, (oracle.integer, _never))
    assert j.verdict is Verdict.PASS and j.output == 0
    assert oracle.integer(_output(GOOD, REF, O0=GOOD)) is None  # a float output is not its


def test_nan_pattern_owns_a_nan_another_configuration_does_not_show() -> None:
    dropped = GOOD.copy()
    dropped[2, 3] = np.nan
    j = oracle.nan_pattern(_output(dropped, REF, O0=GOOD))
    assert j is not None and j.verdict is Verdict.NAN_MISMATCH and j.evidence["where"] == [2, 3]
    assert oracle.normwise(_output(dropped, REF, O0=GOOD)) is None  # NaN is outside its norm


def test_as_written_passes_what_the_literal_evaluation_says_before_normwise_flags_it() -> None:
    out = _output(OFF, REF, eager=OFF, O0=GOOD)
    flagged = oracle.normwise(out)
    assert flagged is not None and flagged.verdict is Verdict.MISMATCH
    assert oracle.decide(out, (oracle.as_written, _never)).verdict is Verdict.PASS
    assert oracle.decide(out).verdict is Verdict.PASS
    assert oracle.as_written(_output(OFF, REF, O0=GOOD)) is None  # no literal evaluation


def test_componentwise_owns_one_wrong_element_that_passes_normwise() -> None:
    big = RNG.normal(size=(256, 128))
    big[7, 9] = 2.0
    one_wrong = big.astype(np.float32)
    one_wrong[7, 9] *= np.float32(1 + 5e-3)  # 6e-5 normwise, under k * 3e-6
    spread = (big * (1 + 3e-6 * np.sign(RNG.normal(size=big.shape)))).astype(np.float32)
    out = _output(one_wrong, big, O0=spread)
    assert oracle.normwise(out) is None
    j = oracle.componentwise(out)
    assert j is not None and j.evidence["reason"] == "componentwise"
    assert j.evidence["wrong"][0]["index"] == [7, 9]


def test_componentwise_leaves_a_subnormal_against_zero_to_xla() -> None:
    # Clean run s41-i2626: min(x, x) of f32 subnormals (bit cast from s32) kept them on every
    # target; float64 and the op-by-op evaluation flushed them to 0. Flushing is legal either
    # way (the bitwise rule reads it so), so no element is wrong; a normal value still is.
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    kept = np.float32([16, 0, 6, 10, 0, 1]) * tiny
    zeros = np.zeros(6)
    assert oracle.componentwise(_output(kept, zeros, O0=kept, eager=np.zeros(6, np.float32))) is None
    wrong = kept.copy()
    wrong[1] = np.float32(1e-30)
    j = oracle.componentwise(_output(wrong, zeros, O0=kept, eager=np.zeros(6, np.float32)))
    assert j is not None and [w["index"] for w in j.evidence["wrong"]] == [[1]]


def test_a_rule_added_to_the_chain_is_asked_after_the_others() -> None:
    def negative(out: oracle.Output) -> oracle.Judgement | None:
        return oracle.Judgement(Verdict.MISMATCH, out.index, {"reason": "negative"}) \
            if np.any(np.asarray(out.actual) < 0) else None

    case = _output(-GOOD, -REF, O0=-GOOD).case
    assert oracle.judge_case(case).verdict is Verdict.PASS
    j = oracle.judge_case(case, (*oracle.RULES, negative))
    assert j.verdict is Verdict.MISMATCH and j.evidence == {"reason": "negative"}


def test_judge_is_judge_case_over_its_parameters() -> None:
    results = {"default": [OFF], "O0": [GOOD]}
    by_parameters = oracle.judge("default", results, [REF], [OutputInfo("f32")], lambda: None)
    by_case = oracle.judge_case(oracle.Case("default", results, [REF], [OutputInfo("f32")],
                                            NoiseModel.of(lambda: None)))
    assert by_parameters.verdict is by_case.verdict is Verdict.MISMATCH
    assert by_parameters.evidence == by_case.evidence


def test_the_noise_model_is_drawn_once_for_every_output_and_view() -> None:
    draws: list[int] = []

    def draw() -> NoiseDraw:
        draws.append(1)
        return NoiseDraw([[GOOD, GOOD]], [False, False])

    noise = NoiseModel(draw)
    undetermined = [np.zeros(GOOD.shape, bool), np.ones(GOOD.shape, bool)]
    case = oracle.Case("default", {"default": [OFF, OFF], "O0": [GOOD, GOOD]}, [REF, REF],
                       [OutputInfo("f32"), OutputInfo("f32")], noise, undetermined=undetermined)
    assert oracle.judge_case(case).verdict is Verdict.MISMATCH  # past k*u: the samples are asked
    assert oracle.judge_case(case).output == 0
    settled = case.settled().noise.samples()
    assert settled is not None and np.isnan(settled[0][1]).all()  # the view blanks output 1
    assert noise.overflow() == [False, False]
    assert len(draws) == 1


def test_a_pass_carries_the_largest_margin_among_the_float_outputs() -> None:
    half_ulp_off = (GOOD.astype(np.float64) * (1 + 2.0**-25)).astype(np.float32)
    case = oracle.Case("default", {"default": [GOOD, INDICES], "O0": [half_ulp_off, INDICES]},
                       [REF, INDICES], [OutputInfo("f32"), OutputInfo("s32", tainted=False)],
                       NoiseModel.of(lambda: None))
    j = oracle.judge_case(case)
    out = oracle.Output(case, 0)
    assert j.verdict is Verdict.PASS and j.output is None
    assert j.evidence == {"margin": out.error / out.threshold} and 0 < j.evidence["margin"] < 1
