"""Random programs over jax.lax, valid by construction and deterministic from (seed, index).

A program is built as a graph (core/graph.py: Value and Node records, graph.json on disk)
so that it can be re-evaluated op by op, promoted to float64, or perturbed for the noise
model; the portable form that targets compile is its StableHLO text (program.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES, name_of
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.core.names import FLOATS
from xla_sentinel.ops.exact import annotate
from xla_sentinel.ops.lax_builders import build
from xla_sentinel.ops.spec import OpDef, Val
from xla_sentinel.ops.table import OPS, ops_for
from xla_sentinel.programs.evaluate import shape_struct
from xla_sentinel.spec.campaign import GeneratorSpec

# Dimension sizes: 1 and primes catch edge handling, powers of two the vectorized paths.
DIM_CHOICES = (1, 1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 32, 48, 64)
MAX_ELEMENTS = 1 << 14
MAX_TRIES = 12
# Share of programs that open with the state-update idiom (see _state_update).
STATE_UPDATE_P = 0.08
# With the `multi_output` shape: share of programs that open with one producer feeding
# several outputs and inner consumers (see _multi_output).
MULTI_OUTPUT_P = 0.3
# With the `buffers` shape: share of programs that open with a chain of in-place updates
# (see _buffers), and the chance that each of their inputs is donated.
BUFFERS_P = 0.5
DONATE_P = 0.5
# In-place ops the buffers opening chains: updates in place, scatter in place, loop state
# carried in place (the loop family's bodies update their carried buffer).
BUFFER_OPS = ("dynamic_update_slice", "scatter", "loop_dus", "loop_scatter_add", "loop_shift",
              "while_loop", "scan")
# Ranks the op table was written for; above it (maxRank up to 8) dimensions are mostly 1.
BASE_RANK = 5
# Version 2: a LARGE_P share of programs (its own stream) is sized past where XLA:CPU
# changes kernels: YNNPACK reductions from 4,096 elements, parallel loop partitions of big
# outputs, batches of 16,385 rows and more (the NaN-dropping max reduction lived there).
# They hold a few cheap ops only (elementwise, conversions, reductions), so a campaign's
# throughput stays that of small programs.
LARGE_P = 0.05
LARGE_SHAPES = ((4096,), (4097,), (64, 64), (8192,), (4099, 3), (16385,), (16385, 2),
                (16385, 4), (2, 16385), (32768,), (65536,))
LARGE_MAX_ELEMENTS = 1 << 17
LARGE_MAX_OPS = 6
LARGE_CATEGORIES = ("elementwise", "conversion", "reduction")
# Reductions whose cost grows with the window (a cumulative op is a scan over the whole
# axis, a reduce_window's window may be as long as the axis): not at these sizes.
LARGE_EXCLUDED = ("cumsum", "cumprod", "cummax", "cummin", "reduce_window")


class _Builder:
    """The generator's side of ops.Ctx: operand lookup and parameter creation."""

    def __init__(self, rng: np.random.Generator, spec: GeneratorSpec) -> None:
        self.rng = rng
        self.spec = spec
        self.max_rank = spec.maxRank
        self.max_dim = spec.maxDimSize
        self.max_elements = MAX_ELEMENTS
        self.graph = Graph()
        self.vals: list[Val] = []
        # Values returned whatever consumes them later (idioms that need both outputs).
        self.pinned: list[int] = []

    def dim(self) -> int:
        choices = [d for d in DIM_CHOICES if d <= self.max_dim]
        return int(self.rng.choice(choices))

    def shape(self) -> tuple[int, ...]:
        rank = int(self.rng.integers(0, self.max_rank + 1))
        if rank > BASE_RANK:
            # The rank 7-8 bugs come from real models' size-1 (batch, head, broadcast)
            # dimensions; all-large dimensions would be halved to 1 anyway.
            shape = [self.dim() if self.rng.random() < 0.4 else 1 for _ in range(rank)]
        else:
            shape = [self.dim() for _ in range(rank)]
        while math.prod(shape) > MAX_ELEMENTS // 4:
            shape[int(np.argmax(shape))] //= 2
        return tuple(shape)

    def new_input(self, shape: Sequence[int], dtype: str) -> Val:
        v = Val(len(self.vals), tuple(int(d) for d in shape), dtype)
        self.vals.append(v)
        self.graph.values.append(Value(v.shape, dtype, tainted=False, input=len(self.graph.inputs)))
        return v

    def operand(self, shape: Sequence[int], dtype: str) -> Val:
        shape = tuple(int(d) for d in shape)
        matches = [v for v in self.vals if v.shape == shape and v.dtype == dtype]
        if matches and self.rng.random() < 0.6:
            return matches[int(self.rng.integers(len(matches)))]
        return self.new_input(shape, dtype)

    def rollback(self, n_vals: int) -> None:
        del self.vals[n_vals:]
        del self.graph.values[n_vals:]

    def try_op(self, op: OpDef, primary: Val) -> bool:
        mark = len(self.vals)
        planned = op.plan(self, primary)
        if planned is None:
            self.rollback(mark)
            return False
        args, attrs = planned
        structs = [shape_struct(a.shape, NP_DTYPES[a.dtype]) for a in args]
        try:
            out = jax.eval_shape(lambda *xs: build(op, attrs, *xs), *structs)
        except (TypeError, ValueError):
            self.rollback(mark)
            return False
        # Empty results (a VALID conv with a window dilated past its input) are legal, but
        # every planner downstream draws sizes from 1..d.
        if math.prod(out.shape) > self.max_elements or len(out.shape) > max(BASE_RANK, self.max_rank) \
                or 0 in out.shape:
            self.rollback(mark)
            return False
        tainted = any(a.dtype in FLOATS or a.tainted for a in args)
        v = Val(len(self.vals), tuple(out.shape), name_of(out.dtype), tainted)
        self.vals.append(v)
        # The family too: coverage counts shapes from it (no jax there).
        self.graph.nodes.append(Node(op.name, [a.id for a in args], attrs, op.discrete, op.family))
        self.graph.values.append(Value(v.shape, v.dtype, tainted=tainted, node=len(self.graph.nodes) - 1))
        return True


