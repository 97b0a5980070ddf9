"""The numpy StableHLO evaluator: whole programs agree with the float64 eager reference,
lax's semantics at their edges match XLA's, a missing numpy form falls back to XLA and is
counted, and a NaN that XLA:CPU drops in every configuration is kept."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from xla_sentinel.core.dtypes import FLOATS
from xla_sentinel.ops.numpy_forms import np_is_float
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import generate
from xla_sentinel.programs.inputs import make_inputs
from xla_sentinel.references import npref
from xla_sentinel.spec.campaign import GeneratorSpec, build
from xla_sentinel.spec.options import REFERENCE_OPTIONS
from xla_sentinel.worker.handlers import xla_fallback
from xla_sentinel.xla.compiler import run_module

pytestmark = pytest.mark.usefixtures("x64")

SPEC = {"version": 1, "minOps": 2, "maxOps": 16, "dtypes": ["f32", "bf16", "f16", "f64", "s32", "s8", "u8", "u32", "bool"]}
# Float64 against float64: transcendental functions and summation order, a few ulps of
# the largest term; far below any dtype under test.
PROGRAM_ERROR = 1e-9


def _promote_inputs(inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [x.astype(np.float64) if np_is_float(x) else x for x in inputs]


@pytest.mark.parametrize("special", [False, True])
def test_generated_programs_agree_with_f64_eager(special: bool) -> None:
    spec = build(GeneratorSpec, SPEC, "spec.generator")
    for index in range(20):
        graph = generate(1, index, spec)
        inputs = make_inputs({"seed": 1, "index": index, "special": special}, graph.inputs)
        want = evaluate.eager(graph, inputs, promote=True)
        prone = evaluate.overflow_prone(graph, inputs)
        got = npref.evaluate_module(evaluate.lower_f64_text(graph), _promote_inputs(inputs))
        assert not got.fallbacks, f"program {index}: {dict(got.fallbacks)}"
        for k, (a, b) in enumerate(zip(got.outputs, want, strict=True)):
            what = f"program {index} output {k} ({graph.op_names()})"
            assert a.shape == b.shape and a.dtype == b.dtype, what
            if b.dtype.kind != "f":
                np.testing.assert_array_equal(a, b, err_msg=what)
            elif not prone[k]:  # beyond the range, inf or NaN depends on the order of a sum
                np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=what)
                finite = np.isfinite(b)
                err = np.abs(a[finite] - b[finite]) / np.maximum(np.abs(b[finite]), 1.0)
                assert np.max(err, initial=0.0) <= PROGRAM_ERROR, what


def test_own_precision_module_is_judged_like_its_float64_promotion() -> None:
    """The module the targets compile (f32/bf16/f16 types) evaluates in float64 too: its
    outputs match the float64 program's to the rounding of its own constants."""
    spec = build(GeneratorSpec, {**SPEC, "dtypes": ["f32", "bf16", "f16"]}, "spec.generator")
    for index in range(10):
        graph = generate(2, index, spec)
        inputs = make_inputs({"seed": 2, "index": index}, graph.inputs)
        own = npref.evaluate_module(evaluate.lower_text(graph), inputs).outputs
        f64 = npref.evaluate_module(evaluate.lower_f64_text(graph), _promote_inputs(inputs)).outputs
        for k, (a, b) in enumerate(zip(own, f64, strict=True)):
            assert a.dtype == b.dtype, f"program {index} output {k}"
            dtype = evaluate.output_dtypes(graph)[k]
            if dtype in FLOATS and np.isfinite(b).all() and np.linalg.norm(b) > 0:
                # A guard constant such as 0.9 is bf16(0.9) in the bf16 module.
                assert np.linalg.norm(a - b) / np.linalg.norm(b) < 0.05, f"program {index} output {k}"


