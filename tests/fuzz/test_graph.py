"""The typed program model (core/graph.py): graph.json is what it always was, byte for
byte, the one walk visits values in order, and the protocol's JSON form carries graphs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from xla_sentinel.core.graph import Graph, Node, ShardingPlan, Value
from xla_sentinel.core.program import Program, ProgramError
from xla_sentinel.ops.exact import annotate
from xla_sentinel.programs.generator import generate
from xla_sentinel.spec.campaign import DTYPES, SHAPE_FAMILIES, GeneratorSpec
from xla_sentinel.worker import protocol

pytestmark = pytest.mark.usefixtures("x64")

# graph.json of a two-op program as the generator has always written it: keys in this
# order, "input" or "node", "bitwise" once annotated, "family" only on a family's op,
# "sharding" only on a partitioned program (its regions keyed by value index as text).
GRAPH_JSON = {
    "values": [{"shape": [4, 8], "dtype": "f32", "tainted": False, "input": 0, "bitwise": True},
               {"shape": [], "dtype": "s32", "tainted": False, "input": 1, "bitwise": True},
               {"shape": [4, 8], "dtype": "f32", "tainted": True, "node": 0, "bitwise": False},
               {"shape": [4, 8], "dtype": "f32", "tainted": True, "node": 1, "bitwise": True}],
    "nodes": [{"op": "exp", "args": [0], "attrs": {}, "discrete": False},
              {"op": "loop_shift", "args": [2], "attrs": {"loop": "scan", "axis": 0}, "discrete": False,
               "family": "loops"}],
    "outputs": [3, 2],
    "sharding": {"devices": 4, "mesh": [2, 2], "axes": ["x", "y"], "partitioner": "gspmd",
                 "inputs": [["x", None], []], "outputs": [[None, "y"], [None, None]],
                 "regions": {"2": {"kind": "psum_broadcast", "axis": "x", "source": 1}}},
}


def test_graph_json_round_trips_key_for_key() -> None:
    graph = Graph.from_json(GRAPH_JSON)
    assert json.dumps(graph.to_json()) == json.dumps(GRAPH_JSON)
    assert graph.values[2] == Value((4, 8), "f32", tainted=True, node=0, bitwise=False)
    assert graph.nodes[1].family == "loops" and graph.nodes[0].family is None
    assert graph.sharding is not None and graph.sharding.regions == {2: GRAPH_JSON["sharding"]["regions"]["2"]}
    assert [v.input for v in graph.inputs] == [0, 1] and graph.op_names() == ["exp", "loop_shift"]
    assert graph.producer(3) is graph.nodes[1] and graph.producer(0) is None


def test_keys_are_absent_where_graph_json_never_had_them() -> None:
    graph = Graph(values=[Value([3], "f32", input=0), Value([3], "f32", tainted=True, node=0)],
                  nodes=[Node("neg", [0])], outputs=[1])
    d = graph.to_json()
    assert list(d) == ["values", "nodes", "outputs"]  # one device: no "sharding"
    assert [list(v) for v in d["values"]] == [["shape", "dtype", "tainted", "input"],
                                             ["shape", "dtype", "tainted", "node"]]  # not annotated
    assert list(d["nodes"][0]) == ["op", "args", "attrs", "discrete"]  # no family
    annotate(graph)
    assert [v["bitwise"] for v in graph.to_json()["values"]] == [True, True]


def test_a_value_is_an_input_or_a_result() -> None:
    with pytest.raises(ValueError):
        Value([1], "f32")
    with pytest.raises(ValueError):
        Value([1], "f32", input=0, node=0)


@pytest.mark.parametrize("spec", [
    GeneratorSpec(dtypes=list(DTYPES), maxOps=12, maxRank=8, shapes=list(SHAPE_FAMILIES), devices=1),
    GeneratorSpec(maxOps=8, devices=4, sharded=1.0),
], ids=["shapes", "sharded"])
def test_generated_graphs_survive_program_folders_byte_for_byte(tmp_path: Path, spec: GeneratorSpec) -> None:
    for index in range(12):
        graph = generate(2, index, spec)
        assert (graph.sharding is not None) == (spec.device_count() > 1)
        folder = tmp_path / str(index)
        inputs = [np.zeros(v.shape, np.float32) for v in graph.inputs]
        params = ", ".join(f"%arg{i}: tensor<{''.join(f'{d}x' for d in v.shape)}f32>"
                           for i, v in enumerate(graph.inputs))
        module = f"func.func public @main({params}) -> (tensor<f32>) {{\n}}\n"
        Program(str(index), module, inputs, ["f32"] * len(inputs), graph=graph).save(folder)
        text = (folder / "graph.json").read_text()
        assert text == json.dumps(graph.to_json())
        loaded = Program.load(folder).graph
        assert loaded is not None and json.dumps(loaded.to_json()) == text
        assert loaded.to_json() == json.loads(text)


def test_a_damaged_graph_json_names_the_file(tmp_path: Path) -> None:
    graph = Graph.from_json(GRAPH_JSON)
    inputs = [np.zeros((4, 8), np.float32), np.zeros((), np.int32)]
    module = "func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<i32>) -> (tensor<f32>) {\n}\n"
    Program("p", module, inputs, ["f32", "s32"], graph=graph).save(tmp_path)
    (tmp_path / "graph.json").write_text(json.dumps({"values": [{"dtype": "f32"}], "nodes": [], "outputs": []}))
    with pytest.raises(ProgramError, match="graph.json"):
        Program.load(tmp_path)


def test_run_feeds_inputs_and_applies_nodes_in_value_order() -> None:
    graph = Graph.from_json(GRAPH_JSON)
    seen: list[str] = []

    def load(v: int, x: str) -> str:
        seen.append(f"load {v}")
        return x.upper()

    def apply(v: int, node: Node, args: list[str]) -> str:
        seen.append(f"apply {v}")
        return f"{node.op}({', '.join(args)})"

    assert graph.run(["a", "b"], apply, load) == ["loop_shift(exp(A))", "exp(A)"]
    assert seen == ["load 0", "load 1", "apply 2", "apply 3"]
    assert graph.run(["a", "b"], apply, returns=range(4)) == ["a", "b", "exp(a)", "loop_shift(exp(a))"]


def test_the_wire_form_carries_graph_json() -> None:
    request = protocol.from_wire({"cmd": "lower", "graph": GRAPH_JSON})
    assert isinstance(request, protocol.Lower) and request.graph == Graph.from_json(GRAPH_JSON)
    reply = protocol.Generated(module="m", graph=request.graph, inputs=[], input_dtypes=[], recipe={})
    assert protocol.to_wire(reply)["graph"] == GRAPH_JSON
    assert isinstance(ShardingPlan.from_json(GRAPH_JSON["sharding"]).mesh, tuple)
