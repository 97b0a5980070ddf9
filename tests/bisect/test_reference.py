"""The float64 values every stage compares against, for any StableHLO module."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
from findings import make_finding
from xla_sentinel.bisect.pipeline import open_context
from xla_sentinel.core.program import promote_floats


def _f64_bits(text: str) -> float:
    return float(np.array([int(text, 16)], np.uint64).view(np.float64)[0])


def test_hex_float_constants_keep_their_value_when_widened() -> None:
    text = promote_floats("%c = stablehlo.constant dense<0x7F800000> : tensor<f32>\n"
                       "%h = stablehlo.constant dense<[0x3C00, 2.5]> : tensor<2xf16>")
    assert "tensor<f64>" in text and "tensor<2xf64>" in text
    inf_bits = text.split("dense<")[1].split(">")[0]
    one_bits = text.split("dense<[")[1].split(",")[0]
    assert _f64_bits(inf_bits) == np.inf and _f64_bits(one_bits) == 1.0


def test_hex_blob_constants_are_widened_element_by_element() -> None:
    values = np.array([1.0, -2.0, 0.15625], ml_dtypes.bfloat16)
    text = promote_floats(f'dense<"0x{values.tobytes().hex().upper()}"> : tensor<3xbf16>')
    blob = text.split('"0x')[1].split('"')[0]
    assert np.array_equal(np.frombuffer(bytes.fromhex(blob), "<f8"), values.astype(np.float64))


def test_reference_through_called_functions_and_regions(tmp_path: Path) -> None:
    # jax lowers cummin to a private function whose reduce_window starts from +inf (a hex
    # constant), and sort's comparator holds NaN constants: both must survive widening.
    from jax import lax

    x = np.random.default_rng(0).normal(size=(9, 4)).astype(np.float32)
    folder = make_finding(tmp_path / "f", lambda v: lax.sort(lax.cummin(v, axis=0), dimension=0), [x])
    ctx = open_context(folder, timeout=60)
    try:
        (out,) = ctx.info["returns"]
        expected = np.sort(np.minimum.accumulate(x.astype(np.float64), axis=0), axis=0)
        assert np.array_equal(ctx.values[out], expected)
    finally:
        ctx.lab.close()