def single_op(op_name: str, dtype: str, seed: int = 0, spec: GeneratorSpec | None = None) -> Graph | None:
    """A program of one `op_name` on a `dtype` input, or None if no plan fits in a few tries."""
    spec = spec or GeneratorSpec(maxRank=3, maxDimSize=17)
    op = OPS[op_name]
    for attempt in range(MAX_TRIES):
        rng = np.random.default_rng([seed, attempt, 0x0E])
        b = _Builder(rng, spec)
        shape = b.shape()
        if not shape and attempt < MAX_TRIES // 2:
            shape = (b.dim(),)  # most ops want rank >= 1; rank 0 comes later
        primary = b.new_input(shape, dtype)
        if b.try_op(op, primary):
            b.graph.outputs = [b.vals[-1].id]
            annotate(b.graph)
            return b.graph
    return None


def _n_ops(rng: np.random.Generator, spec: GeneratorSpec) -> int:
    """Log-uniform op count: most programs small (fast, easy to bisect), some large."""
    lo, hi = math.log(spec.minOps), math.log(spec.maxOps + 1)
    return min(spec.maxOps, max(spec.minOps, int(math.exp(rng.uniform(lo, hi)))))


def _pick(rng: np.random.Generator, n: int, weights: Sequence[float] | None) -> int:
    if weights is None:
        return int(rng.integers(n))
    w = np.asarray(weights, np.float64)
    return int(rng.choice(n, p=w / w.sum()))


def _resume(b: _Builder, prefix: Graph, keep: int) -> None:
    """Start the builder from the first `keep` nodes of another program's graph."""
    nodes = prefix.nodes[:keep]
    last = max((i for i, v in enumerate(prefix.values) if v.node == len(nodes) - 1), default=-1)
    # Copies: the prefix stays the other program's graph.
    for i, v in enumerate(prefix.values[:last + 1]):
        b.vals.append(Val(i, v.shape, v.dtype, v.tainted))
        b.graph.values.append(dataclasses.replace(v))
    b.graph.nodes.extend(dataclasses.replace(n) for n in nodes)


def _state_update(b: _Builder, spec: GeneratorSpec) -> None:
    """Open with `(x.at[i].set(u), f(x))`: an in-place update returned next to another
    reader of the old value, as a KV-cache step or an optimizer update returns the new
    state and a result computed from the old one.

    Only this shape makes XLA protect the old value with a copy before updating in place,
    so only it exercises copy insertion and buffer aliasing; random growth almost never
    returns both. Both values are pinned as outputs, in this order (the update first, so
    the old value's reader is scheduled after it).
    """
    dus = OPS["dynamic_update_slice"]
    allowed = {op.name for op in ops_for(b.vals[0].dtype, spec.ops, spec.excludeOps, spec.families())}
    source = b.vals[0]
    if dus.name not in allowed or source.rank == 0 or not b.try_op(dus, source):
        return
    updated = b.vals[-1].id
    readers = [OPS[n] for n in sorted(allowed) if n != dus.name]
    for _ in range(MAX_TRIES):
        if readers and b.try_op(readers[int(b.rng.integers(len(readers)))], source):
            b.pinned += [updated, b.vals[-1].id]
            return


