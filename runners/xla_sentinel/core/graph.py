"""The program graph: values and op nodes of a generated program, JSON-serializable.

A generated program is built as this graph (programs/generator.py) so that it can be
lowered (programs/evaluate.py, programs/spmd.py), re-evaluated op by op, promoted to
float64, or perturbed for the noise model, and so that the bisector and the references
read the same structure. No jax here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Graph:
    """values[i] is {"shape", "dtype", "tainted", "input": k or "node": j, and, once the
    graph is complete, "bitwise" (exact.py)}."""

    values: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    # The SPMD plan of a partitioned program (runners/xla_sentinel/programs/spmd.py); None runs on one device.
    sharding: dict[str, Any] | None = None

    @property
    def inputs(self) -> list[dict[str, Any]]:
        return [v for v in self.values if "input" in v]

    def to_json(self) -> dict[str, Any]:
        d = {"values": self.values, "nodes": self.nodes, "outputs": self.outputs}
        return {**d, "sharding": self.sharding} if self.sharding else d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Graph:
        return cls(values=list(d["values"]), nodes=list(d["nodes"]), outputs=list(d["outputs"]),
                   sharding=d.get("sharding"))

    def op_names(self) -> list[str]:
        return [n["op"] for n in self.nodes]
