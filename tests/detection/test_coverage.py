"""Coverage numbers are correct on a hand-built program, and sum correctly over programs."""

from __future__ import annotations

import re

import numpy as np
from xla_sentinel.campaign import coverage
from xla_sentinel.core.graph import Graph
from xla_sentinel.programs import evaluate
from xla_sentinel.worker import handlers
from xla_sentinel.worker.protocol import PassEffects
from xla_sentinel.xla import compiler

# x, y: f32[4, 8] -> add -> exp -> reduce_sum over axis 1 -> f32[4]; and add -> tanh (as
# graph.json writes it).
HAND_BUILT = {
    "values": [
        {"shape": [4, 8], "dtype": "f32", "tainted": False, "input": 0},
        {"shape": [4, 8], "dtype": "f32", "tainted": False, "input": 1},
        {"shape": [4, 8], "dtype": "f32", "tainted": True, "node": 0},
        {"shape": [4, 8], "dtype": "f32", "tainted": True, "node": 1},
        {"shape": [4], "dtype": "f32", "tainted": True, "node": 2},
        {"shape": [4, 8], "dtype": "f32", "tainted": True, "node": 3},
    ],
    "nodes": [
        {"op": "add", "args": [0, 1], "attrs": {}, "discrete": False},
        {"op": "exp", "args": [2], "attrs": {}, "discrete": False},
        {"op": "reduce_sum", "args": [3], "attrs": {"axes": [1]}, "discrete": False},
        {"op": "tanh", "args": [2], "attrs": {}, "discrete": False},
    ],
    "outputs": [4, 5],
}


def _inputs() -> list[np.ndarray]:
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    y = np.full((4, 8), 0.25, np.float32)
    x[0, 0], x[1, 1], x[2, 2] = np.nan, -0.0, 2.5  # nan, negative zero, an x.5 tie
    y[3, 3] = np.float32(1e-40)  # subnormal in f32
    return [x, y]


def test_coverage_of_a_hand_built_program_is_exact() -> None:
    graph = Graph.from_json(HAND_BUILT)
    module = evaluate.lower_text(graph)
    ex = compiler.run_module(module, _inputs(), {}, want_hlo=True)
    cov = coverage.program_coverage(graph, module, _inputs(), ex.optimized_hlo)

    assert cov["ops"] == {"add": 1, "exp": 1, "reduce_sum": 1, "tanh": 1}
    assert cov["op_pairs"] == {"add>exp": 1, "exp>reduce_sum": 1, "add>tanh": 1}
    assert cov["dtypes"] == ["f32"]
    assert cov["ranks"] == [1, 2]
    assert cov["special"] == ["nan", "neg_zero", "subnormal", "tie_half"]
    # Fusion counts agree with an independent count over the optimized HLO text.
    kinds = re.findall(r"= \S+ fusion\(.*kind=(k\w+)", ex.optimized_hlo)
    assert kinds, "XLA fused nothing: the program no longer exercises fusion"
    assert cov["fusion_kinds"] == {k: kinds.count(k) for k in set(kinds)}
    # The exp and the reduction end up inside fusions; what is fused is recorded per kind.
    fused_opcodes = {f.split(":", 1)[1] for f in cov["fused"]}
    assert {"exponential", "add"} <= fused_opcodes


def test_special_kinds_of_integers_and_clean_inputs() -> None:
    ints = np.array([np.iinfo(np.int8).min, 0, 5], np.int8)
    assert coverage.special_kinds([ints]) == {"int_min"}
    assert coverage.special_kinds([np.array([255], np.uint8)]) == {"int_max"}
    assert coverage.special_kinds([np.ones(4, np.float32), np.zeros(3, bool)]) == set()
    assert coverage.special_kinds([np.array([np.inf, 3e38], np.float32)]) == {"inf", "huge"}


def test_module_coverage_reads_stablehlo_ops_dtypes_and_ranks() -> None:
    module = evaluate.lower_text(Graph.from_json(HAND_BUILT))
    cov = coverage.module_coverage(module)
    assert cov["ops"]["exponential"] == 1 and cov["ops"]["tanh"] == 1 and cov["ops"]["add"] >= 1
    assert cov["dtypes"] == ["f32"] and {1, 2} <= set(cov["ranks"])


def test_campaign_totals_sum_programs() -> None:
    a = {"ops": {"add": 2, "exp": 1}, "op_pairs": {"add>exp": 1}, "dtypes": ["f32"], "ranks": [2],
         "special": ["nan"], "fusion_kinds": {"kLoop": 2}, "fused": ["kLoop:add"]}
    b = {"ops": {"add": 1}, "op_pairs": {}, "dtypes": ["f32", "s32"], "ranks": [0, 2], "special": [],
         "passes_changed": ["fusion"]}
    total = coverage.total([{"coverage": a}, {"coverage": b}, {"error": "no coverage"}]).to_json()
    assert total["programs"] == 2 and total["programs_with_hlo"] == 1
    assert total["programs_pass_sampled"] == 1
    assert total["ops"] == {"add": 3, "exp": 1}
    assert total["dtypes"] == {"f32": 2, "s32": 1}
    assert total["ranks"] == {"2": 2, "0": 1}
    assert total["fusion_kinds"] == {"kLoop": 2} and total["passes_changed"] == {"fusion": 1}


def test_pass_effects_name_the_passes_that_changed_the_module() -> None:
    module = evaluate.lower_text(Graph.from_json(HAND_BUILT))
    changed = handlers.pass_effects(PassEffects(module, ["fusion", "dot-library-rewriter"])).changed
    # Without fusion the elementwise chain is no longer fused; there is no dot to rewrite.
    assert changed == ["fusion"]
