"""How numpy's float64 answer and an XLA float64 reference's are compared, and when."""

from __future__ import annotations

import numpy as np
from xla_sentinel.assess import cross_check_reason, reference_disagreement
from xla_sentinel.oracle import OutputInfo

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
    assert reference_disagreement([a], [b], [OutputInfo("s32", True)]) == (None, True)
    x = np.array([1.0, -1.0, 1e-3])
    assert reference_disagreement([x], [x * (1 + 1e-5)], [F32]) == (None, True)
    # Within the agreement of two correct float64 evaluations: no difference at all.
    assert reference_disagreement([x], [x * (1 + 1e-12)], [F32]) == (None, False)


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
    assert reference_disagreement([x], [y], [F32], spread=lambda i: 2e-4) == (None, True)
    assert reference_disagreement([x], [y], [F32], spread=lambda i: None) == (None, True)


def test_a_float_output_of_a_bug_the_xla_reference_shares_is_judged(tmp_path) -> None:
    """s24-i282 of the seed-24 clean run (f16): min(logistic(dynamic_slice(dynamic_slice
    (x)))); every compiled configuration, f64_jit too, loses the inner slice's clamp
    (bench/repros/dynamic_slice_of_dynamic_slice.py). f64_jit is 0.073 normwise off numpy
    on a float output, the noise model's samples 0.0015: it was read as ill-conditioning
    and the program went undecided; now the targets are judged (and found wrong)."""
    from pathlib import Path

    from xla_sentinel.check import check_program

    campaign = tmp_path / "campaign.yaml"
    campaign.write_text("seed: 24\ntargets: [default, O0]\nbisect: {enabled: false}\n")
    verdicts = check_program(Path(__file__).parent / "data" / "s24-i282", campaign, ())
    assert [(v["target"], v["status"], v["verdict"]) for v in verdicts] == [
        ("default", "judged", "mismatch"), ("O0", "judged", "mismatch")]