def _multi_output(b: _Builder, spec: GeneratorSpec) -> None:
    """Open with one elementwise producer read by several ops, the producer and its first
    reader pinned as outputs and the other readers left for the program to consume: XLA
    then builds a multi-output fusion whose producer is both returned and fused into inner
    consumers (the aliased multi-output fusions of real bugs). Random growth rarely
    returns a value it also reads."""
    source = b.vals[0]
    candidates = ops_for(source.dtype, spec.ops, spec.excludeOps, spec.families())
    producers = [op for op in candidates if op.category == "elementwise"]
    readers = [op for op in candidates if op.category in ("elementwise", "reduction")]
    for _ in range(MAX_TRIES):
        if producers and b.try_op(producers[int(b.rng.integers(len(producers)))], source):
            break
    else:
        return
    produced = b.vals[-1]
    read: list[int] = []
    for _ in range(MAX_TRIES):
        if len(read) == 3 or not readers:
            break
        if b.try_op(readers[int(b.rng.integers(len(readers)))], produced):
            read.append(b.vals[-1].id)
    if len(read) >= 2:
        b.pinned += [produced.id, read[0]]


def _buffers(b: _Builder, spec: GeneratorSpec) -> bool:
    """Open with two or three in-place ops chained on the first input (an update of an
    update, a scatter into a loop's carried state), every link pinned as an output: each
    result is read again after the next update, so buffer assignment must keep it or copy
    it, and an output of the input's shape lets a donated input be aliased to it. True when
    at least one op was placed."""
    ranked = [v for v in b.vals if v.rank]
    if not ranked:
        return False
    source = ranked[0]
    allowed = [OPS[n] for n in BUFFER_OPS
               if OPS[n] in ops_for(source.dtype, spec.ops, spec.excludeOps, (*spec.families(), "loops"))]
    placed = 0
    for _ in range(int(b.rng.integers(2, 4))):
        for _ in range(MAX_TRIES):
            if allowed and b.try_op(allowed[int(b.rng.integers(len(allowed)))], source):
                # Coverage counts the shape from its nodes (campaign/coverage.py).
                b.graph.nodes[-1].family = "buffers"
                source = b.vals[-1]
                b.pinned.append(source.id)
                placed += 1
                break
    return placed > 0


def large_drawn(seed: int, index: int, spec: GeneratorSpec, boost: float = 1.0) -> bool:
    """Whether program `index` is a large one (version 2, LARGE_P times the guide's boost)."""
    return spec.version >= 2 and spec.minOps <= LARGE_MAX_OPS and \
        np.random.default_rng([seed, index, 0x1A26]).random() < LARGE_P * boost


def _family_weights(candidates: Sequence[OpDef], spec: GeneratorSpec) -> list[float] | None:
    """Per-candidate weights of the families' ops against the plain ones (1), or None when
    all weigh 1: the unweighted draw is the one version 1 makes."""
    weights = [1.0 if c.family is None else spec.family_weight(c.family) or 1.0 for c in candidates]
    return None if all(w == 1.0 for w in weights) else weights


def _large(b: _Builder, spec: GeneratorSpec, dtype_w: list[float] | None) -> None:
    """Open a large program: one input of a LARGE_SHAPES size (cut to maxRank by folding
    leading dimensions, so a maxRank 0 campaign stays scalar)."""
    shape: tuple[int, ...] = LARGE_SHAPES[int(b.rng.integers(len(LARGE_SHAPES)))]
    while len(shape) > spec.maxRank:
        shape = shape[1:] if len(shape) == 1 else (shape[0] * shape[1], *shape[2:])
    b.max_elements = LARGE_MAX_ELEMENTS
    dtype = str(b.rng.choice(spec.dtypes)) if dtype_w is None \
        else spec.dtypes[_pick(b.rng, len(spec.dtypes), dtype_w)]
    b.new_input(shape, dtype)


def _donate(graph: Graph, seed: int, index: int) -> None:
    """Draw donation per input (jax donate_argnums) for a program on one device, among
    the inputs an output of the same shape and dtype can take over (jax aliases each
    donated input to one such output; another would be dropped with a warning)."""
    if graph.sharding is not None:
        return
    rng = np.random.default_rng([seed, index, 0xD0A])
    free = [(graph.values[o].shape, graph.values[o].dtype) for o in graph.outputs]
    for i, v in enumerate(graph.inputs):
        if rng.random() < DONATE_P and (v.shape, v.dtype) in free:
            free.remove((v.shape, v.dtype))
            graph.donated.append(i)


