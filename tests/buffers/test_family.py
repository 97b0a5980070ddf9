"""The `buffers` shape family (programs/generator.py `_buffers`, `_donate`): chained
in-place updates, donation drawn per argument and lowered as jax lowers donate_argnums,
run through the target's buffer checks on real compiles."""

from __future__ import annotations

import pytest
from xla_sentinel.core.graph import Graph
from xla_sentinel.programs import spmd
from xla_sentinel.programs.generator import BUFFER_OPS, generate
from xla_sentinel.programs.inputs import make_inputs
from xla_sentinel.spec.campaign import GeneratorSpec
from xla_sentinel.worker.handlers import run
from xla_sentinel.worker.protocol import Run
from xla_sentinel.xla import buffers

BUFFERS = GeneratorSpec(version=1, dtypes=["f32", "s32", "bf16"], maxOps=8, shapes=["buffers"])
PLAIN = GeneratorSpec(version=1, dtypes=["f32", "s32", "bf16"], maxOps=8)


def _opened(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes if n.family == "buffers"]


def test_the_family_chains_in_place_ops_and_donates_some_inputs() -> None:
    graphs = [generate(4, i, BUFFERS) for i in range(60)]
    opened = [g for g in graphs if _opened(g)]
    assert len(opened) >= 12
    assert all(set(_opened(g)) <= set(BUFFER_OPS) for g in opened)
    assert any(len(_opened(g)) >= 2 for g in opened)
    donating = [g for g in opened if g.donated]
    assert len(donating) >= 4
    # Only programs that opened with in-place ops donate, and only inputs an output of the
    # same shape and dtype can take over.
    assert all(_opened(g) for g in graphs if g.donated)
    for g in donating:
        outputs = [(g.values[o].shape, g.values[o].dtype) for o in g.outputs]
        for i in g.donated:
            assert (g.inputs[i].shape, g.inputs[i].dtype) in outputs


def test_donation_reaches_the_module_and_graph_json() -> None:
    g = next(g for i in range(60) if (g := generate(4, i, BUFFERS)).donated)
    assert buffers.donated_args(spmd.lower_text(g)) == g.donated
    again = Graph.from_json(g.to_json())
    assert again.donated == g.donated and again.to_json() == g.to_json()
    assert "donated" not in generate(4, 0, PLAIN).to_json()


def test_campaigns_without_the_family_keep_their_programs() -> None:
    for i in range(40):
        with_family = generate(4, i, BUFFERS)
        if not _opened(with_family):
            # Not drawn: the program of the plain campaign, node for node.
            assert with_family.to_json() == generate(4, i, PLAIN).to_json()
        assert not generate(4, i, PLAIN).donated


@pytest.mark.parametrize("index", range(8))
def test_family_programs_pass_the_buffer_checks_on_every_configuration(index: int) -> None:
    """No false positive on real compiles: with donation, the donated run agrees with the
    module without it and consumes the donated inputs; the rest stays bit-identical."""
    g = [g for i in range(80) if (g := generate(4, i, BUFFERS)).donated][index]
    text = spmd.lower_text(g)
    x = make_inputs({"seed": 4, "index": index, "special": index % 2 == 1}, g.inputs)
    for options in ({}, {"xla_backend_optimization_level": 0}, {"xla_cpu_use_fusion_emitters": False}):
        ran = run(Run(text, x, options))
        assert ran.buffers == [], (options, ran.buffers)
