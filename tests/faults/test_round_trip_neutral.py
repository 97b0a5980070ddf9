"""The HLO text round trip every fault edits through changes nothing but names.

Issue 13: on the smoke campaign's program s1-i124 (seed 1: abs, remainder, divide, a
scatter at the rows of an s32[15] constant, cumprod, sort, reverse) an identity plugin
that re-parsed the module's own text made the second output differ from compile to
compile. The cause is jaxlib's default printer, which shortens that constant to `{...}`;
the parser reads it back as an uninitialized literal, so the scatter wrote to garbage
rows. `hlo_proto.text_from_proto` prints constants in full; these tests pin that down on the
program itself and check, field by field, that the proto a fault returns carries what the
proto it received did."""

from __future__ import annotations

from collections.abc import Iterator

import jax
import numpy as np
import pytest
from fault_corpus import CORPUS
from fault_harness import captured_proto, registered
from proto_fields import instructions
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import generate
from xla_sentinel.programs.inputs import make_inputs
from xla_sentinel.spec.campaign import GeneratorSpec
from xla_sentinel.xla import compiler, hlo, hlo_proto

SMOKE = GeneratorSpec(version=1, minOps=2, maxOps=16, dtypes=["f32", "bf16", "f16", "s32", "u8", "bool"])
O0 = {"xla_backend_optimization_level": 0}


@pytest.fixture
def s1_i124() -> Iterator[tuple[str, list[np.ndarray]]]:
    """The program as the smoke campaign's worker builds it (x64 on, special inputs as drawn)."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        graph = generate(1, 124, SMOKE)
        special = bool(np.random.default_rng([1, 124, 0x5BEC]).random() < SMOKE.specialValues)
        inputs = make_inputs({"seed": 1, "index": 124, "special": special}, graph.inputs)
        yield evaluate.lower_text(graph), inputs
    finally:
        jax.config.update("jax_enable_x64", previous)


def _touch_nothing(module: hlo.HloModule) -> bool:
    return True  # parse -> text -> proto with no edit


def _outputs(module: str, inputs: list[np.ndarray], compiles: int) -> list[list[bytes]]:
    return [[o.tobytes() for o in compiler.run_module(module, inputs, O0).outputs] for _ in range(compiles)]


def test_identity_rewrite_of_s1_i124_is_neutral_on_every_compile(s1_i124) -> None:
    module, inputs = s1_i124
    assert "stablehlo.scatter" in module and "stablehlo.sort" in module

    clean = _outputs(module, inputs, 1)[0]
    with registered("test_identity", lambda proto: hlo_proto.rewrite_proto(proto, _touch_nothing)):
        rewritten = _outputs(module, inputs, 4)

    assert rewritten == [clean] * 4


def test_the_default_printer_elides_the_scatter_rows_and_the_full_one_keeps_them(s1_i124) -> None:
    from jaxlib import _hlo

    module, _ = s1_i124
    seen: list[bytes] = []
    with registered("test_spy", lambda proto: seen.append(proto)):
        compiler.compile_module(module, O0)
    (proto,) = seen
    rows = "s32[15,1]{1,0} constant({ {1}, {29}, {17}, {15}, {8}, {9}, {18}, {7}, {22}, {14}, {25}, {4}, {16}, {11}, {13} })"

    assert "{...}" in _hlo.HloModule.from_serialized_hlo_module_proto(proto).to_string()
    assert rows in hlo_proto.text_from_proto(proto) and "{...}" not in hlo_proto.text_from_proto(proto)


def test_rewritten_proto_keeps_every_instruction_field(s1_i124, corpus_protos) -> None:
    """Literals, layouts, scatter's unique_indices and indices_are_sorted, frontend
    attributes, backend configs: everything but ids and source metadata survives."""
    module, _ = s1_i124
    seen: list[bytes] = []
    with registered("test_spy", lambda proto: seen.append(proto)):
        compiler.compile_module(module, O0)
    protos = {"s1-i124": seen[0], **corpus_protos}

    for name, proto in protos.items():
        before = instructions(proto)
        after = instructions(hlo_proto.rewrite_proto(proto, _touch_nothing))
        assert after.keys() == before.keys(), name
        lost = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
        assert not lost, f"{name}: {lost}"


def test_corpus_programs_are_built_on_what_a_round_trip_can_lose() -> None:
    # The field comparison above only proves something if the corpus holds such fields.
    assert CORPUS
    assert any("scatter" in hlo_proto.text_from_proto(captured_proto(f, *args)) for f, args in CORPUS.values())
