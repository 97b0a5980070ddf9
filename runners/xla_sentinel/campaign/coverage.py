"""Coverage: what a program exercised, and the running total over a campaign.

Per program (`program_coverage`): the ops it holds (graph op names for generated
programs, StableHLO op names for replayed and corpus modules), producer -> consumer op
pairs, the dtypes and ranks of every value, the special-value kinds present in its
inputs, and what XLA did with it in the default target's optimized HLO: fusions by kind
(kLoop, kInput, kOutput, kCustom, and ynn for YNNPACK custom fusions) and which HLO
opcodes ended up inside a fusion of each kind (`fused`, e.g. "kLoop:transpose"), and
which of XLA:CPU's kernel decisions it reached (`kernel_decisions`, the KERNEL_DECISIONS
table: fusion kinds with YNNPACK and oneDNN, emitter paths, thunks, in-place buffers), and
the process layout it was drawn for (`layouts`: `1x4`, one process over 4 devices;
layout_programs adds the multi-host layouts, `hosts2x2`, it ran on).
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
from xla_sentinel.core.stablehlo import partitions
from xla_sentinel.xla import hlo

FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom", "ynn")
SPECIAL_KINDS = ("nan", "inf", "neg_zero", "subnormal", "huge", "tie_half", "int_min", "int_max")
# Coverage counters a campaign sums; each maps a key to the number of programs that had it.
SECTIONS = ("ops", "op_pairs", "dtypes", "ranks", "special", "fusion_kinds", "fused", "passes_changed",
            "shapes", "kernel_decisions", "layouts")
# Ranks above what the op table was first written for (the rank 7-8 bugs).
HIGH_RANK = 6

# Passes whose effect is measured by compiling with the pass disabled and comparing the
# optimized HLO; one program in PASS_SAMPLE_EVERY gets it (see pass_sampled).
PASSES = ("algsimp", "fusion", "cse", "dce", "constant_folding", "tree_reduction_rewriter",
          "dot-library-rewriter")
PASS_SAMPLE_EVERY = 32

# XLA:CPU's kernel decisions, as its optimized HLO shows them (kernel_decisions): one table,
# read by summary.json, the HTML report and the guide. Each is reached by a program whose
# first target's optimized HLO holds it at least once.
KERNEL_DECISIONS: dict[str, str] = {
    "fusion:kLoop": "a loop fusion (elementwise emitter)",
    "fusion:kInput": "an input fusion (reduction emitter)",
    "fusion:kOutput": "an output fusion (a consumer fused into a dot or conv)",
    "fusion:ynn": "a kCustom __ynn_fusion: YNNPACK (dots, reductions of 4,096 elements and more)",
    "fusion:onednn": "a kCustom __onednn_fusion: oneDNN",
    "fusion:xnn": "a kCustom __xnn_fusion: XNNPACK",
    "fusion:multi_output": "a fusion with a tuple-shaped root (multi-output fusion)",
    "fusion:wrapped": "one op alone in a fusion (wrapped_*: emitted on its own)",
    "emitter:parallel": "a fusion split into parallel partitions (outer_dimension_partitions)",
    "emitter:reduce": "a reduce emitted inside a loop or input fusion",
    "emitter:tree_reduction": "a reduction rewritten into reduce-window steps (tree_reduction_rewriter)",
    "emitter:dynamic_update_slice": "a fusion rooted at a dynamic-update-slice (emitted in place)",
    "emitter:scatter": "a fusion rooted at a scatter",
    "emitter:concatenate": "a fusion rooted at a concatenate",
    "emitter:transpose": "a transpose inside a fusion",
    "thunk:dot": "a dot left to the runtime's dot thunk (Eigen), not fused",
    "thunk:convolution": "a convolution thunk",
    "thunk:sort": "a sort thunk",
    "thunk:while": "a while loop kept as a loop (not unrolled)",
    "thunk:conditional": "a conditional",
    "thunk:custom_call": "a custom call (TopK, oneDNN ops)",
    "thunk:onednn": "a oneDNN custom call (__onednn$matmul, convolution, layernorm, softmax)",
    "thunk:collective": "a collective: all-reduce, all-gather, all-to-all, reduce-scatter, collective-permute",
    "buffer:io_alias": "input_output_alias: an output takes over a donated input's buffer",
    "buffer:in_place_update": "a dynamic-update-slice or scatter writes into its operand's buffer (no copy first)",
    "buffer:copy_protect": "a copy protects a value before an in-place update (copy insertion)",
}
_CUSTOM_FUSIONS = {"__ynn_fusion": "fusion:ynn", "__onednn_fusion": "fusion:onednn",
                   "__xnn_fusion": "fusion:xnn"}
_COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "reduce-scatter", "collective-permute",
                "all-reduce-start", "all-gather-start", "collective-permute-start")
_IN_PLACE = ("dynamic-update-slice", "scatter")
_IO_ALIAS = re.compile(r"input_output_alias=\{\s*\{")

_STABLEHLO_OP = re.compile(r"=\s*\"?((?:stablehlo|chlo)\.[\w.]+)")

# A multi-host layout's target (worker/hosts.Layout.name): hosts<N>x<D>, N processes of D
# devices (docs/spmd.md, "Programs that span hosts").
LAYOUT_TARGET = re.compile(r"^hosts(\d+)x(\d+)$")


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
        largest = float(ml_dtypes.finfo(a.dtype).max)  # type: ignore[no-untyped-call]  # no hints
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
        if (finite & (np.abs(x) > largest / 4)).any():
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
    return {"fusion_kinds": kinds, "fused": sorted(fused), "kernel_decisions": kernel_decisions(hlo_text)}


def kernel_decisions(hlo_text: str) -> list[str]:
    """The KERNEL_DECISIONS an optimized HLO module reached, sorted.

    In-place buffers are read from the module as XLA:CPU emits it: a dynamic-update-slice
    or scatter (bare, or the root of its fusion) whose updated operand is a `copy` was
    protected by copy insertion, any other updates its operand's buffer in place (buffer
    assignment shares the two when nothing reads the operand later)."""
    module = hlo.parse(hlo_text)
    found: set[str] = set()
    header = hlo_text.split("\n", 1)[0]
    if _IO_ALIAS.search(header):
        found.add("buffer:io_alias")
    bodies = module.fusion_bodies()
    for comp, instr in module.instructions():
        if comp.name in bodies:
            body_kind = bodies[comp.name].fusion_kind
            if instr.opcode == "reduce" and body_kind in ("kLoop", "kInput"):
                found.add("emitter:reduce")
            if instr.opcode == "transpose":
                found.add("emitter:transpose")
            continue
        op = instr.opcode
        if op == "fusion":
            kind = instr.fusion_kind or ""
            found.add(_CUSTOM_FUSIONS.get(instr.custom_fusion_kind or "", f"fusion:{kind}"))
            if instr.shape_text.startswith("("):
                found.add("fusion:multi_output")
            if instr.name.startswith("wrapped_"):
                found.add("fusion:wrapped")
            if re.search(r'"outer_dimension_partitions":\["', instr.attr("backend_config") or ""):
                found.add("emitter:parallel")
            callee = next((c for k, c in instr.callees() if k == "calls"), None)
            root = module.computation(callee).root.opcode if callee else ""
            if root == "reduce-window":
                found.add("emitter:tree_reduction")
            if root in ("dynamic-update-slice", "scatter", "concatenate"):
                found.add(f"emitter:{root.replace('-', '_')}")
            if root in _IN_PLACE:
                found.add(_in_place(comp, instr))
        elif op in _IN_PLACE:
            found.add(_in_place(comp, instr))
        elif op == "reduce-window":
            found.add("emitter:tree_reduction")
        elif op in ("dot", "convolution", "sort", "while", "conditional"):
            found.add(f"thunk:{op}")
        elif op == "custom-call":
            target = instr.attr("custom_call_target") or ""
            found.add("thunk:onednn" if "__onednn$" in target else "thunk:custom_call")
        elif op in _COLLECTIVES:
            found.add("thunk:collective")
    return sorted(found & set(KERNEL_DECISIONS))


def _in_place(comp: hlo.Computation, instr: hlo.Instruction) -> str:
    """copy_protect when an operand of the update is a copy, else in_place_update."""
    for name in instr.operands:
        try:
            if comp.get(name).opcode == "copy":
                return "buffer:copy_protect"
        except KeyError:
            continue
    return "buffer:in_place_update"


def program_coverage(graph: Graph | None, module: str, inputs: Iterable[np.ndarray],
                     hlo_text: str | None, passes_changed: list[str] | None = None) -> dict[str, Any]:
    """Everything one program exercised, as stored in programs.stats['coverage']."""
    cov = graph_coverage(graph) if graph is not None else module_coverage(module)
    cov["special"] = sorted(special_kinds(inputs))
    cov["layouts"] = [process_layout(module)]
    if hlo_text:
        cov.update(hlo_coverage(hlo_text))
    if passes_changed is not None:
        cov["passes_changed"] = sorted(passes_changed)
    return cov


class Coverage:
    """Campaign totals: for each section, how many programs had each key (ops and pairs
    count occurrences), plus how many programs contributed HLO and pass measurements."""

    def __init__(self) -> None:
        self.sections: dict[str, Counter[str]] = {s: Counter() for s in SECTIONS}
        self.programs = 0
        self.with_hlo = 0
        self.pass_sampled = 0

    def add(self, cov: dict[str, Any]) -> None:
        self.programs += 1
        for s in ("ops", "op_pairs", "fusion_kinds"):
            self.sections[s].update(cov.get(s, {}))
        for s in ("dtypes", "ranks", "special", "fused", "passes_changed", "shapes", "kernel_decisions",
                  "layouts"):
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


def process_layout(module: str | bytes) -> str:
    """The one-process layout a program was drawn for: `1x<D>`, one process over the D
    devices its module is partitioned over (1x1: unsharded, or a module in bytecode, whose
    partitioning is not read here, as multihost.py does not)."""
    return f"1x{partitions(module) if isinstance(module, str) else 1}"


def layout_programs(stats: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Programs per process layout, most first: each program's own one-process layout
    (coverage `layouts`), and per multi-host layout target (hosts<N>x<D>) the programs
    that ran on its group: those partitioned over its N x D devices (the others are
    skipped there, campaign/multihost.py), or, in a store whose programs have no layout
    recorded, those it compiled."""
    counts: Counter[str] = Counter()
    for s in stats:
        if not s:
            continue
        drawn = list((s.get("coverage") or {}).get("layouts") or [])
        counts.update(drawn)
        for target, seconds in (s.get("compile_s") or {}).items():
            m = LAYOUT_TARGET.match(target)
            if m is None:
                continue
            devices = int(m.group(1)) * int(m.group(2))
            if (f"1x{devices}" in drawn) if drawn else seconds > 0:
                counts[target] += 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def decisions_summary(cov: Coverage) -> dict[str, Any]:
    """summary.json `kernel_decisions`: programs (with HLO) that reached each decision of
    KERNEL_DECISIONS, in table order, and the decisions no program reached."""
    seen = cov.sections["kernel_decisions"]
    return {"programs_with_hlo": cov.with_hlo,
            "reached": {d: seen[d] for d in KERNEL_DECISIONS if seen[d]},
            "not_reached": [d for d in KERNEL_DECISIONS if not seen[d]]}


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
