"""The op-by-op references put host arrays on the device without a compile, bit for bit
(issue 39: jnp.asarray of an ndarray compiled an identity per shape and dtype, a quarter
of `eager`'s XLA compiles)."""

from __future__ import annotations

import logging

import jax
import ml_dtypes
import numpy as np
import pytest
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import single_op


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_on_device_keeps_every_bit(x64: None, dtype: type) -> None:
    # Subnormals (which XLA:CPU arithmetic flushes), signed zeros, infinities and NaNs
    # with payloads: a copy must keep them all.
    info = ml_dtypes.finfo(dtype)
    x = np.array([0.0, -0.0, float(info.smallest_subnormal), -float(info.tiny) / 2, np.inf, -np.inf,
                  np.nan, 1.5], np.float64).astype(dtype)
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    bits = x.view(uint).copy()
    bits[6] |= 1  # a NaN payload
    x = bits.view(dtype)
    assert np.asarray(evaluate.on_device(x)).tobytes() == x.tobytes()


def test_eager_references_compile_no_identity(x64: None, caplog: pytest.LogCaptureFixture) -> None:
    graph = single_op("tan", "f32", seed=3)  # a transcendental: eager's XLA path
    assert graph is not None
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs]
    jax.clear_caches()  # every primitive compiles afresh, whatever ran before in this process
    with jax.log_compiles(), caplog.at_level(logging.WARNING, logger="jax"):
        evaluate.literal(graph, inputs)
        evaluate.eager(graph, inputs, promote=True)
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling ")]
    assert any("jit(tan)" in m for m in compiled), compiled  # the log is seen
    assert not [m for m in compiled if "jit(stage)" in m]
