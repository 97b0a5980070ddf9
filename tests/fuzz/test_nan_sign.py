"""The sign of a NaN, where the program does not fix it (issue 16, the seed-24 clean run).

IEEE 754 (6.3) leaves the sign of a NaN that arithmetic returns open; only ops that copy
bits or are defined on the sign bit (negate, abs) fix it. XLA's top_k orders by totalOrder
(-NaN below -inf), so its result can depend on that sign: s24-i827 took
top_k(tanh(log(|NaN| + 0.5))) in f16, XLA:CPU's fused log made -NaN (ranked last), numpy
and XLA's own op-by-op log kept +NaN (ranked first), and all three targets were flagged
nan_mismatch. npref marks such elements (`Evaluation.undetermined`, by evaluating the module
with every open-signed NaN +NaN and then -NaN) and the oracle judges them in no
configuration; everything else is still judged.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import yaml
from jax import lax
from xla_sentinel.campaign.check import check_program
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.core.program import Program
from xla_sentinel.judge import oracle
from xla_sentinel.ops.numpy_forms import np_top_k
from xla_sentinel.programs import evaluate
from xla_sentinel.references import npref

pytestmark = pytest.mark.usefixtures("x64")

UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.view(UINT[x.dtype.itemsize])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64],
                         ids=["f16", "bf16", "f32", "f64"])
def test_np_top_k_orders_as_xla_by_total_order(dtype: type) -> None:
    """Signed NaNs, zeros and infinities: XLA's top_k is a stable sort on the bits."""
    row = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, -0.0, 0.0, -np.nan, np.nan])
    x = np.stack([row, row[::-1]]).astype(dtype)
    values, idx = jax.jit(lambda a: lax.top_k(a, 12))(x)
    want_values, want_idx = np_top_k(x.astype(np.float64), 12)

    np.testing.assert_array_equal(np.asarray(idx), want_idx)
    np.testing.assert_array_equal(bits(np.asarray(values)), bits(want_values.astype(dtype)))
    assert bits(np.asarray(values))[0, -1] == bits(np.array(-np.nan, dtype))  # -NaN ranks last


def test_xla_cpu_fused_f16_log_of_nan_is_negative() -> None:
    """The premise of s24-i827: the same +NaN gives -NaN through the compiled program and
    keeps its sign op by op, so top_k ranks it last in one and first in the other."""
    x = np.array([np.nan, 1.0, -1.0, 0.0], np.float16)

    def program(a: jax.Array) -> jax.Array:
        return jnp.tanh(jnp.log(jnp.abs(a) + np.float16(0.5)))

    fused = np.asarray(jax.jit(program)(x))
    op_by_op = np.asarray(jnp.tanh(jnp.log(jnp.abs(x) + np.float16(0.5))))
    assert np.signbit(fused[0]) and np.isnan(fused[0])
    assert not np.signbit(op_by_op[0]) and np.isnan(op_by_op[0])


# log(|x| + 0.5) (the op table's log), tanh, top_k: s24-i827's output 3 on two rows.
GRAPH = Graph(
    values=[Value([3, 6], "f16", False, input=0),
            Value([3, 6], "f16", True, node=0),
            Value([3, 6], "f16", True, node=1),
            Value([3, 4], "f16", True, node=2)],
    nodes=[Node("log", [0], {}),
           Node("tanh", [1], {}),
           Node("top_k", [2], {"k": 4, "output": 0}, True)],
    outputs=[3])
X = np.array([[1.0, np.nan, -1.0, 0.0, 1.0, 1.0],   # a NaN: its rank is open
              [1.0, 2.0, -1.0, 0.0, 3.0, 0.5],       # none: all determined
              [np.nan, np.nan, 1.0, 0.0, 0.0, 0.0]], np.float16)


def numpy_reference(graph: Graph, x: np.ndarray) -> npref.Evaluation:
    return npref.evaluate_module(evaluate.lower_f64_text(graph), [x.astype(np.float64)])


def test_npref_marks_what_the_nan_sign_decides() -> None:
    result = numpy_reference(GRAPH, X)
    assert result.undetermined is not None
    (mask,) = result.undetermined
    ref = result.outputs[0]
    # Row 0: the NaN is first with +NaN, absent with -NaN; the three 0.3848 stay in place.
    assert mask[0].tolist() == [True, False, False, False] and np.isnan(ref[0, 0])
    assert not mask[1].any() and not np.isnan(ref[1]).any()
    # Row 2: [NaN, NaN, 0.38, -0.6] or [0.38, -0.6, -0.6, -0.6]; the last is -0.6 either way.
    assert mask[2].tolist() == [True, True, True, False]


def test_a_nan_whose_sign_the_program_fixes_stays_judged() -> None:
    """An input NaN through abs and neg (sign-bit ops): -NaN, ranked last everywhere."""
    graph = Graph(
        values=[Value([2, 6], "f32", False, input=0),
                Value([2, 6], "f32", True, node=0),
                Value([2, 6], "f32", True, node=1),
                Value([2, 3], "f32", True, node=2)],
        nodes=[Node("abs", [0], {}),
               Node("neg", [1], {}),
               Node("top_k", [2], {"k": 3, "output": 0}, True)],
        outputs=[3])
    x = np.array([[1.0, np.nan, -2.0, 0.5, 3.0, 1.5], [np.nan] * 6], np.float32)
    result = numpy_reference(graph, x)

    assert result.undetermined is None
    np.testing.assert_array_equal(result.outputs[0][0], [-0.5, -1.0, -1.5])
    want = np.asarray(jax.jit(lambda a: lax.top_k(-jnp.abs(a), 3)[0])(x))
    np.testing.assert_array_equal(result.outputs[0], want)


