"""What the engine reads from StableHLO text without parsing it (no jax, no MLIR): how many
devices a module is partitioned over, which ops of a module's info only annotate
shardings, and the location name the bisector's cuts give each kept op (xla/cuts.py
writes it, bisect/fusion.py finds it in the optimized HLO's metadata)."""

from __future__ import annotations

import re
from typing import Any

from xla_sentinel.core.names import FLOATS

# The location of op i of a cut (`sentinel.op<i>`); XLA copies it into each instruction's
# op_name metadata.
LOCATION_PREFIX = "sentinel.op"

# Ops that only say how a value is laid out over the devices, computing nothing: GSPMD's
# custom calls and Shardy's constraint and reshard ops.
_ANNOTATION = re.compile(r"custom_call @(?:Sharding|SPMDFullToShardShape|SPMDShardToFullShape)\b"
                         r"|sdy\.(?:sharding_constraint|reshard)\b")


_PARTITIONS = re.compile(r"mhlo\.num_partitions\s*=\s*(\d+)")


def partitions(module: str) -> int:
    """How many devices an SPMD module (StableHLO text) is partitioned over
    (`mhlo.num_partitions`), 1 if it does not say."""
    m = _PARTITIONS.search(module[:4096])  # a module attribute: in its head
    return int(m.group(1)) if m else 1


def is_annotation(op: dict[str, Any]) -> bool:
    """Whether an op of @main (module info) is a sharding annotation, not a computation."""
    return _ANNOTATION.search(op["text"]) is not None


# A float element type as StableHLO text spells it in a tensor type (`tensor<f32>`,
# `tensor<4x8xbf16>`, `tensor<f8E4M3FN>`, `complex<f32>`).
_FLOAT_ELEMENT = re.compile(r"[<x](?:bf16|f(?:16|32|64)|f[468]E\w+|tf32)\b|complex<")

# Ops whose results may depend on more than their operands: region bodies (while, case,
# reduce, sort, a manual computation) and callees may hold float constants of their own.
OPAQUE = frozenset({"func.call", "stablehlo.custom_call", "call"})


def holds_floats(module: str) -> bool:
    """Whether any value anywhere in a StableHLO module (its functions, their regions)
    has a float element type."""
    return _FLOAT_ELEMENT.search(module) is not None


def float_dependent(info: dict[str, Any], floats_inside: bool) -> dict[str, bool]:
    """Per value of @main (module info: xla/cuts.Parsed.info), whether it depends on a
    float value: what the generator's graph marks `tainted` (an integer computed from
    floats, through a convert or a compare, may legally differ between configurations).
    A value is float-dependent when it is a float, has no
    element type the engine knows, or an op computed it from a float-dependent value
    (an op's operands include what its regions capture). An op with regions or a call
    may read floats its operands do not show: its results count as float-dependent where
    the module holds any float at all (`floats_inside`, holds_floats)."""
    tainted: dict[str, bool] = {a["vid"]: a["dtype"] is None or a["dtype"] in FLOATS for a in info["args"]}
    for op in info["ops"]:
        opaque = bool(op.get("regions")) or op["name"] in OPAQUE
        reads = any(tainted.get(v, True) for v in op["operands"]) or (opaque and floats_inside)
        for r in op["results"]:
            tainted[r["vid"]] = reads or r["dtype"] is None or r["dtype"] in FLOATS
    return tainted


_MAIN = re.compile(r"func\.func\s+(?:public\s+)?@main\(")
_DEF = re.compile(r"^\s*(%[\w.$-]+)(?::\d+)?(?:\s*,\s*%[\w.$-]+)*\s*=\s*\"?([a-z_]+\.[a-z_.]+)\"?(.*)$")
_USE = re.compile(r"%[\w.$-]+")
_RETURN = re.compile(r"^\s*(?:func\.)?return\s+([^:]*)")


def main_dataflow(module: str) -> tuple[dict[str, tuple[str, list[str]]], list[str]]:
    """@main's dataflow read from StableHLO text as jax prints it (no MLIR): each value
    defined in its body (regions included) by (op name without its dialect prefix when
    it is `stablehlo.`, the values it reads), and the values @main returns, in order. A
    result of a multi-result op (`%5#1`) is its op's value (`%5`)."""
    start = _MAIN.search(module)
    if start is None:
        return {}, []
    defs: dict[str, tuple[str, list[str]]] = {}
    returns: list[str] = []
    for line in module[start.end():].splitlines()[1:]:
        if line.rstrip() in ("  }", "}"):
            break  # the end of @main
        m = _DEF.match(line)
        if m:
            uses = [u.split("#")[0] for u in _USE.findall(m.group(3))]
            defs[m.group(1)] = (m.group(2).removeprefix("stablehlo."), uses)
            continue
        r = _RETURN.match(line)
        if r:
            returns = [u.split("#")[0] for u in _USE.findall(r.group(1))]
    return defs, returns
