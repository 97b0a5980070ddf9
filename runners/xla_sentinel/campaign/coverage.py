"""Coverage: what a program exercised, and the running total over a campaign.

Per program (`program_coverage`): the ops it holds (graph op names for generated
programs, StableHLO op names for replayed and corpus modules), producer -> consumer op
pairs, the dtypes and ranks of every value, the special-value kinds present in its
inputs, and what XLA did with it in the default target's optimized HLO: fusions by kind
(kLoop, kInput, kOutput, kCustom, and ynn for YNNPACK custom fusions) and which HLO
opcodes ended up inside a fusion of each kind (`fused`, e.g. "kLoop:transpose").
Which passes changed the module is measured on a sample only (see `PASS_SAMPLE_EVERY`):
it costs one extra compile per pass.

`Coverage` sums these over a campaign; summary.json carries `Coverage.to_json()`.
Pure numpy and the HLO text parser: no jax here (the coordinator imports it).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from xla_sentinel.core.dtypes import subnormal
from xla_sentinel.core.graph import Graph
from xla_sentinel.xla import hlo

FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom", "ynn")
SPECIAL_KINDS = ("nan", "inf", "neg_zero", "subnormal", "huge", "tie_half", "int_min", "int_max")
# Coverage counters a campaign sums; each maps a key to the number of programs that had it.
SECTIONS = ("ops", "op_pairs", "dtypes", "ranks", "special", "fusion_kinds", "fused", "passes_changed",
            "shapes")
# Ranks above what the op table was first written for (the rank 7-8 bugs).
HIGH_RANK = 6

# Passes whose effect is measured by compiling with the pass disabled and comparing the
# optimized HLO; one program in PASS_SAMPLE_EVERY gets it (see pass_sampled).
PASSES = ("algsimp", "fusion", "cse", "dce", "constant_folding", "tree_reduction_rewriter",
          "dot-library-rewriter")
PASS_SAMPLE_EVERY = 32

_STABLEHLO_OP = re.compile(r"=\s*\"?((?:stablehlo|chlo)\.[\w.]+)")


def pass_sampled(index: int) -> bool:
    """Whether program `index` gets its pass effects measured: the last of every block of
    PASS_SAMPLE_EVERY, so short campaigns (and tests) pay nothing for it."""
    return index % PASS_SAMPLE_EVERY == PASS_SAMPLE_EVERY - 1


def special_kinds(arrays: Iterable[np.ndarray]) -> set[str]:
    """Which special-value kinds occur in the given input arrays."""
    found: set[str] = set()
    for a in arrays:
        a = np.asarray(a)
        if a.dtype == np.bool_ or a.size == 0:
            continue
        if np.issubdtype(a.dtype, np.integer):
            info = np.iinfo(a.dtype)
            if (a == info.min).any() and info.min < 0:
                found.add("int_min")
            if (a == info.max).any():
                found.add("int_max")
            continue
        info = ml_dtypes.finfo(a.dtype)
        x = a.astype(np.float64)
        finite = np.isfinite(x)
        if np.isnan(x).any():
            found.add("nan")
        if np.isinf(x).any():
            found.add("inf")
        if ((x == 0) & np.signbit(x)).any():
            found.add("neg_zero")
        if subnormal(a).any():
            found.add("subnormal")
        if (finite & (np.abs(x) > float(info.max) / 4)).any():
            found.add("huge")
        with np.errstate(invalid="ignore"):
            half = np.mod(np.abs(x), 1.0) == 0.5
        if (finite & (np.abs(x) < 2**20) & half).any():
            found.add("tie_half")  # x.5: where round-to-nearest-even and away differ
    return found


def graph_coverage(graph: Graph) -> dict[str, Any]:
    """Ops, producer->consumer pairs, dtypes and ranks of a generated program's graph."""
    nodes, values = graph.nodes, graph.values
    producer = {i: nodes[v.node].op for i, v in enumerate(values) if v.node is not None}
    pairs = Counter(f"{producer[a]}>{n.op}" for n in nodes for a in n.args if a in producer)
    return {"ops": dict(Counter(n.op for n in nodes)), "op_pairs": dict(pairs),
            "dtypes": sorted({v.dtype for v in values}),
            "ranks": sorted({len(v.shape) for v in values}), "shapes": shape_coverage(graph)}


