"""Outputs that IEEE 754 determines bitwise, for which the oracle drops its tolerance.

The normwise oracle allows k*u (8u for bf16 and f16): a conversion that truncates instead
of rounding to nearest even errs by at most one bf16 ulp (2u) and hides under it. But
many results have one correct answer: data movement, selections, max and min, compares,
rounding to integers, conversions, integer arithmetic, and a single correctly rounded
+, - or *. An output built only from those must equal, value for value, the op-by-op
evaluation at the program's own precision (the `eager` reference).

Two compiler freedoms make results of such ops differ legally; both measured on XLA:CPU
0.10.2 (compiled against op by op, 4096 random elements):
- Contraction: `x*y + x` in f32 differs in 1202 elements (a fused multiply-add). So every
  path from the inputs to a bitwise output crosses at most one rounded op.
- Excess precision (`xla_allow_excess_precision`, on by default): bf16 and f16 arithmetic
  is done in f32, and the rounding back may be skipped: `f32(a + b)` of bf16 `a`, `b`
  differs in 2195 elements. So a value rounded to bf16 or f16 (by arithmetic or a lossy
  convert) may reach the output only through ops that commute with rounding (`selects`:
  movement, selection, max, min, neg, abs) at the same dtype: the output's own rounding
  then gives the same result whether the inner one was skipped or not.

Pure: `node_state` knows only tags and dtypes, so the bisector applies the same rule to
StableHLO cuts (bisect/context.py); `bitwise_values` applies it to a generated graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from xla_sentinel.core.graph import Graph, Node
from xla_sentinel.core.names import FLOATS

NARROW = ("bf16", "f16")
# Sources a convert to bf16 or f16 represents exactly (integers up to 255).
EXACT_IN_NARROW = ("bool", "s8", "u8")


@dataclass(frozen=True)
class State:
    ok: bool = True
    rounded: int = 0  # rounded float ops on the longest path from the inputs
    excess: bool = False  # may hold more precision than its dtype (a skipped rounding)


NOT_BITWISE = State(ok=False)


def node_state(tags: set[str] | frozenset[str], dtype: str, arg_dtypes: list[str],
               args: list[State], convert: bool = False) -> State:
    """The state of an op's result from its operands' states, for any IR: `tags` from
    {"exact", "selects", "rounded"} (OpDef.tags), `convert` for a type conversion."""
    if not all(a.ok for a in args):
        return NOT_BITWISE
    rounded = max((a.rounded for a in args), default=0)
    if dtype not in FLOATS and not any(d in FLOATS for d in arg_dtypes):
        return State(rounded=rounded)  # integer and bool ops are exact (wrapping)
    excess = any(a.excess for a in args)
    # The data operands share the result's dtype (not a select's predicate, nor top_k's
    # indices, which depend on how values compare).
    if "selects" in tags and dtype in arg_dtypes:
        return State(rounded=rounded, excess=excess)
    if excess or not tags & {"exact", "rounded"}:
        return NOT_BITWISE
    floats_in = any(d in FLOATS for d in arg_dtypes)
    if "rounded" in tags and floats_in:
        rounded += 1
        if rounded > 1:
            return NOT_BITWISE
    lossy_convert = convert and arg_dtypes[0] not in (dtype, *EXACT_IN_NARROW)
    rounds_here = dtype in NARROW and (("rounded" in tags and floats_in) or lossy_convert)
    return State(rounded=rounded, excess=rounds_here)


def _graph_node_state(node: Node, dtype: str, arg_dtypes: list[str], args: list[State]) -> State:
    # Here, not at the top: the coordinator imports this module for `node_state` alone
    # (bisect/context.py), and the table would bring every numpy form and scipy with it.
    from xla_sentinel.ops.table import OPS

    tags = set(OPS[node.op].tags)
    if node.attrs.get("kind") == "add":
        tags.discard("selects")  # reduce_window or scatter adding up, not choosing
    return node_state(tags, dtype, arg_dtypes, args, convert=node.op == "convert")


def bitwise_values(graph: Graph) -> list[bool]:
    """Per value of the graph: is it determined bitwise by the program's inputs?"""

    def apply(v: int, node: Node, args: list[State]) -> State:
        return _graph_node_state(node, graph.values[v].dtype,
                                 [graph.values[a].dtype for a in node.args], args)

    states = graph.run([State()] * len(graph.inputs), apply, returns=range(len(graph.values)))
    return [s.ok for s in states]


def annotate(graph: Graph) -> Graph:
    """Set each value's `bitwise` (in place; returns the graph)."""
    for value, flag in zip(graph.values, bitwise_values(graph), strict=True):
        value.bitwise = flag
    return graph
