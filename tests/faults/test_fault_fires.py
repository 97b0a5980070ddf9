"""Each fault fires on a program built for its pattern, and the corruption it causes is
the one its docstring describes (checked against numpy, not just "the output changed")."""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from fault_harness import run, run_with_fault
from jax import lax

_rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _fresh_inputs() -> None:
    """Each test draws the same inputs whatever ran before it in this process (xdist
    spreads tests differently from run to run)."""
    global _rng
    _rng = np.random.default_rng(11)


def _f32(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return _rng.uniform(low, high, shape).astype(np.float32)


def _bf16_round(x: np.ndarray) -> np.ndarray:
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def test_fusion_bf16_rounding_rounds_the_fused_exponential_through_bf16() -> None:
    x = _f32(5, 7)

    def f(v):
        return jnp.exp(v) * 2.0 + 1.0

    exact = np.exp(x.astype(np.float64)) * 2 + 1
    (clean,) = run(f, x)
    (faulty,) = run_with_fault("fusion_bf16_rounding", f, x)

    assert np.max(np.abs(clean - exact) / exact) < 1e-6
    assert np.max(np.abs(faulty - exact) / exact) > 1e-4
    np.testing.assert_allclose(faulty, _bf16_round(np.exp(x)) * 2 + 1, rtol=1e-6)


def test_select_ge_to_gt_changes_only_the_ties() -> None:
    x = _f32(6, 6)
    y = np.where(_rng.random((6, 6)) < 0.5, x, _f32(6, 6))

    def f(a, b):
        return jnp.where(a >= b, a * 2.0, b * 3.0)

    (clean,) = run(f, x, y)
    (faulty,) = run_with_fault("select_ge_to_gt", f, x, y)

    np.testing.assert_array_equal(clean, np.where(x >= y, x * 2, y * 3))
    np.testing.assert_array_equal(faulty, np.where(x > y, x * 2, y * 3))
    assert (clean != faulty).any()


def test_select_ge_to_gt_hits_integer_ties_too() -> None:
    k = _rng.integers(-3, 3, 40).astype(np.int32)
    m = _rng.integers(-3, 3, 40).astype(np.int32)

    def f(a, b):
        return jnp.where(a <= b, a, b * 10)

    (clean,) = run(f, k, m)
    (faulty,) = run_with_fault("select_ge_to_gt", f, k, m)

    np.testing.assert_array_equal(clean, np.where(k <= m, k, m * 10))
    np.testing.assert_array_equal(faulty, np.where(k < m, k, m * 10))
    assert (k == m).any() and (clean != faulty).any()


def test_shift_right_logical_loses_the_sign_of_negative_values() -> None:
    k = np.arange(-8, 8, dtype=np.int32)

    def f(v):
        return lax.shift_right_arithmetic(v, np.int32(2))

    (clean,) = run(f, k)
    (faulty,) = run_with_fault("shift_right_logical", f, k)

    np.testing.assert_array_equal(clean, k >> 2)
    np.testing.assert_array_equal(faulty, (k.view(np.uint32) >> 2).view(np.int32))
    np.testing.assert_array_equal(clean[k >= 0], faulty[k >= 0])


def test_reduce_max_init_zero_clips_all_negative_rows_at_zero() -> None:
    x = _f32(6, 5)
    x[::2] = -np.abs(x[::2]) - 0.1  # every other row is all negative

    def f(v):
        return jnp.max(v, axis=1)

    (clean,) = run(f, x)
    (faulty,) = run_with_fault("reduce_max_init_zero", f, x)

    np.testing.assert_array_equal(clean, x.max(axis=1))
    np.testing.assert_array_equal(faulty, np.maximum(x.max(axis=1), 0))
    assert (faulty[::2] == 0).all()


def test_reduce_max_init_zero_also_hits_an_init_constant_inside_the_fusion() -> None:
    x = _f32(5, 7, low=-3.0, high=-0.1)  # sin is negative everywhere here

    def f(v):
        return jnp.max(jnp.sin(v))

    (clean,) = run(f, x)
    (faulty,) = run_with_fault("reduce_max_init_zero", f, x)

    np.testing.assert_allclose(clean, np.sin(x.astype(np.float64)).max(), rtol=1e-6)
    assert clean < 0 and faulty == 0


def test_dynamic_slice_wraps_an_out_of_range_start_instead_of_clamping() -> None:
    x = np.arange(30, dtype=np.float32).reshape(10, 3)

    def f(v, i):
        return lax.dynamic_slice(v, (i, np.int32(0)), (3, 3))

    (clean,) = run(f, x, np.int32(9))
    (faulty,) = run_with_fault("dynamic_slice_wraps", f, x, np.int32(9))
    (in_range,) = run_with_fault("dynamic_slice_wraps", f, x, np.int32(4))

    np.testing.assert_array_equal(clean, x[7:10])  # XLA clamps the start to 10 - 3
    np.testing.assert_array_equal(faulty, x[1:4])  # 9 wraps modulo the 8 valid starts
    np.testing.assert_array_equal(in_range, x[4:7])


def test_dus_copy_elided_lets_a_later_reader_see_the_update() -> None:
    x = _f32(6, 3)
    v = _f32(2, 3)

    def f(a, b, i):
        return lax.dynamic_update_slice(a, b, (i, np.int32(0))), a + 1.0

    updated = x.copy()
    updated[1:3] = v
    clean = run(f, x, v, np.int32(1))
    faulty = run_with_fault("dus_copy_elided", f, x, v, np.int32(1))

    np.testing.assert_array_equal(clean[0], updated)
    np.testing.assert_array_equal(clean[1], x + 1)
    np.testing.assert_array_equal(faulty[0], updated)
    np.testing.assert_array_equal(faulty[1], updated + 1)


def test_fused_transpose_as_copy_leaves_a_square_operand_untransposed() -> None:
    x, y = _f32(8, 8), _f32(8, 8)

    def f(a, b):
        return a.T * 2.0 + b

    (clean,) = run(f, x, y)
    (faulty,) = run_with_fault("fused_transpose_as_copy", f, x, y)

    np.testing.assert_array_equal(clean, x.T * 2 + y)
    np.testing.assert_array_equal(faulty, x * 2 + y)


def test_nan_dropping_max_returns_the_second_operand_when_the_first_is_nan() -> None:
    x, y = _f32(4, 5), _f32(4, 5)
    x[0, :2] = np.nan
    y[1, :2] = np.nan

    def f(a, b):
        return jnp.maximum(a, b), jnp.minimum(a, b)

    clean = run(f, x, y)
    faulty = run_with_fault("nan_dropping_max", f, x, y)

    first_nan = np.isnan(x)
    assert np.isnan(clean[0][first_nan]).all() and np.isnan(clean[1][first_nan]).all()
    np.testing.assert_array_equal(faulty[0][first_nan], y[first_nan])
    np.testing.assert_array_equal(faulty[1][first_nan], y[first_nan])
    assert np.isnan(faulty[0][np.isnan(y)]).all()  # a NaN second operand still wins
    np.testing.assert_array_equal(faulty[0][~first_nan], clean[0][~first_nan])


def test_bf16_convert_truncates_rounds_toward_zero() -> None:
    x = _f32(64)

    def f(a):
        return a.astype(jnp.bfloat16)

    (clean,) = run(f, x)
    (faulty,) = run_with_fault("bf16_convert_truncates", f, x)

    truncated = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    np.testing.assert_array_equal(clean.astype(np.float32), _bf16_round(x))
    np.testing.assert_array_equal(faulty.astype(np.float32), truncated)
    assert (clean != faulty).sum() > 10


def test_concat_off_by_one_repeats_the_boundary_element() -> None:
    x, y = _f32(3, 4), _f32(3, 5)

    def f(a, b):
        return jnp.concatenate([a, b], axis=1) + 1.0

    (clean,) = run(f, x, y)
    (faulty,) = run_with_fault("concat_off_by_one", f, x, y)

    np.testing.assert_array_equal(clean, np.concatenate([x, y], axis=1) + 1)
    np.testing.assert_array_equal(faulty, np.concatenate([x, x[:, -1:], y[:, 1:]], axis=1) + 1)


def test_odd_tail_multiply_skips_the_last_element_of_odd_rows() -> None:
    x, y = _f32(4, 7), _f32(4, 7)

    def f(a, b):
        return a * b + 1.0

    (clean,) = run(f, x, y)
    (faulty,) = run_with_fault("odd_tail_multiply", f, x, y)

    # XLA may contract a * b + 1 into an FMA (not once the select splits them), so the
    # correct elements are close to numpy, not bitwise equal.
    np.testing.assert_allclose(clean, x * y + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(faulty[:, :-1], (x * y + 1)[:, :-1], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(faulty[:, -1], x[:, -1] + 1)


def test_loop_state_bf16_rounds_the_carried_value_only_inside_the_loop() -> None:
    x = _f32(4, 4)

    def f(a):
        looped = lax.fori_loop(0, 3, lambda i, c: c * 1.1 + 0.3, a)
        return looped, a * 1.1 + 0.3

    exact = x.astype(np.float64)
    for _ in range(3):
        exact = exact * 1.1 + 0.3
    clean = run(f, x)
    faulty = run_with_fault("loop_state_bf16", f, x)

    np.testing.assert_allclose(clean[0], exact, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_bf16_round(faulty[0]), faulty[0])  # stored as bf16
    # Three bf16 roundings of the carried value: normwise, not elementwise, since an
    # element near zero has an unbounded relative error.
    assert 1e-4 < np.max(np.abs(faulty[0] - exact)) / np.max(np.abs(exact)) < 3 * 2.0**-8
    np.testing.assert_array_equal(faulty[1], clean[1])  # straight-line code is untouched


def test_loop_state_bf16_rounds_a_conditional_branch_result() -> None:
    x = _f32(3, 5)

    def f(p, a):
        return lax.cond(p > 0, lambda v: v * 0.7, lambda v: v - 1.0, a)

    (clean,) = run(f, np.int32(1), x)
    (faulty,) = run_with_fault("loop_state_bf16", f, np.int32(1), x)

    np.testing.assert_array_equal(clean, x * np.float32(0.7))
    np.testing.assert_array_equal(faulty, _bf16_round(clean))


def test_signed_compare_unsigned_orders_negatives_above_positives() -> None:
    k = np.array([-5, -1, 0, 3, 7, -9], dtype=np.int32)
    m = np.array([2, -3, -1, 4, -7, -2], dtype=np.int32)

    def f(a, b):
        return a < b

    (clean,) = run(f, k, m)
    (faulty,) = run_with_fault("signed_compare_unsigned", f, k, m)

    np.testing.assert_array_equal(clean, k < m)
    np.testing.assert_array_equal(faulty, k.view(np.uint32) < m.view(np.uint32))
    same_sign = (k < 0) == (m < 0)
    np.testing.assert_array_equal(faulty[same_sign], clean[same_sign])
    assert (faulty != clean).any()


def test_variance_one_pass_breaks_layer_norm_rows_whose_mean_dwarfs_their_spread() -> None:
    def layer_norm(v):
        mean = jnp.mean(v, axis=-1, keepdims=True)
        var = jnp.mean((v - mean) ** 2, axis=-1, keepdims=True)
        return (v - mean) * lax.rsqrt(var + 1e-5)

    x = _f32(6, 32)
    x[3:] += 3000.0  # sum(x^2) ~ 3e8 in f32 leaves nothing of a variance of about 1.3

    (clean,) = run(layer_norm, x)
    (faulty,) = run_with_fault("variance_one_pass", layer_norm, x)

    square = (clean.astype(np.float64) ** 2).mean(-1)
    np.testing.assert_allclose(square, 1.0, atol=1e-4)  # two passes: normalized everywhere
    # Rows centred on 0: the one-pass formula is right to rounding there.
    np.testing.assert_allclose(faulty[:3], clean[:3], rtol=1e-4, atol=1e-5)
    # Rows centred on 3000: the variance lost its digits (NaN where it went negative).
    with np.errstate(invalid="ignore"):
        broken = ~np.isfinite(faulty[3:]).all(-1) | (np.abs((faulty[3:] ** 2).mean(-1) - 1.0) > 0.1)
    assert broken.all(), (faulty[3:] ** 2).mean(-1)
    # Only the variance changed: a finite faulty row is the right row times one scale.
    for row in range(3, 6):
        if np.isfinite(faulty[row]).all():
            scale = faulty[row] / clean[row]
            np.testing.assert_allclose(scale, scale[0], rtol=1e-3)