def _edges(x: jax.Array, i: jax.Array, n: jax.Array, f: jax.Array) -> tuple:
    """lax semantics where numpy's differ, one primitive each."""
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    sdn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,))
    return (
        lax.div(i, n), lax.rem(i, n),                                   # by zero, INT_MIN / -1
        lax.shift_left(i, n), lax.shift_right_logical(i, n), lax.shift_right_arithmetic(i, n),
        lax.round(f, lax.RoundingMethod.AWAY_FROM_ZERO), lax.round(f, lax.RoundingMethod.TO_NEAREST_EVEN),
        lax.max(f, f[::-1]), lax.min(f, f[::-1]), lax.eq(f, f), lax.lt(f, f[::-1]), lax.ne(f, f),
        lax.sort(f), lax.reduce_max(f, (0,)), lax.argmax(f, 0, jnp.int32),
        lax.convert_element_type(f, jnp.int32), lax.convert_element_type(f * 1e300, jnp.uint8),
        lax.convert_element_type(f, jnp.bfloat16), lax.reduce_precision(f, 5, 2),
        lax.dynamic_slice(x, (n[0],), (3,)),                          # start clamped
        lax.gather(x, i[:, None], dn, (1,), mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS),
        lax.scatter(x, i[:, None], f[: i.shape[0]], sdn, mode=lax.GatherScatterMode.FILL_OR_DROP),
    )


def test_lax_edge_semantics_match_xla_exactly() -> None:
    x = np.linspace(-3.0, 4.0, 8)
    i = np.array([7, -7, np.iinfo(np.int32).min, 5, 1, -1, 0, 100], np.int32)
    n = np.array([0, 0, -1, 33, 32, -1, 31, 2], np.int32)
    f = np.array([2.5, -2.5, 0.5, -0.0, 0.0, np.nan, np.inf, -1.5], np.float64)
    lowered = jax.jit(_edges).lower(x, i, n, f)
    want = run_module(lowered.as_text(), [x, i, n, f], REFERENCE_OPTIONS).outputs
    got = npref.evaluate_module(lowered.as_text(), [x, i, n, f])
    assert not got.fallbacks
    for k, (a, b) in enumerate(zip(got.outputs, want, strict=True)):
        np.testing.assert_array_equal(a, np.asarray(b).astype(a.dtype), err_msg=f"output {k}")
        assert np.array_equal(np.signbit(a[a == 0]), np.signbit(np.asarray(b, a.dtype)[a == 0])), f"output {k}"


def test_op_without_numpy_form_falls_back_to_xla_and_is_counted() -> None:
    x = np.linspace(-3.0, 3.0, 7)
    text = jax.jit(lambda v: lax.exp(lax.bessel_i1e(v))).lower(x).as_text()
    got = npref.evaluate_module(text, [x], xla_fallback)
    assert dict(got.fallbacks) == {"chlo.bessel_i1e": 1}
    np.testing.assert_allclose(got.outputs[0], np.exp(np.asarray(lax.bessel_i1e(x))), rtol=1e-14)


