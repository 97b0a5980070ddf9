"""The worker's buffer checks around one execution (xla/buffers.py), on real XLA:CPU
compiles in this process.

What is injected, and where: XLA:CPU cannot be made to write into a caller's buffer by an
HLO pass (its buffer assignment copies a non-donated parameter before any in-place use,
even when a pass removes the protective copy after fusion: tested below), so the faults
here are buffers.RUNTIME_FAULTS, writes into the buffer after the executable ran, or a
donated input passed as a copy. The checks that must find them read the real device
buffers."""

from __future__ import annotations

from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from xla_sentinel.xla import buffers, compiler


def _update(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    return x.at[0].set(y[0]) * 2, y + 1


ARGS = [np.arange(8, dtype=np.float32), np.full(8, 3.0, np.float32)]


def _text(donate: tuple[int, ...] = ()) -> str:
    return jax.jit(_update, donate_argnums=donate).lower(*ARGS).as_text()


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(buffers.FAULT_ENV, raising=False)
    buffers.reset()
    yield
    buffers.reset()


def test_donation_is_read_from_main_and_removed_without_touching_the_rest() -> None:
    donated = _text((0,))
    assert buffers.donated_args(donated) == [0]
    assert buffers.donated_args(_text()) == []
    plain = buffers.without_donation(donated)
    assert buffers.donated_args(plain) == []
    assert "tf.aliasing_output" not in plain
    compiler.verify_module(plain)
    # jax.buffer_donor (donation with no output to alias at lowering) is donation too.
    donor = donated.replace("tf.aliasing_output = 0 : i32", "jax.buffer_donor = true")
    assert buffers.donated_args(donor) == [0]
    assert buffers.donated_args(buffers.without_donation(donor)) == []


def test_a_clean_run_reports_nothing_and_keeps_its_small_results_alive() -> None:
    for text in (_text(), _text((0,)), _text()):
        ex = compiler.run_module(text, ARGS, {}, checked=True)
        assert ex.buffers == []
        np.testing.assert_array_equal(ex.outputs[1], ARGS[1] + 1)
    assert len(buffers._state.live) == buffers.LIVE_RESULTS


def test_a_donated_input_is_consumed_and_the_host_array_is_untouched() -> None:
    exe = compiler.compile_module(_text((0,)), {})
    before = [a.copy() for a in ARGS]
    outputs, problems = buffers.execute_checked(exe, ARGS, _text((0,)))
    assert problems == []
    for a, b in zip(ARGS, before, strict=True):
        assert a.tobytes() == b.tobytes()
    np.testing.assert_array_equal(outputs[0], np.array([3, 1, 2, 3, 4, 5, 6, 7], np.float32) * 2)


def test_an_input_written_after_the_run_is_input_clobbered_with_its_elements(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(buffers.FAULT_ENV, "input_alias")
    ex = compiler.run_module(_text(), ARGS, {}, checked=True)
    [problem] = ex.buffers
    assert problem["verdict"] == "input_clobbered" and problem["buffer"] == "input 0"
    assert problem["count"] == 1 and problem["dtype"] == "float32" and problem["shape"] == [8]
    # Output 0's first element (y[0] * 2 = 6) written over x[0] = 0.
    assert problem["elements"] == [{"index": 0, "before": 0.0, "after": 6.0}]


def test_a_donated_input_is_not_reported_clobbered(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fault writes into the first non-donated input of the output's dtype: input 1.
    monkeypatch.setenv(buffers.FAULT_ENV, "input_alias")
    ex = compiler.run_module(_text((0,)), ARGS, {}, checked=True)
    assert [(p["verdict"], p["buffer"]) for p in ex.buffers] == [("input_clobbered", "input 1")]


def test_a_live_result_overwritten_by_a_later_run_is_result_clobbered(monkeypatch: pytest.MonkeyPatch) -> None:
    first = compiler.run_module(_text(), ARGS, {}, checked=True)
    assert first.buffers == []
    monkeypatch.setenv(buffers.FAULT_ENV, "result_reuse")
    other = [np.linspace(-1, 1, 8, dtype=np.float32), np.zeros(8, np.float32)]
    second = compiler.run_module(_text(), other, {}, checked=True)
    [problem] = second.buffers
    assert problem["verdict"] == "result_clobbered"
    assert problem["buffer"].startswith("live result ") and problem["buffer"].endswith(":0")
    assert problem["count"] == 8
    assert problem["elements"][0] == {"index": 0, "before": 6.0, "after": float(second.outputs[0][0])}


def test_a_donated_input_left_alive_is_a_donation_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(buffers.FAULT_ENV, "donation_ignored")
    ex = compiler.run_module(_text((0,)), ARGS, {}, checked=True)
    assert [(p["verdict"], p["buffer"]) for p in ex.buffers] == [("donation_mismatch", "input 0")]
    assert "not consumed" in ex.buffers[0]["reason"]


def test_an_unknown_runtime_fault_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(buffers.FAULT_ENV, "input_aliasing")
    with pytest.raises(ValueError, match="not a runtime fault; known: input_alias"):
        compiler.run_module(_text(), ARGS, {}, checked=True)


def test_a_concurrent_run_beside_the_previous_executable_agrees() -> None:
    a = compiler.compile_module(_text(), {})
    b = compiler.compile_module(jax.jit(lambda x, y: (jnp.sort(x) - y, x * y)).lower(*ARGS).as_text(), {})
    _, problems = buffers.execute_checked(a, ARGS, "a", concurrent=False)
    assert problems == []
    outputs, problems = buffers.execute_checked(b, ARGS, "b", concurrent=True)
    assert problems == []
    np.testing.assert_array_equal(outputs[1], ARGS[0] * ARGS[1])


def test_differing_names_the_changed_elements_bit_for_bit() -> None:
    before = np.array([0.0, -0.0, np.nan, 1.0], np.float32)
    after = np.array([0.0, 0.0, np.nan, 1.0], np.float32)
    d = buffers.differing(before, after)
    # -0.0 and 0.0 compare equal but are other bits; a NaN that stays is no change.
    assert d == {"count": 1, "elements": [{"index": 1, "before": -0.0, "after": 0.0}]}
    assert buffers.compare([before], [before.copy()], "nondeterministic", "rerun") == []


def test_a_pass_that_drops_the_copy_of_a_parameter_cannot_make_xla_cpu_write_into_it() -> None:
    """Why the faults are runtime ones: removing the protective copy of a non-donated
    parameter before an in-place update (after fusion, as a PRE_SCHEDULER plugin does)
    leaves XLA:CPU's buffer assignment to give the update a buffer of its own."""
    from jax.extend import xla as jex_xla
    from xla_sentinel.xla import hlo, hlo_proto

    def edit(module: hlo.HloModule) -> bool:
        comp, changed = module.entry, False
        for instr in list(comp):
            if instr.opcode == "fusion" and instr.operands:
                source = comp.get(instr.operands[0])
                if source.opcode == "copy" and comp.get(source.operands[0]).opcode == "parameter":
                    changed |= instr.replace_operand(source.name, source.operands[0])
        return changed

    seen: list[bool] = []

    def transform(proto: bytes) -> bytes | None:
        out = hlo_proto.rewrite_proto(proto, edit)
        seen.append(out is not None)
        return out

    stage = jex_xla.PipelineStage.PRE_SCHEDULER
    jex_xla.register_hlo_module_transformation(transform, name="test_drop_param_copy", platforms="cpu",
                                               stage=stage)
    try:
        text = jax.jit(lambda x, y, i: x.at[i].set(y[0])).lower(ARGS[0], ARGS[1], np.int32(5)).as_text()
        ex = compiler.run_module(text, [*ARGS, np.int32(5)], {}, checked=True)
    finally:
        jex_xla.clear_hlo_module_transformation("test_drop_param_copy", stage=stage, platforms="cpu")
        jax.clear_caches()
    assert any(seen)  # the copy was there and was removed
    assert ex.buffers == []
    np.testing.assert_array_equal(ex.outputs[0], np.array([0, 1, 2, 3, 4, 3, 6, 7], np.float32))


def test_two_compiles_may_differ_in_nan_bits_only() -> None:
    nan_a = np.array([1.0, np.nan, 2.0], np.float32)
    nan_b = nan_a.copy()
    nan_b.view(np.uint32)[1] ^= 0x80000000  # the same NaN, other sign
    assert buffers.compare([nan_a], [nan_b], "donation_mismatch", "d", nan_equal=True) == []
    [problem] = buffers.compare([nan_a], [nan_b], "nondeterministic", "rerun")
    assert problem["count"] == 1 and problem["elements"][0]["index"] == 1
    assert problem["elements"][0]["before"] == "nan (0x7fc00000)"
    assert problem["elements"][0]["after"] == "nan (0xffc00000)"
    wrong = nan_a.copy()
    wrong[2] = np.nan
    [problem] = buffers.compare([nan_a], [wrong], "donation_mismatch", "d", nan_equal=True)
    assert problem["elements"] == [{"index": 2, "before": 2.0, "after": "nan (0x7fc00000)"}]
