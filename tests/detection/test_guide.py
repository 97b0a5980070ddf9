"""Guided generation stays valid (every program compiles and runs) and does steer."""

from __future__ import annotations

from collections import Counter

import pytest
from xla_sentinel.campaign import coverage
from xla_sentinel.campaign.guide import WARMUP, Guide
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import generate
from xla_sentinel.programs.inputs import make_inputs
from xla_sentinel.spec.campaign import GeneratorSpec
from xla_sentinel.xla import compiler

pytestmark = pytest.mark.usefixtures("x64")

SPEC = GeneratorSpec(version=1, minOps=2, maxOps=12)


def _warm_guide(seed: int, n: int) -> Guide:
    """A guide that has seen `n` plain programs, one of them a near miss."""
    guide = Guide(seed)
    for i in range(n):
        g = generate(seed, i, SPEC)
        cov = coverage.graph_coverage(g)
        cov["fusion_kinds"] = {"kLoop": 1}
        guide.observe(i, cov, g, 0.5 if i == 3 else 0.001)
    return guide


@pytest.mark.parametrize("chunk", range(2))
def test_guided_programs_compile_and_run(chunk: int) -> None:
    guide = _warm_guide(7, 20)
    neighbours = 0
    for index in range(100 + chunk * 12, 112 + chunk * 12):
        bias = guide.bias(index)
        assert bias is not None
        neighbours += "prefix" in bias
        graph = generate(7, index, SPEC, bias)
        inputs = make_inputs({"seed": 7, "index": index, "special": index % 2 == 0}, graph.inputs)
        outs = compiler.run_module(evaluate.lower_text(graph), inputs, {}).outputs
        assert [o.shape for o in outs] == [graph.values[v].shape for v in graph.outputs]
        guide.observe(index, coverage.graph_coverage(graph), graph, 0.0)
    assert neighbours >= 1, "no neighbour of the near miss was drawn"


def test_heavily_exercised_ops_and_dtypes_are_drawn_less() -> None:
    guide = _warm_guide(9, WARMUP)
    # Pretend a campaign has drawn add and f32 a thousand times.
    for i in range(1000):
        guide.observe(10_000 + i, {"ops": {"add": 1}, "dtypes": ["f32"]}, None, None)
    spec = GeneratorSpec(version=1, minOps=6, maxOps=12, dtypes=["f32", "s32"])
    plain, guided = Counter(), Counter()
    plain_dt, guided_dt = Counter(), Counter()
    for index in range(60):
        p = generate(9, index, spec)
        g = generate(9, index, spec, {k: v for k, v in guide.bias(index).items() if k != "prefix"})
        plain.update(p.op_names())
        guided.update(g.op_names())
        plain_dt.update(v.dtype for v in p.inputs)
        guided_dt.update(v.dtype for v in g.inputs)
    assert guided["add"] < plain["add"] / 3
    assert guided_dt["f32"] < plain_dt["f32"] / 3


def test_neighbour_keeps_the_prefix_of_the_near_miss() -> None:
    parent = generate(5, 11, SPEC)
    keep = max(1, len(parent.nodes) - 1)
    child = generate(5, 500, SPEC, {"prefix": parent, "keep": keep})
    assert child.nodes[:keep] == parent.nodes[:keep]
    assert len(child.nodes) > keep
    assert child.nodes[keep:] != parent.nodes[keep:]  # a fresh tail, not a copy


def test_guide_is_plain_during_warmup_and_deterministic_after() -> None:
    guide = _warm_guide(3, WARMUP - 1)
    assert guide.bias(50) is None
    guide = _warm_guide(3, WARMUP + 4)
    assert guide.bias(50) == guide.bias(50)
    assert Guide.describe(None) == {"guided": False}
