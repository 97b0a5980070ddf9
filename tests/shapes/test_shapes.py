"""Program shapes from real bugs (issue 13): narrow and wide index types that must clamp,
ranks up to 8, multi-output fusions, and the `generator.shapes` switch, on real XLA
compiles. Each op's agreement with float64 is checked for every entry by
tests/fuzz/test_ops.py and tests/fuzz/test_npref_ops.py."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from xla_sentinel.campaign import coverage
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.ops.entries.indices import INDEX_DTYPES
from xla_sentinel.ops.lax_builders import build
from xla_sentinel.ops.table import OPS
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import generate
from xla_sentinel.programs.inputs import make_inputs
from xla_sentinel.spec.campaign import DTYPES, SHAPE_FAMILIES, GeneratorSpec
from xla_sentinel.xla import compiler, hlo

pytestmark = pytest.mark.usefixtures("x64")
SHAPES = GeneratorSpec(version=1, dtypes=list(DTYPES), maxOps=12, shapes=list(SHAPE_FAMILIES))
CONFIGS = {"default": {}, "O0": {"xla_backend_optimization_level": 0},
           "no_fusion_emitters": {"xla_cpu_use_fusion_emitters": False}}


def _graph(op: str, shapes: list[tuple[list[int], str]], attrs: dict) -> Graph:
    """One node of `op` on fresh inputs of the given shapes and dtypes."""
    values = [Value(s, d, input=i) for i, (s, d) in enumerate(shapes)]
    out = OPS[op]
    graph = Graph(values=values, nodes=[Node(op, list(range(len(shapes))), attrs, out.discrete)])
    result = jax.eval_shape(lambda *xs: build(out, attrs, *xs), *evaluate.input_structs(graph))
    graph.outputs = [len(values)]
    graph.values.append(Value(result.shape, "f32", tainted=True, node=0))
    return graph


# s32 start -> (value in the index type, clamped start of a 3-wide window into 10).
# 1000 wraps to -24 in s8 and to 232 in u8; -1 is 255 in u8 and 65535... in u32.
STARTS = [-1, 5, 1000, -2**31]
EXPECTED = {
    "s8": [0, 5, 0, 0], "u8": [7, 5, 7, 0], "s16": [0, 5, 7, 0], "u32": [7, 5, 7, 7],
    "s64": [0, 5, 7, 0],
}


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_out_of_range_starts_clamp_in_every_index_width(index_dtype: str) -> None:
    x = np.arange(10, dtype=np.float32)
    slice_graph = _graph("dynamic_slice_idx", [([10], "f32"), ([], "s32")],
                         {"sizes": [3], "index_dtype": index_dtype})
    update_graph = _graph("dynamic_update_slice_idx", [([10], "f32"), ([3], "f32"), ([], "s32")],
                          {"index_dtype": index_dtype})
    gather_graph = _graph("gather_idx", [([10], "f32"), ([4, 1], "s32")], {"index_dtype": index_dtype})
    update = np.full(3, -1.0, np.float32)
    starts = np.asarray(STARTS, np.int32).reshape(4, 1)
    gathered_rows = np.clip(starts[:, 0].astype(np.int64).astype(np.dtype(
        {"s8": "i1", "u8": "u1", "s16": "i2", "u32": "u4", "s64": "i8"}[index_dtype])), 0, 9)

    for config, options in CONFIGS.items():
        for start, clamped in zip(STARTS, EXPECTED[index_dtype], strict=True):
            s = np.int32(start)
            (window,) = compiler.run_module(evaluate.lower_text(slice_graph), [x, s], options).outputs
            (written,) = compiler.run_module(evaluate.lower_text(update_graph), [x, update, s], options).outputs
            want = x.copy()
            want[clamped:clamped + 3] = update
            assert window.tolist() == x[clamped:clamped + 3].tolist(), (config, start)
            assert written.tolist() == want.tolist(), (config, start)
        (rows,) = compiler.run_module(evaluate.lower_text(gather_graph), [x, starts], options).outputs
        assert rows.tolist() == x[gathered_rows].tolist(), config


def test_the_index_type_reaches_xla() -> None:
    graph = _graph("dynamic_slice_idx", [([10], "f32"), ([], "s32")], {"sizes": [3], "index_dtype": "u8"})
    assert "tensor<ui8>" in evaluate.lower_text(graph)


def test_scatter_add_drops_rows_outside_the_operand_and_adds_repeated_ones() -> None:
    graph = _graph("scatter_add_idx", [([4, 2], "f32"), ([4, 1], "s32"), ([4, 2], "f32")],
                   {"index_dtype": "u8"})
    x = np.zeros((4, 2), np.float32)
    rows = np.array([[1], [1], [-1], [300]], np.int32)  # -1 is 255 and 300 is 44 in u8
    u = np.ones((4, 2), np.float32)
    for options in CONFIGS.values():
        (out,) = compiler.run_module(evaluate.lower_text(graph), [x, rows, u], options).outputs
        assert out.tolist() == [[0, 0], [2, 2], [0, 0], [0, 0]]


def test_shapes_are_drawn_only_where_the_campaign_names_them() -> None:
    plain = GeneratorSpec(version=1, dtypes=list(DTYPES), maxOps=12)
    families: set[str] = set()
    for index in range(60):
        assert not any(n.family for n in generate(2, index, plain).nodes)
        families |= {n.family for n in generate(2, index, SHAPES).nodes if n.family}
    assert families == set(SHAPE_FAMILIES) - {"multi_output"}
    only_loops = GeneratorSpec(version=1, dtypes=["f32"], maxOps=12, shapes=["loops"])
    drawn = {n.family for i in range(30) for n in generate(2, i, only_loops).nodes}
    assert drawn == {None, "loops"}


def test_high_ranks_have_size_one_dimensions_and_compile() -> None:
    spec = GeneratorSpec(version=1, dtypes=["f32", "bf16", "s32"], maxOps=8, maxRank=8)
    high = 0
    for index in range(40):
        graph = generate(4, index, spec)
        ranks = [len(v.shape) for v in graph.values]
        assert max(ranks) <= 8
        if max(ranks) < 6:
            continue
        high += 1
        big = [v.shape for v in graph.values if len(v.shape) >= 6]
        assert all(s.count(1) >= 1 for s in big)
        inputs = make_inputs({"seed": 4, "index": index}, graph.inputs)
        outs = compiler.run_module(evaluate.lower_text(graph), inputs, {}).outputs
        assert [o.shape for o in outs] == [graph.values[v].shape for v in graph.outputs]
        if high == 4:
            break
    assert high == 4


def test_multi_output_opening_returns_a_value_it_also_fuses_into_consumers() -> None:
    spec = GeneratorSpec(version=1, dtypes=["f32", "bf16"], maxOps=6, shapes=["multi_output"])
    multi_fusions = 0
    opened = 0
    for index in range(40):
        graph = generate(3, index, spec)
        if "multi_output" not in coverage.shape_coverage(graph):
            continue
        opened += 1
        inputs = make_inputs({"seed": 3, "index": index}, graph.inputs)
        ex = compiler.run_module(evaluate.lower_text(graph), inputs, {}, want_hlo=True)
        want = evaluate.eager(graph, inputs)
        for got, ref in zip(ex.outputs, want, strict=True):
            np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=0.05, atol=0.05)
        module = hlo.parse(ex.optimized_hlo)
        multi_fusions += any(i.opcode == "fusion" and i.shape_text.startswith("(")
                             for _, i in module.instructions())
        if opened >= 6 and multi_fusions:
            break
    assert opened >= 6
    assert multi_fusions >= 1


def test_coverage_counts_each_shape() -> None:
    total = coverage.Coverage()
    for index in range(200):
        total.add(coverage.graph_coverage(generate(5, index, SHAPES)))
    shapes = total.to_json()["shapes"]
    assert set(SHAPE_FAMILIES) <= set(shapes)
    assert {f"index:{d}" for d in INDEX_DTYPES} <= set(shapes)
