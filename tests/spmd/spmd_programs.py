"""Small SPMD programs built by hand: one op and a plan with the region under test.

Named uniquely (not conftest helpers) because test folders share one import namespace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from xla_sentinel.core.graph import Graph, Node, ShardingPlan, Value
from xla_sentinel.worker.client import Worker
from xla_sentinel.worker.protocol import GraphReference, Lower, Run

# A plugin that stalls a host process while the file named by SLOW_ENV exists
# (conftest.py's `slow_flag`): how the host tests hold a host inside a program.
SLOW_PLUGIN = str(Path(__file__).with_name("slow_host_plugin.py"))
SLOW_ENV = "XLA_SENTINEL_TEST_SLOW_HOST"

TIMEOUT = 120.0


def one_op_graph(shape: tuple[int, ...], dtype: str = "f32") -> Graph:
    """`x + y` (`x | y` for bool) on two inputs of `shape`."""
    return Graph(values=[Value(shape, dtype, input=0), Value(shape, dtype, input=1),
                         Value(shape, dtype, tainted=dtype in ("f32", "bf16", "f16"), node=0)],
                 nodes=[Node("or" if dtype == "bool" else "add", [0, 1])],
                 outputs=[2])


def with_region(graph: Graph, mesh: list[int], region: dict[str, Any], partitioner: str = "shardy",
                inputs: list[list[str | None]] | None = None,
                output: list[str | None] | None = None) -> Graph:
    """`graph` with a plan on `mesh` holding `region` after its output value."""
    axes = ["x", "y"][:len(mesh)]
    rank = len(graph.values[graph.outputs[0]].shape)
    graph.sharding = ShardingPlan(devices=int(np.prod(mesh)), mesh=mesh, axes=axes, partitioner=partitioner,
                                  inputs=inputs or [[None] * rank for _ in graph.inputs],
                                  outputs=[output or [None] * rank], regions={graph.outputs[0]: region})
    return graph


def inputs_for(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for v in graph.inputs:
        if v.dtype == "bool":
            out.append(rng.random(v.shape) < 0.5)
        elif v.dtype in ("s32", "u8"):
            out.append(rng.integers(0, 100, v.shape).astype({"s32": np.int32, "u8": np.uint8}[v.dtype]))
        else:
            out.append(rng.normal(size=v.shape).astype(np.float32))
    return out


def lower_and_run(worker: Worker, graph: Graph, inputs: list[np.ndarray]) -> dict[str, Any]:
    """In the worker (which has the virtual devices): the graph's partitioned module, its
    outputs on the plan's devices, and the same program's outputs unsharded on one device."""
    module = worker.call(Lower(graph), TIMEOUT).module
    sharded = worker.call(Run(module, inputs, {}), TIMEOUT).outputs
    unsharded = worker.call(GraphReference("unsharded", graph, inputs), TIMEOUT).outputs
    return {"module": module, "sharded": sharded, "unsharded": unsharded}


def region_between_ops(partitioner: str, region: dict[str, Any]) -> Graph:
    """`sin(x + y) * y` on 4x6 f32 over a 2x2 mesh, `region` after the sin, `y` split over
    x and the result over both axes: a region with ops before and after it."""
    graph = Graph(values=[Value((4, 6), "f32", input=0), Value((4, 6), "f32", input=1),
                          *[Value((4, 6), "f32", tainted=True, node=j) for j in range(3)]],
                  nodes=[Node("add", [0, 1], {}),
                         Node("sin", [2], {}),
                         Node("mul", [3, 1], {})],
                  outputs=[4])
    graph.sharding = ShardingPlan(devices=4, mesh=(2, 2), axes=("x", "y"), partitioner=partitioner,
                                  inputs=[[None, None], ["x", None]], outputs=[["x", "y"]],
                                  regions={3: region})
    return graph
