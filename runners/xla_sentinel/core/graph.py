"""The program graph: the values and op nodes of a generated program, and its SPMD plan.

A generated program is built as this graph (programs/generator.py) so that it can be
lowered (programs/evaluate.py, programs/spmd.py), re-evaluated op by op, promoted to
float64, or perturbed for the noise model, and so that the references, coverage, the
oracle and the known-bug rules read the same structure. `Graph.run` is the one walk over
it: every interpreter of a graph (jax tracing, the eager and float64 references, the noise
model, the SPMD lowering, the bitwise tags of ops/exact.py) is that walk with its own
`apply`. On disk, and in the worker protocol's JSON form, the graph is graph.json
(`Graph.to_json`, `Graph.from_json`). No jax and no numpy here: the coordinator reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Value:
    """One value of the program: a parameter (`input`, its position among @main's
    arguments) or the result of an op (`node`, the index of the node that computes it)."""

    shape: tuple[int, ...]
    dtype: str
    # True when the value depends on float arithmetic, so that even an integer result can
    # legally differ between configurations (a float rounding flips a floor or a compare).
    tainted: bool = False
    input: int | None = None
    node: int | None = None
    # Determined bitwise by the program's inputs (ops/exact.py `annotate`); None until the
    # generator has annotated the finished graph, and then absent from graph.json.
    bitwise: bool | None = None

    def __post_init__(self) -> None:
        # Shapes arrive as JSON lists or jax tuples; one form, so that shapes compare equal.
        self.shape = tuple(int(d) for d in self.shape)
        if (self.input is None) == (self.node is None):
            raise ValueError(f"a value is an input or an op's result, not both or neither: {self}")

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"shape": list(self.shape), "dtype": self.dtype, "tainted": self.tainted}
        if self.input is not None:
            d["input"] = self.input
        else:
            d["node"] = self.node
        if self.bitwise is not None:
            d["bitwise"] = self.bitwise
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Value:
        return cls(shape=tuple(d["shape"]), dtype=d["dtype"], tainted=d.get("tainted", False),
                   input=d.get("input"), node=d.get("node"), bitwise=d.get("bitwise"))


@dataclass
class Node:
    """One op of the program: its op-table name (ops/table.py), the values it reads and
    the attributes its builder takes (open-ended: each op has its own)."""

    op: str
    args: list[int]
    attrs: dict[str, Any] = field(default_factory=dict)
    # The op is rank-discrete (OpDef.discrete): legal rounding may flip its result.
    discrete: bool = False
    # The program shape from real bugs the op belongs to (OpDef.family), kept here so that
    # coverage counts shapes without the op table (and its jax-side imports).
    family: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op, "args": list(self.args), "attrs": self.attrs,
                             "discrete": self.discrete}
        if self.family is not None:
            d["family"] = self.family
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Node:
        return cls(op=d["op"], args=list(d["args"]), attrs=dict(d.get("attrs", {})),
                   discrete=d.get("discrete", False), family=d.get("family"))


# A PartitionSpec as graph.json writes it: per dimension, the mesh axis split along it.
Spec = list[str | None]


@dataclass
class ShardingPlan:
    """How an SPMD program is partitioned (programs/spmd.py `plan`): a device mesh, a
    PartitionSpec per input and output, and identity regions applied after chosen values
    (sharding constraints and shard_map regions of collectives)."""

    devices: int
    mesh: tuple[int, ...]
    axes: tuple[str, ...]
    partitioner: str  # "shardy" or "gspmd" (spec.campaign.PARTITIONERS)
    inputs: list[Spec]
    outputs: list[Spec]
    # Value index -> region. A region is a dict of its kind's own fields ("kind" plus
    # "spec", "axis", "dim", "source", "shift" or "to"), as graph.json writes it.
    regions: dict[int, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mesh = tuple(int(n) for n in self.mesh)
        self.axes = tuple(self.axes)

    def to_json(self) -> dict[str, Any]:
        return {"devices": self.devices, "mesh": list(self.mesh), "axes": list(self.axes),
                "partitioner": self.partitioner, "inputs": [list(s) for s in self.inputs],
                "outputs": [list(s) for s in self.outputs],
                # JSON object keys are strings.
                "regions": {str(v): r for v, r in self.regions.items()}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ShardingPlan:
        return cls(devices=int(d["devices"]), mesh=tuple(d["mesh"]), axes=tuple(d["axes"]),
                   partitioner=d["partitioner"], inputs=[list(s) for s in d["inputs"]],
                   outputs=[list(s) for s in d["outputs"]],
                   regions={int(v): dict(r) for v, r in d.get("regions", {}).items()})


@dataclass
class Graph:
    """A program: `values` in evaluation order (each input or op result after the values
    it reads), `nodes` (the ops), `outputs` (indices into `values`, @main's results in
    order) and, for a partitioned program, its `sharding` plan (None runs on one device)."""

    values: list[Value] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    sharding: ShardingPlan | None = None
    # Parameter numbers the program donates (jax donate_argnums; the "buffers" shape
    # family draws them, docs/detection.md "Buffer corruption"); none by default.
    donated: list[int] = field(default_factory=list)

    @property
    def inputs(self) -> list[Value]:
        """The parameters, in argument order."""
        return [v for v in self.values if v.input is not None]

    def op_names(self) -> list[str]:
        return [n.op for n in self.nodes]

    def producer(self, v: int) -> Node | None:
        """The node that computes value `v`; None for an input."""
        node = self.values[v].node
        return None if node is None else self.nodes[node]

    def run(self, inputs: Sequence[T], apply: Callable[[int, Node, list[T]], T],
            load: Callable[[int, T], T] | None = None,
            returns: Iterable[int] | None = None) -> list[T]:
        """Walk the program once, value by value in order: an input value is
        `load(v, inputs[k])` (the argument itself without `load`), an op result is
        `apply(v, node, args)` with the node's argument values. Returns the values
        `returns` (value indices; the graph's outputs by default).

        The one interpreter loop: what an evaluation does is its `apply` alone, and the
        order in which `apply` is called (the noise model draws from its rng there) is the
        order of `values`."""
        vals: list[T] = []
        for v, value in enumerate(self.values):
            if value.node is None:
                x = inputs[value.input]  # type: ignore[index]
                vals.append(x if load is None else load(v, x))
            else:
                node = self.nodes[value.node]
                vals.append(apply(v, node, [vals[a] for a in node.args]))
        return [vals[i] for i in (self.outputs if returns is None else returns)]

    def to_json(self) -> dict[str, Any]:
        """graph.json: `values`, `nodes`, `outputs`, `sharding` for a partitioned program
        and `donated` for one that donates inputs."""
        d: dict[str, Any] = {"values": [v.to_json() for v in self.values],
                             "nodes": [n.to_json() for n in self.nodes],
                             "outputs": list(self.outputs)}
        if self.sharding is not None:
            d["sharding"] = self.sharding.to_json()
        if self.donated:
            d["donated"] = list(self.donated)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Graph:
        sharding = d.get("sharding")
        return cls(values=[Value.from_json(v) for v in d["values"]],
                   nodes=[Node.from_json(n) for n in d["nodes"]],
                   outputs=[int(o) for o in d["outputs"]],
                   sharding=ShardingPlan.from_json(sharding) if sharding else None,
                   donated=[int(i) for i in d.get("donated", [])])
