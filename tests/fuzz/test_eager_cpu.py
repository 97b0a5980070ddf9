"""Issue 39's cuts of the op-by-op evaluations and the pass-effect sample, each held to what
it replaced, bit for bit or answer for answer:

- an elementwise op evaluated on a bucket of one of a few fixed lengths (evaluate.BUCKETS)
  gives the op's bits on its real shape, in a bucket past the first one too;
- the noise model's perturbation computed in numpy (evaluate._moved_in_numpy) gives the
  bits of the same float64 operations through XLA, and leaves to XLA a value near the
  flush threshold, where XLA:CPU's flush is the hardware's decision;
- the pass effects read from one compile's pass dumps (handlers.pass_effects) name the
  passes that a compile per disabled pass names.
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from xla_sentinel.campaign import coverage
from xla_sentinel.ops.lax_builders import build
from xla_sentinel.ops.table import OPS
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import generate, single_op
from xla_sentinel.programs.inputs import make_array
from xla_sentinel.spec.campaign import GeneratorSpec
from xla_sentinel.worker import handlers
from xla_sentinel.worker.protocol import PassEffects
from xla_sentinel.xla import compiler
from xla_sentinel.xla.hlo import hlo_fingerprint

from .test_own_precision import differences

pytestmark = pytest.mark.usefixtures("x64")


def test_few_bucket_lengths() -> None:
    assert [evaluate.bucket_size(n) for n in (1, 17, 1024, 1025, 1 << 14, (1 << 22) + 1)] == [
        1024, 1024, 1024, 1 << 14, 1 << 14, 1 << 23]


@pytest.mark.parametrize(("name", "dtype"), [("tan", "f32"), ("logistic", "f16"), ("atan2", "bf16"),
                                             ("pow", "f64"), ("add", "f32")])
def test_an_op_in_a_bucket_past_the_first_equals_the_op_on_its_real_shape(name: str, dtype: str) -> None:
    base = single_op(name, dtype, seed=0)
    assert base is not None
    (node,) = base.nodes
    rng = np.random.default_rng(11)
    shape = (41, 43)  # 1,763 elements: the 16,384 bucket, a tail of 3 past a multiple of 8
    assert evaluate.bucket_size(41 * 43) == 1 << 14
    for special in (False, True):
        xs = [make_array(rng, shape, base.values[i].dtype, special) for i in node.args]
        want = np.asarray(build(OPS[name], node.attrs, *map(jnp.asarray, xs)))
        if evaluate._nan_meets_nan(xs):
            # Two operands NaN at one element: which NaN comes out depends on the kernel's
            # shape, so such operands are evaluated at their own (test_eager_by_primitive.py).
            assert special and not evaluate._bucketable(OPS[name], node.attrs, xs, shape)
            continue
        assert evaluate._bucketable(OPS[name], node.attrs, xs, shape)
        assert differences(evaluate._bucketed(OPS[name], node.attrs, xs, shape), want) == ""


def _moved_by_xla(op_name: str, attrs: dict, xs: list[np.ndarray], out: np.ndarray, step: object) -> np.ndarray:
    """The perturbation as the noise model computed it before issue 39: each op alone
    through XLA."""
    jxs = [evaluate.on_device(x) for x in xs]
    jout = evaluate.on_device(out)
    return np.asarray(jout + jnp.asarray(step, jout.dtype) * evaluate._rounding_scale(OPS[op_name], attrs, jxs, jout))


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("op_name", ["tan", "reduce_sum", "dot_general", "cumprod", "reduce_prod"])
def test_the_noise_in_numpy_has_the_bits_of_the_noise_through_xla(op_name: str) -> None:
    graph = single_op(op_name, "f64", seed=1)
    assert graph is not None
    (node,) = graph.nodes
    rng = np.random.default_rng(3)
    for special in (False, True):  # special: infinities, NaNs, zeros, huge values
        xs = [make_array(rng, tuple(graph.values[i].shape), "f64", special) for i in node.args]
        out = np.asarray(build(OPS[op_name], node.attrs, *map(evaluate.on_device, xs)))
        for step in (rng.uniform(-1, 1, size=out.shape) * 2.0 ** -53, 2.0 ** -52, -(2.0 ** -53)):
            got = evaluate._moved_in_numpy(OPS[op_name], node.attrs, [evaluate.on_device(x) for x in xs],
                                           evaluate.on_device(out), step)
            want = _moved_by_xla(op_name, node.attrs, xs, out, step)
            if got is None:  # left to XLA: a NaN's bits are XLA's to choose
                assert special and np.isnan(want).any(), op_name
                continue
            assert _bits_equal(got, want), (op_name, special)


def test_a_value_near_the_flush_threshold_or_a_nan_is_left_to_xla() -> None:
    tiny = np.finfo(np.float64).tiny
    out = np.array([1.0, tiny * 1.5, 3.0])  # XLA:CPU may read or make it as zero
    assert evaluate._moved_in_numpy(OPS["tan"], {}, [evaluate.on_device(out)], evaluate.on_device(out), 2.0 ** -53) is None
    # A product that lands below the smallest normal number: numpy keeps it, XLA:CPU flushes it.
    small = np.array([tiny * 4.0])
    assert evaluate._moved_in_numpy(OPS["tan"], {}, [evaluate.on_device(small)], evaluate.on_device(small),
                                    0.125) is None
    # XLA:CPU gave -NaN for (-NaN) + (+NaN) where numpy gives +NaN (s5-i6 of every family).
    nan = np.array([1.0, -np.nan])
    assert evaluate._moved_in_numpy(OPS["tan"], {}, [evaluate.on_device(nan)], evaluate.on_device(nan), 2.0 ** -53) is None
    assert evaluate._moved_in_numpy(OPS["tan"], {}, [evaluate.on_device(nan[:1])], evaluate.on_device(nan[:1]),
                                    2.0 ** -53) is not None


def _compile_per_pass(module: str, passes: list[str]) -> list[str]:
    """The pass effects as measured before issue 39: one compile per disabled pass."""
    base = hlo_fingerprint(compiler.compile_module(module, {}).get_hlo_text())
    return [p for p in passes
            if hlo_fingerprint(compiler.compile_module(module, {"xla_disable_hlo_passes": p}).get_hlo_text()) != base]


@pytest.mark.parametrize("index", [0, 3, 7])
def test_pass_effects_from_the_dumps_name_what_a_compile_per_pass_names(index: int) -> None:
    graph = generate(2, index, GeneratorSpec(devices=1))
    module = evaluate.lower_text(graph)
    passes = list(coverage.PASSES)
    assert handlers.pass_effects(PassEffects(module, passes)).changed == _compile_per_pass(module, passes)


def _dump(folder: Path, name: str, text: str) -> None:
    (folder / f"module_0000.jit_f.{name}.txt").write_text(text)


def test_a_pass_that_left_the_text_as_it_found_it_is_not_compiled(tmp_path: Path) -> None:
    _dump(tmp_path, "0000.simplification.after_pipeline-start.before_algsimp", "A")
    _dump(tmp_path, "0001.simplification.after_algsimp.before_dce", "A")  # algsimp: no change
    _dump(tmp_path, "0002.simplification.after_dce.before_cse", "B")  # dce changed it
    _dump(tmp_path, "0003.simplification.after_cse.before_pipeline-end", "B")
    _dump(tmp_path, "0004.later.after_pipeline-start.before_algsimp", "B")
    _dump(tmp_path, "0005.later.after_algsimp.before_pipeline-end", "B")
    assert handlers.passes_that_changed_text(tmp_path, ["algsimp", "dce", "cse", "fusion"]) == {"dce"}
    # A run of a pass with no dump right before it: compiled, as is every pass without dumps.
    (tmp_path / "module_0000.jit_f.0004.later.after_pipeline-start.before_algsimp.txt").unlink()
    assert handlers.passes_that_changed_text(tmp_path, ["algsimp", "dce"]) == {"algsimp", "dce"}
    for f in tmp_path.iterdir():
        f.unlink()
    assert handlers.passes_that_changed_text(tmp_path, ["algsimp"]) == {"algsimp"}
