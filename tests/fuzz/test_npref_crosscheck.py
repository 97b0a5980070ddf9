"""How numpy's float64 answer and an XLA float64 reference's are compared, and when."""

from __future__ import annotations

import numpy as np
from xla_sentinel.judge.assess import cross_check_reason, reference_disagreement
from xla_sentinel.judge.oracle import OutputInfo

F32 = OutputInfo("f32", True)


def test_a_dropped_nan_is_a_nan_mismatch_of_the_reference() -> None:
    numpy_out = [np.array(np.nan)]  # a 0-d output: a full reduction
    verdict, ill = reference_disagreement(numpy_out, [np.array(1.0)], [F32])
    assert verdict is not None and not ill
    name, output, ev = verdict
    assert (name, output, ev["reason"], ev["where"]) == ("nan_mismatch", 0, "reference", [])
    assert np.isnan(ev["expected"]) and ev["actual"] == 1.0


def test_an_untainted_integer_that_differs_is_a_mismatch() -> None:
    a, b = np.array([[1, 2], [3, 4]], np.int32), np.array([[1, 2], [3, 5]], np.int32)
    verdict, _ = reference_disagreement([a], [b], [OutputInfo("s32", False)])
    assert verdict is not None
    assert verdict[0] == "mismatch" and verdict[2]["where"] == [1, 1] and verdict[2]["actual"] == 5


def test_a_float_dependent_integer_or_a_normwise_difference_is_ill_conditioning() -> None:
    a, b = np.array([1, 2], np.int32), np.array([1, 3], np.int32)
    assert reference_disagreement([a], [b], [OutputInfo("s32", True)]) == (None, {0})
    x = np.array([1.0, -1.0, 1e-3])
    assert reference_disagreement([x], [x * (1 + 1e-5)], [F32]) == (None, {0})
    # Within the agreement of two correct float64 evaluations: no difference at all.
    assert reference_disagreement([x], [x * (1 + 1e-12)], [F32]) == (None, set())
    # Per output: the ill-conditioned one is named, the one that agrees is not.
    assert reference_disagreement([x, x], [x, x * (1 + 1e-5)], [F32, F32]) == (None, {1})


def test_a_suspect_or_a_fallback_is_always_cross_checked_and_a_sample_by_program_id() -> None:
    assert cross_check_reason("s1-i1", 1, {}, 0) == "suspect"
    assert cross_check_reason("s1-i1", 0, {"stablehlo.fft": 1}, 0) == "fallback"
    assert cross_check_reason("s1-i1", 0, {}, 0) == ""
    sampled = [i for i in range(2000) if cross_check_reason(f"s1-i{i}", 0, {}, 20) == "sample"]
    assert 60 <= len(sampled) <= 140  # about 1 in 20
    assert sampled == [i for i in range(2000) if cross_check_reason(f"s1-i{i}", 0, {}, 20)]


def test_a_difference_far_beyond_the_noise_models_spread_is_the_references_mismatch() -> None:
    x = np.array([1.0, -1.0, 1e-3])
    y = x * (1 + 1e-3)
    # The samples move the output by 1e-5 normwise: 1e-3 is no rounding the program amplifies.
    verdict, ill = reference_disagreement([x], [y], [F32], spread=lambda i: 1e-5)
    assert verdict is not None and not ill
    name, output, ev = verdict
    assert (name, output, ev["reason"]) == ("mismatch", 0, "reference")
    assert ev["noise_spread"] == 1e-5 and 0.9e-3 < ev["normwise_error"] < 1.1e-3
    # Within BEYOND_NOISE times the spread, or with no noise model: ill-conditioning.
    assert reference_disagreement([x], [y], [F32], spread=lambda i: 2e-4) == (None, {0})
    assert reference_disagreement([x], [y], [F32], spread=lambda i: None) == (None, {0})


def test_a_float_output_of_a_bug_the_xla_reference_shares_is_judged(tmp_path) -> None:
    """s24-i282 of the seed-24 clean run (f16): min(logistic(dynamic_slice(dynamic_slice
    (x)))); every compiled configuration, f64_jit too, loses the inner slice's clamp
    (bench/repros/dynamic_slice_of_dynamic_slice.py). f64_jit is 0.073 normwise off numpy
    on a float output, the noise model's samples 0.0015: it was read as ill-conditioning
    and the program went undecided; now the targets are judged (and found wrong)."""
    from pathlib import Path

    from xla_sentinel.campaign.check import check_program

    campaign = tmp_path / "campaign.yaml"
    campaign.write_text("seed: 24\ntargets: [default, O0]\nbisect: {enabled: false}\n")
    verdicts = check_program(Path(__file__).parent / "data" / "s24-i282", campaign, ())
    assert [(v["target"], v["status"], v["verdict"]) for v in verdicts] == [
        ("default", "judged", "mismatch"), ("O0", "judged", "mismatch")]


def test_an_output_the_references_disagree_on_leaves_the_other_outputs_judged(tmp_path) -> None:
    """s31-i1892 of the devices-4 clean run: f64_eager reads an f32 subnormal input as zero
    (XLA's convert), numpy keeps it, so sign(x) differs: that output has no truth. The
    program went undecided as a whole, and another output's real bug with it. Here the
    other output is the shift-then-reshape bug (bench/repros/shift_set_then_reshape.py):
    it is judged and found wrong, the sign output is judged in no target."""
    from xla_sentinel.campaign.check import check_program
    from xla_sentinel.core.graph import Graph, Node, Value
    from xla_sentinel.core.program import Program
    from xla_sentinel.programs import evaluate

    def value(shape: list[int], dtype: str, tainted: bool = True, **source: int) -> Value:
        return Value(shape, dtype, tainted, **source)

    graph = Graph(values=[value([4], "f32", False, input=0), value([7], "s32", False, input=1),
                          value([4], "f32", node=0), value([7], "s32", False, node=1),
                          value([7, 1], "s32", False, node=2)],
                  nodes=[Node("sign", [0], {}, True),
                         Node("loop_shift", [1],
                              {"loop": "scan", "body": "neg", "trips": 1, "step": 2, "offset": 0, "axis": 0}),
                         Node("expand_dims", [3], {"dims": [1]})],
                  outputs=[2, 4])
    x = np.array([1e-39, -2e-39, 1.0, 3e-40], np.float32)
    a = np.array([12, -7, -3, -3, 12, 13, 0], np.int32)
    Program("two-outputs", evaluate.lower_text(graph), [x, a], ["f32", "s32"],
            graph=graph).save(tmp_path / "program")
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text("targets: [default, O0]\nbisect: {enabled: false}\n")
    verdicts = check_program(tmp_path / "program", campaign, ())
    assert [(v["target"], v["status"], v["verdict"], v["evidence"].get("reason")) for v in verdicts] == [
        ("default", "judged", "mismatch", "integer"), ("O0", "judged", "mismatch", "integer")]


def test_another_inf_pattern_is_ill_conditioning_only_where_overflow_is_legal() -> None:
    # s41-i31: an f64 conv whose terms add up beyond float64's range, NaN in numpy's order
    # and -inf in f64_eager's; on an output that cannot overflow it stays a finding.
    numpy_out, xla_out = [np.array([np.nan, 1.0])], [np.array([-np.inf, 1.0])]
    infos = [OutputInfo("f64", True)]
    assert reference_disagreement(numpy_out, xla_out, infos, overflow=lambda: [True]) == (None, {0})
    verdict, _ = reference_disagreement(numpy_out, xla_out, infos, overflow=lambda: [False])
    assert verdict is not None and verdict[0] == "nan_mismatch"