def shape_coverage(graph: Graph) -> list[str]:
    """The program shapes from real bugs a graph holds: each op family (the generator
    records it per node), `index:<type>` per index width, `multi_output` where a returned
    value is also read inside the program, `high_rank` for a value of rank >= HIGH_RANK."""
    nodes, values = graph.nodes, graph.values
    found = {n.family for n in nodes if n.family is not None}
    found |= {f"index:{n.attrs['index_dtype']}" for n in nodes if "index_dtype" in n.attrs}
    read = {a for n in nodes for a in n.args}
    if any(o in read and values[o].node is not None for o in graph.outputs):
        found.add("multi_output")
    if any(len(v.shape) >= HIGH_RANK for v in values):
        found.add("high_rank")
    return sorted(found)


def module_coverage(module: str) -> dict[str, Any]:
    """Ops, dtypes and ranks of a StableHLO module without a graph (traces, corpus)."""
    from xla_sentinel.core.program import MLIR_TYPES

    ops = Counter(m.removeprefix("stablehlo.") for m in _STABLEHLO_OP.findall(module))
    dtypes, ranks = set(), set()
    for dims, elem in re.findall(r"tensor<((?:\d+x)*)([a-z]+\d*)>", module):
        if elem in MLIR_TYPES:
            dtypes.add(MLIR_TYPES[elem])
            ranks.add(dims.count("x"))
    return {"ops": dict(ops), "op_pairs": {}, "dtypes": sorted(dtypes), "ranks": sorted(ranks)}


def hlo_coverage(hlo_text: str) -> dict[str, Any]:
    """Fusions by kind, and which opcodes XLA put inside a fusion of each kind."""
    kinds = {k: v for k, v in hlo.fusion_summary(hlo_text).items() if v}
    module = hlo.parse(hlo_text)
    fused: set[str] = set()
    for body, fusion in module.fusion_bodies().items():
        kind = "ynn" if fusion.custom_fusion_kind == "__ynn_fusion" else fusion.fusion_kind
        for instr in module.computation(body):
            if instr.opcode not in ("parameter", "constant"):
                fused.add(f"{kind}:{instr.opcode}")
    return {"fusion_kinds": kinds, "fused": sorted(fused)}


def program_coverage(graph: Graph | None, module: str, inputs: Iterable[np.ndarray],
                     hlo_text: str | None, passes_changed: list[str] | None = None) -> dict[str, Any]:
    """Everything one program exercised, as stored in programs.stats['coverage']."""
    cov = graph_coverage(graph) if graph is not None else module_coverage(module)
    cov["special"] = sorted(special_kinds(inputs))
    if hlo_text:
        cov.update(hlo_coverage(hlo_text))
    if passes_changed is not None:
        cov["passes_changed"] = sorted(passes_changed)
    return cov


class Coverage:
    """Campaign totals: for each section, how many programs had each key (ops and pairs
    count occurrences), plus how many programs contributed HLO and pass measurements."""

    def __init__(self) -> None:
        self.sections: dict[str, Counter] = {s: Counter() for s in SECTIONS}
        self.programs = 0
        self.with_hlo = 0
        self.pass_sampled = 0

    def add(self, cov: dict[str, Any]) -> None:
        self.programs += 1
        for s in ("ops", "op_pairs", "fusion_kinds"):
            self.sections[s].update(cov.get(s, {}))
        for s in ("dtypes", "ranks", "special", "fused", "passes_changed", "shapes"):
            self.sections[s].update(str(k) for k in cov.get(s, []))
        if "fusion_kinds" in cov:
            self.with_hlo += 1
        if "passes_changed" in cov:
            self.pass_sampled += 1

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"programs": self.programs, "programs_with_hlo": self.with_hlo,
                               "programs_pass_sampled": self.pass_sampled}
        for s, c in self.sections.items():
            out[s] = dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
        return out


def total(stats: Iterable[dict[str, Any]]) -> Coverage:
    """Sum the `coverage` entries of stored program stats (those without one are skipped)."""
    cov = Coverage()
    for s in stats:
        if s and "coverage" in s:
            cov.add(s["coverage"])
    return cov


def stored_stats(db: Path) -> list[dict[str, Any]]:
    """The stats of every program in a campaign store, read-only."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT stats FROM programs ORDER BY idx").fetchall()
    finally:
        con.close()
    return [json.loads(r[0]) if r[0] else {} for r in rows]