def test_op_without_numpy_form_and_no_fallback_says_so() -> None:
    # npref compiles nothing itself: without the worker's XLA fallback it names the op.
    x = np.linspace(-3.0, 3.0, 7)
    text = jax.jit(lambda v: lax.exp(lax.bessel_i1e(v))).lower(x).as_text()
    with pytest.raises(npref.Unsupported, match="chlo.bessel_i1e: no numpy form, and no fallback"):
        npref.evaluate_module(text, [x])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_in_a_long_max_reduction_is_kept_where_xla_drops_it(dtype: type) -> None:
    """bench/repros/reduce_max_drops_nan.py: XLA:CPU drops the NaN of a max reduction over
    4096 or more elements in every configuration; the numpy reference keeps it, so it
    disagrees with XLA exactly there, and agrees below that size."""
    for n, xla_drops in ((2048, False), (4096, True)):
        x = np.ones(n, dtype)
        x[n // 2] = np.nan
        text = jax.jit(lambda v: lax.reduce_max(v, (0,))).lower(x).as_text()
        (xla,) = run_module(text, [x], {}).outputs
        (xla_o0,) = run_module(text, [x], REFERENCE_OPTIONS).outputs
        (numpy_ref,) = npref.evaluate_module(text, [x]).outputs
        assert np.isnan(numpy_ref), n
        assert bool(np.isnan(xla)) is not xla_drops and bool(np.isnan(xla_o0)) is not xla_drops, n


def _converts(f: jax.Array, b: jax.Array, d: jax.Array) -> tuple[jax.Array, ...]:
    return (f.astype(jnp.float64), b.astype(jnp.float64), d.astype(jnp.float32),
            d.astype(jnp.bfloat16), f.astype(jnp.bfloat16), b.astype(jnp.float32))


def test_converts_between_f64_and_f32_range_flush_subnormals_as_xla_does() -> None:
    """XLA:CPU reads an f32 or bf16 subnormal as zero converting it to f64, and flushes an
    f64 value below f32's smallest normal number converted to f32 or bf16; f32 to bf16 and
    back move the bits. The numpy reference converts alike, bit for bit with jit."""
    tiny = float(np.finfo(np.float32).tiny)
    f = np.array([1e-40, -1.4e-45, tiny, -tiny / 2, 1.0, -0.0, np.inf, np.nan], np.float32)
    b = f.astype(ml_dtypes.bfloat16)
    d = np.array([1e-40, -3e-39, tiny, -tiny * 0.999, 1e-300, 1.0, -np.inf, np.nan])
    text = jax.jit(_converts).lower(f, b, d).as_text()
    want = run_module(text, [f, b, d], {}).outputs
    got = npref.evaluate_module(text, [f.astype(np.float64), b.astype(np.float64), d])
    assert not got.fallbacks
    for k, (a, w) in enumerate(zip(got.outputs, want, strict=True)):
        w = np.asarray(w).astype(np.float64)
        np.testing.assert_array_equal(a, w, err_msg=f"output {k}")
        assert np.array_equal(np.signbit(a), np.signbit(w)), f"output {k}"
    assert got.outputs[0][0] == 0.0 and got.outputs[4][0] != 0.0  # flushed to f64, kept in bf16


def test_a_subnormal_made_by_next_after_is_zero_once_promoted() -> None:
    """s26-i242 (clean run, seed 26): floor(sinh(nextafter(0f, -1f))) in the float64
    promotion, where next_after stays at f32 and its subnormal result is converted to f64.
    Every XLA evaluation reads it as zero there (floor gives -0); numpy gave -1."""
    def program(a: jax.Array, b: jax.Array) -> jax.Array:
        n = lax.nextafter(a.astype(jnp.float32), b.astype(jnp.float32)).astype(jnp.float64)
        return jnp.floor(jnp.sinh(n))

    a, b = np.zeros(2), np.array([-1.0, 1.0])
    text = jax.jit(program).lower(a, b).as_text()
    (want,) = run_module(text, [a, b], REFERENCE_OPTIONS).outputs
    (got,) = npref.evaluate_module(text, [a, b]).outputs
    np.testing.assert_array_equal(got, np.asarray(want))
    assert np.array_equal(np.signbit(got), [True, False])


def _wide_integer_converts(d: jax.Array, i: jax.Array) -> tuple[jax.Array, ...]:
    return tuple(v.astype(t) for v in (d, i) for t in (jnp.int16, jnp.uint16, jnp.int64, jnp.uint64))


def test_converts_to_the_wider_index_integers_have_a_numpy_form_bit_for_bit_with_xla() -> None:
    """Converts to s16, u16, s64 and u64 (the indices family draws them) were evaluated by
    XLA as fallbacks, which sent their programs to the f64_eager and f64_jit cross-checks.
    Now numpy: truncation, saturation at each end (2**63 and more included, where float64
    cannot hold int64's max), NaN to 0, integers wrapping, bit for bit with XLA."""
    d = np.array([2.0**63, 2.0**64, 9.2e18, -9.3e18, 65535.9, -1.5, 40000.0, -40000.0,
                  np.nan, np.inf, -np.inf, -0.0, 1e300])
    i = np.array([np.iinfo(np.int32).min, -1, 0, 70000, -70000, 32767, 65536, 5, 1, 2, 3, 4, 7],
                 np.int32)
    text = jax.jit(_wide_integer_converts).lower(d, i).as_text()
    want = run_module(text, [d, i], REFERENCE_OPTIONS).outputs
    got = npref.evaluate_module(text, [d, i])
    assert not got.fallbacks, got.fallbacks
    for k, (a, w) in enumerate(zip(got.outputs, want, strict=True)):
        assert a.dtype == np.asarray(w).dtype, k
        np.testing.assert_array_equal(a, np.asarray(w), err_msg=f"output {k}")
