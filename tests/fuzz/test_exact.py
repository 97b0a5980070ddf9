"""Which outputs the oracle judges bitwise (exact.py), and why the limits are there.

The analysis is pure; the last tests compile with XLA: the two shapes it refuses do differ
legally from op-by-op evaluation, and the generated outputs it accepts do not.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
import pytest
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.judge import oracle
from xla_sentinel.ops.exact import bitwise_values
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import generate
from xla_sentinel.programs.inputs import make_inputs
from xla_sentinel.spec.campaign import GeneratorSpec


def chain(inputs: list[str], *nodes: tuple[str, list[int], dict[str, Any], str]) -> Graph:
    """A graph: `inputs` dtypes (shape [8]), then nodes (op, args, attrs, result dtype)."""
    graph = Graph(values=[Value([8], d, input=i) for i, d in enumerate(inputs)])
    for op, args, attrs, dtype in nodes:
        graph.nodes.append(Node(op, args, attrs))
        graph.values.append(Value([8], dtype, tainted=True, node=len(graph.nodes) - 1))
    graph.outputs = [len(graph.values) - 1]
    return graph


def last(graph: Graph) -> bool:
    return bitwise_values(graph)[-1]


def test_a_conversion_moved_and_negated_is_bitwise() -> None:
    g = chain(["f32"], ("convert", [0], {"dtype": "bf16"}, "bf16"),
              ("rev", [1], {"dims": [0]}, "bf16"), ("neg", [2], {}, "bf16"))
    assert last(g)


def test_one_rounded_op_per_path_but_not_two() -> None:
    one = chain(["f32", "f32"], ("mul", [0, 1], {}, "f32"), ("max", [2, 0], {}, "f32"))
    two = chain(["f32", "f32"], ("mul", [0, 1], {}, "f32"), ("add", [2, 0], {}, "f32"))
    # Two rounded ops on different paths, joined by a selection: still one per path.
    side = chain(["f32", "f32"], ("mul", [0, 1], {}, "f32"), ("add", [0, 1], {}, "f32"),
                 ("min", [2, 3], {}, "f32"))
    assert last(one) and not last(two) and last(side)


def test_a_narrow_rounding_reaches_the_output_only_through_selections() -> None:
    kept = chain(["bf16", "bf16"], ("add", [0, 1], {}, "bf16"), ("max", [2, 0], {}, "bf16"))
    widened = chain(["bf16", "bf16"], ("add", [0, 1], {}, "bf16"), ("convert", [2], {"dtype": "f32"}, "f32"))
    compared = chain(["bf16", "bf16"], ("add", [0, 1], {}, "bf16"), ("compare_gt", [2, 0], {}, "bool"))
    # In f32 there is no excess precision on CPU: a compare after one rounded op is fixed.
    compared32 = chain(["f32", "f32"], ("add", [0, 1], {}, "f32"), ("compare_gt", [2, 0], {}, "bool"))
    assert last(kept) and not last(widened) and not last(compared) and last(compared32)


def test_lossless_conversions_are_not_rounding_points() -> None:
    small_ints = chain(["s8"], ("convert", [0], {"dtype": "f16"}, "f16"), ("floor", [1], {}, "f16"))
    wide_ints = chain(["s32"], ("convert", [0], {"dtype": "f16"}, "f16"), ("floor", [1], {}, "f16"))
    assert last(small_ints) and not last(wide_ints)


def test_approximations_and_accumulations_are_not_bitwise() -> None:
    assert not last(chain(["f32"], ("exp", [0], {}, "f32")))
    assert not last(chain(["f32"], ("reduce_window", [0], {"kind": "add", "window": [2], "strides": [1],
                                                           "padding": "SAME"}, "f32")))
    assert last(chain(["f32"], ("reduce_window", [0], {"kind": "max", "window": [2], "strides": [1],
                                                       "padding": "SAME"}, "f32")))


def test_integer_ops_after_floats_stay_bitwise() -> None:
    g = chain(["f32", "s32"], ("floor", [0], {}, "f32"), ("convert", [2], {"dtype": "s32"}, "s32"),
              ("mul", [3, 1], {}, "s32"), ("add", [4, 3], {}, "s32"))
    assert last(g)
    # ...but not after an inexact float op.
    g.nodes[0].op = "exp"
    assert not last(g)


def test_the_oracle_flags_one_ulp_in_a_bitwise_output_only() -> None:
    literal = np.array([1.0, 1.5, 3.0, 0.1], "bfloat16")
    ulp_low = np.array([1.0, 1.5, 3.0, 0.0996094], "bfloat16")  # last element one ulp down
    ref = literal.astype(np.float64)
    results = {"default": [ulp_low], "eager": [literal]}

    def judge(bitwise: bool) -> oracle.Judgement:
        return oracle.judge("default", results, [ref], [oracle.OutputInfo("bf16", True, bitwise)],
                            lambda: None)

    assert judge(False).verdict == "pass"  # within k*u normwise
    flagged = judge(True)
    assert flagged.verdict == "mismatch" and flagged.evidence["reason"] == "bitwise"
    assert flagged.evidence["max_ulp"] == 1 and flagged.evidence["wrong_elements"] == 1


def test_nan_signed_zero_and_subnormals_compare_as_values() -> None:
    a = np.array([np.nan, 0.0, 2.9e-39, 1.0], "bfloat16")
    b = np.array([np.nan, -0.0, 0.0, 1.0], "bfloat16")
    assert oracle.same_values(a, b, "bf16")
    assert not oracle.same_values(a, np.array([np.nan, 0.0, 0.0, 1.0078125], "bfloat16"), "bf16")
    assert oracle.has_subnormals([np.ones(3, np.int32), a]) and not oracle.has_subnormals([b])


# --- against XLA ---------------------------------------------------------------------------

def compiled_and_literal(graph: Graph, inputs: list[np.ndarray]) -> tuple[list, list]:
    compiled = jax.jit(evaluate.traced(graph))(*inputs)
    return [np.asarray(c) for c in compiled], evaluate.eager(graph, inputs)


@pytest.mark.parametrize("graph,dtype", [
    (chain(["f32", "f32"], ("mul", [0, 1], {}, "f32"), ("add", [2, 0], {}, "f32")), "f32"),
    (chain(["bf16", "bf16"], ("add", [0, 1], {}, "bf16"), ("convert", [2], {"dtype": "f32"}, "f32")), "bf16"),
])
def test_the_refused_shapes_do_differ_legally(graph: Graph, dtype: str) -> None:
    # Contraction into a fused multiply-add, and excess precision: if XLA stopped doing
    # either, the rule refusing the shape could be relaxed.
    graph.values = [dataclasses.replace(v, shape=(4096,)) for v in graph.values]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(4096).astype(np.float32).astype(oracle.NP_DTYPES[dtype])
              for _ in range(2)]
    (compiled,), (literal,) = compiled_and_literal(graph, inputs)
    assert not bitwise_values(graph)[-1]
    assert not oracle.same_values(compiled, literal, graph.values[-1].dtype)


def test_generated_bitwise_outputs_agree_bitwise_with_op_by_op(x64: None) -> None:
    spec = GeneratorSpec(version=1, maxOps=6)
    judged = 0
    for index in range(40):
        graph = generate(5, index, spec)
        inputs = make_inputs({"seed": 5, "index": index, "special": False}, graph.inputs)
        if oracle.has_subnormals(inputs):
            continue
        compiled, literal = compiled_and_literal(graph, inputs)
        for k, out in enumerate(graph.outputs):
            value = graph.values[out]
            if value.bitwise:
                judged += 1
                assert oracle.same_values(compiled[k], literal[k], value.dtype), (index, k)
    assert judged >= 20
