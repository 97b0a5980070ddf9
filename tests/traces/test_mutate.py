"""Mutations of a recorded trace: each kind gives a valid module that compiles and means
what the kind says; a campaign judges every mutant."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.programs import traces
from xla_sentinel.programs.mutate import mutate, retype_floats
from xla_sentinel.programs.record import recording
from xla_sentinel.spec.campaign import MUTATION_KINDS, MutationSpec, SpecError, parse_spec
from xla_sentinel.xla import compiler


def _layer(x: jax.Array, w: jax.Array) -> jax.Array:
    # dot, tanh, a float constant, an add, and a max reduction whose init is -inf (a hex literal).
    return jnp.max(jnp.tanh(x @ w) * 0.5 + x[:, :4], axis=1)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("traces")
    rng = np.random.default_rng(0)
    with recording(out, with_values=True) as rec:
        jax.jit(_layer)(rng.normal(size=(8, 6)).astype(np.float32), rng.normal(size=(6, 4)).astype(np.float32))
    [folder] = rec.traces
    return folder


# _layer returns no result of an argument's type, so donation has no site in it; a
# sharding mutant needs several devices, which this process (jax already started) lacks.
# tests/traces/test_mutate_shapes.py covers both, with their no-site cases.
LAYER_KINDS = [k for k in MUTATION_KINDS if k not in ("donation", "sharding")]


def _run(module: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return compiler.run_module(module, inputs, {}).outputs


@pytest.mark.parametrize("kind", LAYER_KINDS)
def test_each_kind_verifies_compiles_and_changes_the_program(trace: Path, kind: str) -> None:
    base = traces.load(trace)
    mutant = traces.load(Path(f"{trace}@{kind}.0"), seed=3)
    assert mutant.provenance["mutation"]["kind"] == kind
    assert (mutant.module, [x.tobytes() for x in mutant.inputs]) != (base.module, [x.tobytes() for x in base.inputs])
    [out] = _run(mutant.module, mutant.inputs)
    assert out.shape == (mutant.inputs[0].shape[0],)  # 8 rows, or the batch mutant's size


def test_swap_op_changes_exactly_one_op(trace: Path) -> None:
    base = traces.load(trace)
    mutant = mutate(base.module, base.inputs, base.input_dtypes, "swap_op", seed=0)
    assert mutant is not None
    changed = [(a, b) for a, b in zip(base.module.split("\n"), mutant.module.split("\n"), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][0].split("=")[0] == changed[0][1].split("=")[0]


def test_retype_keeps_the_values_of_hex_literals(trace: Path) -> None:
    base = traces.load(trace)
    assert "0xFF800000" in base.module  # -inf, the max reduction's init
    narrow = retype_floats(base.module, "f32", "f16")
    assert "0xFC00" in narrow and "f32" not in narrow
    [want] = _run(base.module, base.inputs)
    [got] = _run(narrow, [x.astype(np.float16) for x in base.inputs])
    # Read as a tiny positive number instead of -inf, the init would win every all-negative row.
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_round_trip_rounds_through_a_narrower_type(trace: Path) -> None:
    base = traces.load(trace)
    mutant = mutate(base.module, base.inputs, base.input_dtypes, "round_trip", seed=0)
    assert mutant is not None and mutant.module.count("stablehlo.convert") == base.module.count("stablehlo.convert") + 2
    [want] = _run(base.module, base.inputs)
    [got] = _run(mutant.module, mutant.inputs)
    np.testing.assert_allclose(got, want, rtol=2**-7, atol=2**-7)


def test_special_values_planted_in_one_argument(trace: Path) -> None:
    base = traces.load(trace)
    mutant = mutate(base.module, base.inputs, base.input_dtypes, "special_values", seed=1)
    assert mutant is not None and mutant.module == base.module
    changed = [i for i, (a, b) in enumerate(zip(base.inputs, mutant.inputs, strict=True))
               if a.tobytes() != b.tobytes()]
    assert len(changed) == 1
    x = mutant.inputs[changed[0]]
    assert not np.isfinite(x).all() or (np.abs(x) == np.finfo(np.float32).max).any() or (x == 0).any()


def test_a_campaign_judges_every_mutant(trace: Path, tmp_path: Path) -> None:
    spec = parse_spec({"traces": [str(trace)], "mutations": {"perTrace": len(LAYER_KINDS), "kinds": LAYER_KINDS},
                       "targets": ["default", "O0"], "references": ["f64_numpy", "eager"],
                       "budget": {"programs": 1 + len(LAYER_KINDS)}, "workers": 1})
    summary = run_campaign(spec, tmp_path / "out", name="mutants", progress=False)
    assert summary["program_status"] == {"judged": 1 + len(LAYER_KINDS)}
    assert summary["findings"] == {}


def test_unknown_mutation_kind_is_named() -> None:
    with pytest.raises(SpecError, match=r"spec.mutations.kinds\[1\]"):
        parse_spec({"mutations": {"perTrace": 2, "kinds": ["dtype", "reshape"]}})
    assert MutationSpec().perTrace == 0