def generate(seed: int, index: int, spec: GeneratorSpec, bias: dict[str, Any] | None = None) -> Graph:
    """The program number `index` of the campaign with `seed`: same inputs, same graph.

    `bias` (guided generation, runners/xla_sentinel/campaign/guide.py) changes what is drawn, still
    deterministically: `ops` and `dtypes` weight choices (default 1), `pairs` weights an
    op by its producer ("producer>consumer", default 1), and `prefix` + `keep` start from
    the first `keep` nodes of another program's graph (a neighbour of a near miss). Every
    op still goes through `try_op`, so biased programs are valid by construction.
    """
    bias = bias or {}
    rng = np.random.default_rng([seed, index, 0x5E17])
    b = _Builder(rng, spec)
    dtype_w = [bias["dtypes"].get(d, 1.0) for d in spec.dtypes] if "dtypes" in bias else None
    in_place = False
    # Version 2's large programs: decided from a stream of their own, so the others are
    # what they would be without them.
    large = "prefix" not in bias and large_drawn(seed, index, spec, bias.get("large", 1.0))
    if "prefix" in bias:
        _resume(b, bias["prefix"], bias["keep"])
    elif large:
        _large(b, spec, dtype_w)
    else:
        for _ in range(int(rng.integers(1, 3))):
            shape = b.shape()
            dtype = str(rng.choice(spec.dtypes)) if dtype_w is None \
                else spec.dtypes[_pick(rng, len(spec.dtypes), dtype_w)]
            b.new_input(shape, dtype)
        # Its own stream decides, so the other programs stay what they were.
        if np.random.default_rng([seed, index, 0x0D05]).random() < STATE_UPDATE_P:
            _state_update(b, spec)
        elif "multi_output" in spec.families() and np.random.default_rng([seed, index, 0x3F0]).random() \
                < MULTI_OUTPUT_P * spec.family_weight("multi_output"):
            _multi_output(b, spec)
        # After the other openings' draws, from its own stream: campaigns without the
        # buffers shape keep their programs.
        if "buffers" in spec.families() and not b.graph.nodes and \
                np.random.default_rng([seed, index, 0xB0F]).random() < BUFFERS_P * spec.family_weight("buffers"):
            in_place = _buffers(b, spec)
    target = max(_n_ops(rng, spec), min(len(b.graph.nodes) + 1, spec.maxOps))
    if large:
        target = min(target, LARGE_MAX_OPS)
    op_w, pair_w = bias.get("ops"), bias.get("pairs", {})
    failures = 0
    while len(b.graph.nodes) < target and failures < MAX_TRIES * target:
        # Prefer recent values: deep chains give XLA something to fuse.
        recent = b.vals[-4:] if rng.random() < 0.7 else b.vals
        primary = recent[int(rng.integers(len(recent)))]
        candidates = ops_for(primary.dtype, spec.ops, spec.excludeOps, spec.families())
        if large:
            candidates = [c for c in candidates if c.category in LARGE_CATEGORIES and c.family is None
                          and c.name not in LARGE_EXCLUDED]
        weights = _family_weights(candidates, spec)
        if op_w is not None and candidates:
            node = b.graph.producer(primary.id)
            producer = node.op if node is not None else "input"
            weights = [(1.0 if weights is None else weights[i])
                       * op_w.get(c.name, 1.0) * pair_w.get(f"{producer}>{c.name}", 1.0)
                       for i, c in enumerate(candidates)]
        if not candidates or not b.try_op(candidates[_pick(rng, len(candidates), weights)], primary):
            failures += 1
    used = {a for n in b.graph.nodes for a in n.args}
    sinks = [v.id for v in b.vals if b.graph.values[v.id].node is not None and v.id not in used]
    outputs = sinks[-4:] if sinks else [b.vals[-1].id]
    b.graph.outputs = b.pinned + [v for v in outputs if v not in b.pinned]
    annotate(b.graph)
    if not large:
        _partition(b.graph, seed, index, spec)
    if in_place:
        _donate(b.graph, seed, index)
    return b.graph


def _partition(graph: Graph, seed: int, index: int, spec: GeneratorSpec) -> None:
    """Give a `spec.sharded` share of programs an SPMD plan on `spec.devices` devices."""
    devices = spec.device_count()
    if devices < 2:
        return
    # Its own stream decides, so the graphs stay those of the unsharded campaign.
    rng = np.random.default_rng([seed, index, 0x5BD])
    if rng.random() < spec.sharded_share():
        from xla_sentinel.programs import spmd
        # Uneven shards from version 2 on: version 1 keeps the programs a seed gave before.
        uneven = np.random.default_rng([seed, index, 0x0E7E]) if spec.version >= 2 else None
        graph.sharding = spmd.plan(graph, devices, rng, tuple(spec.partitioners), uneven=uneven)
