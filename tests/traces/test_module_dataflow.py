"""A replayed module's outputs judged by its own StableHLO dataflow (issue 28): which
outputs depend on a float, which IEEE 754 fixes bitwise, and which ops compute them (the
known-bug rules). Modules are lowered by jax; the info is what the program worker's
Info request returns (MLIR parse, then the op tags of ops/rules.py)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from xla_sentinel.core import stablehlo
from xla_sentinel.core.model import Finding
from xla_sentinel.judge.assess import module_output_infos
from xla_sentinel.ops.rules import annotate_ops
from xla_sentinel.triage import known_bugs
from xla_sentinel.xla.cuts import module_info


def _module(fn: Any, *args: Any) -> str:
    return jax.jit(fn).lower(*args).as_text()


def _infos(text: str) -> list[tuple[str, bool, bool]]:
    info = annotate_ops(module_info(text))
    return [(i.dtype, i.tainted, i.bitwise) for i in module_output_infos(info, stablehlo.holds_floats(text))]


def _nested(x: jax.Array, i: jax.Array) -> jax.Array:
    return lax.dynamic_slice(lax.dynamic_slice(x, (i,), (30,)), (i,), (4,))


def test_an_all_integer_module_is_float_independent_and_bitwise() -> None:
    text = _module(_nested, np.arange(34, dtype=np.int32), np.int32(16))
    assert not stablehlo.holds_floats(text)
    assert _infos(text) == [("s32", False, True)]


def test_integers_computed_from_floats_are_tainted_and_others_not() -> None:
    def fn(x: jax.Array, n: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        return (jnp.argmax(x).astype(jnp.int32),  # through a float compare
                (x > 0.5).astype(jnp.int32),       # a float compare
                n * 3 + 1,                         # integers only
                x * 2.0 + 1.0)                     # two roundings: not bitwise

    text = _module(fn, np.ones(8, np.float32), np.arange(4, dtype=np.int32))
    assert stablehlo.holds_floats(text)
    out = _infos(text)
    assert [(d, t) for d, t, _ in out] == [("s32", True), ("s32", True), ("s32", False), ("f32", True)]
    assert out[2][2] is True and out[3][2] is False


def test_a_loop_over_integers_in_a_module_with_floats_stays_tainted() -> None:
    """A while body may hold float constants its operands do not show: where the module
    has any float, a region op's results count as float-dependent (as before)."""
    def fn(x: jax.Array, n: jax.Array) -> tuple[jax.Array, jax.Array]:
        return x * 2.0, lax.fori_loop(0, 3, lambda _, c: c + (jnp.float32(1.5) > 1).astype(jnp.int32), n)

    out = _infos(_module(fn, np.ones(4, np.float32), np.int32(0)))
    assert out[1][:2] == ("s32", True) and out[1][2] is False


def test_main_dataflow_reads_ops_and_returns_from_text() -> None:
    text = _module(_nested, np.arange(34, dtype=np.float32), np.int32(16))
    defs, returns = stablehlo.main_dataflow(text)
    assert len(returns) == 1
    op, reads = defs[returns[0]]
    assert op == "dynamic_slice" and defs[reads[0]][0] == "dynamic_slice"
    assert stablehlo.main_dataflow("not a module") == ({}, [])


def _finding(**evidence: Any) -> Finding:
    return Finding(id="f", campaign="c", program="trace-x", target="default", verdict="mismatch",
                   evidence=evidence, dir="findings/f", time="t")


def test_known_bug_rules_match_a_replayed_module_by_its_stablehlo() -> None:
    """The nested dynamic_slice entry names a slice applied to a slice's result; a
    replayed module has no graph, so its text is read instead."""
    nested = _module(_nested, np.arange(34, dtype=np.int32), np.int32(16))
    assert known_bugs.match(_finding(output=0), module=nested) == "xla-dynamic-slice-of-dynamic-slice"
    assert known_bugs.match(_finding(output=0)) is None  # neither graph nor module: no program rule
    assert known_bugs.match(_finding(output=3), module=nested) is None  # no such output

    def apart(x: jax.Array, i: jax.Array) -> jax.Array:
        return lax.dynamic_slice(x, (i,), (4,)) + lax.dynamic_slice(x, (i + 1,), (4,))

    single = _module(apart, np.arange(34, dtype=np.int32), np.int32(16))
    assert known_bugs.match(_finding(output=0), module=single) is None