def judge(target: np.ndarray, undetermined: list[np.ndarray] | None) -> oracle.Judgement:
    ref = numpy_reference(GRAPH, X)
    literal = ref.outputs[0].astype(np.float16)
    results = {"default": [target], "eager": [literal]}
    return oracle.judge("default", results, ref.outputs, [oracle.OutputInfo("f16")],
                        lambda: None, discrete=True, undetermined=undetermined)


def test_the_oracle_leaves_open_elements_unjudged_and_judges_the_rest() -> None:
    ref = numpy_reference(GRAPH, X)
    # What XLA:CPU's targets return: every NaN of the program -NaN, ranked last.
    target = np.asarray(jax.jit(evaluate.traced(GRAPH))(X)[0])
    assert np.isfinite(target[0, 0]) and np.isnan(ref.outputs[0][0, 0])  # the s24-i827 case

    assert judge(target, None).verdict == "nan_mismatch"
    assert judge(target, ref.undetermined).verdict == "pass"
    wrong = target.copy()
    wrong[1, 0] = np.float16(np.nan)  # a determined element: still judged
    assert judge(wrong, ref.undetermined).verdict == "nan_mismatch"
    wrong = target.copy()
    wrong[0, 2] = np.float16(-0.6)
    assert judge(wrong, ref.undetermined).verdict == "mismatch"


def test_without_undetermined_blanks_alike_and_keeps_other_shapes() -> None:
    mask = [np.array([True, False]), np.array([False, True])]
    floats, ints = oracle.without_undetermined(
        [np.array([1.0, 2.0], ml_dtypes.bfloat16), np.array([3, 4], np.int32)], mask)
    assert np.isnan(floats[0].astype(np.float64)) and floats[1] == 2.0 and floats.dtype == ml_dtypes.bfloat16
    assert ints.tolist() == [3, 0]
    (short,) = oracle.without_undetermined([np.array([1.0])], [mask[0]])
    assert short.tolist() == [1.0]


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("program")
    Program("nan-sign-top-k", evaluate.lower_text(GRAPH), [X], ["f16"], graph=GRAPH).save(folder)
    return folder


def test_check_passes_every_target_of_the_clean_run(program: Path, tmp_path: Path) -> None:
    """Through the workers with the clean run's targets and the default references."""
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump({"targets": ["default", "O0", "no_fusion_emitters"]}))
    verdicts = check_program(program, campaign)
    assert [v["verdict"] for v in verdicts] == ["pass"] * 3, verdicts


def routed(x: jax.Array, p: jax.Array) -> jax.Array:
    """Top-2 routing of the kind topk_routing builds: which two experts a row picks, as a
    dense one-hot sum; NaNs from log (XLA:CPU's fused f16 log: -NaN) and from x + x (+NaN)."""
    y = lax.select(p, jnp.log(jnp.abs(x) + np.float16(0.5)), x + x)
    _, idx = lax.top_k(y, 2)
    return jnp.sum(jax.nn.one_hot(idx, 4, dtype=jnp.float16), axis=-2)


ROUTED_X = np.array([[np.nan] * 4, [1.0, 3.0, 2.0, 0.0]], np.float16)
ROUTED_P = np.array([[True, False, True, False]] * 2)


def test_npref_marks_rows_where_two_nans_of_open_sign_rank_each_other() -> None:
    """s31-i2046 (the devices-4 clean run): a row of NaNs into top_k, some made -NaN and some
    +NaN by XLA, picked other experts than numpy, whose NaNs are all +NaN. Every NaN +NaN
    or every one -NaN (the uniform runs) both pick experts 0 and 1, so only marking the
    row where top_k ranks two NaNs covers it; the row without NaN stays judged."""
    target = np.asarray(jax.jit(routed)(ROUTED_X, ROUTED_P))
    result = npref.evaluate_module(jax.jit(routed).lower(ROUTED_X, ROUTED_P).as_text(),
                                   [ROUTED_X, ROUTED_P])
    ref = result.outputs[0]
    assert target[0].tolist() == [0, 1, 0, 1] and ref[0].tolist() == [1, 1, 0, 0]  # the premise
    assert result.undetermined is not None
    (mask,) = result.undetermined
    assert mask[0].all() and not mask[1].any()

    results = {"default": [target], "eager": [ref.astype(np.float16)]}
    info = [oracle.OutputInfo("f16", True)]
    assert oracle.judge("default", results, result.outputs, info, lambda: None, discrete=True,
                        undetermined=result.undetermined).verdict == "pass"
    wrong = target.copy()
    wrong[1] = [1, 1, 0, 0]  # the row without NaN: still judged
    results["default"] = [wrong]
    assert oracle.judge("default", results, result.outputs, info, lambda: None, discrete=True,
                        undetermined=result.undetermined).verdict == "mismatch"
