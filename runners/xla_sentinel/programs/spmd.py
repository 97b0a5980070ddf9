"""SPMD programs: decide how a generated program is partitioned, and lower it so.

A sharding plan (core/graph.py `ShardingPlan`, kept in the graph beside its nodes) names a 1-D or 2-D device mesh,
a PartitionSpec per input and output, and regions applied after chosen values: sharding
constraints (reshardings) and shard_map regions built from collectives. Every region is
the identity on its value, so the sharded module means what the graph means and the
references, which evaluate the graph unsharded, stay its truth. The partitioner (Shardy
or GSPMD) is a property of the lowered module, not of the compile: XLA refuses a
Shardy-lowered module compiled with Shardy off (a RET_CHECK on `xla.sdy.*` custom calls),
so each plan draws its partitioner and the module carries it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from xla_sentinel.core.graph import Graph, Node, ShardingPlan, Spec, Value
from xla_sentinel.spec.campaign import PARTITIONERS

if TYPE_CHECKING:
    from jax.sharding import PartitionSpec
    from jax.stages import Wrapped

AXES = ("x", "y")
# The share of values (inputs and op results) a region is applied after.
REGION_P = 0.3
# Regions and what they need of their value: `sum` regions add -0.0 (or integer 0), which
# is exact for every value (x + -0.0 == x bitwise, -0.0 included); `max` regions take the
# max with the dtype's lowest value. Neither is defined for bool.
REGION_KINDS = ("constraint", "all_gather", "psum_scatter", "psum_broadcast",
                "pmax_broadcast", "ppermute", "all_to_all")
ARITHMETIC_REGIONS = ("psum_scatter", "psum_broadcast", "pmax_broadcast")
# GSPMD's form of a shard_map region inside @main (Shardy keeps it in one
# sdy.manual_computation op): a value enters through an SPMDFullToShardShape custom call,
# usually after a Sharding custom call that says how it is split, and leaves through
# SPMDShardToFullShape. In between each device holds its own shard: a per-device value,
# which no global array stands for, so the bisector can neither feed nor return it.
_ENTERS = re.compile(r"custom_call @SPMDFullToShardShape\b")
_LEAVES = re.compile(r"custom_call @SPMDShardToFullShape\b")
_SHARDING = re.compile(r"custom_call @Sharding\b")


def mesh_shapes(devices: int) -> list[tuple[int, ...]]:
    """The 1-D mesh and every 2-D factorization (both sides > 1) of `devices`."""
    shapes: list[tuple[int, ...]] = [(devices,)]
    shapes += [(a, devices // a) for a in range(2, devices) if devices % a == 0]
    return shapes


def _spec(rng: np.random.Generator, shape: tuple[int, ...], sizes: dict[str, int],
          p: float = 0.5) -> Spec:
    """A random PartitionSpec over `shape`: each mesh axis on at most one dimension, and
    only where it divides the dimension (uneven shards would pad the arguments)."""
    spec: Spec = [None] * len(shape)
    free = list(sizes)
    rng.shuffle(free)
    for axis in free:
        dims = [d for d in range(len(shape)) if spec[d] is None and shape[d] % sizes[axis] == 0
                and shape[d] >= sizes[axis]]
        if dims and rng.random() < p:
            spec[int(rng.choice(dims))] = axis
    return spec


# The share of sharding constraints made uneven (issue 35): one mesh axis moved onto a
# dimension it does not divide, so the partitioner pads the last shards and must cut the
# padding off again wherever the value meets another sharding (the interior-pad bug of
# bench/repros/spmd_pad_interior_sharded_result.py is a row short in such a tile). Only
# constraints: jax refuses an uneven argument or result sharding, and a shard_map region
# needs its dimension divided.
UNEVEN_P = 0.5


def _uneven(rng: np.random.Generator, spec: Spec, shape: tuple[int, ...], sizes: dict[str, int]) -> Spec | None:
    """`spec` with one mesh axis on a dimension of `shape` that it does not divide (taken
    off the dimension it was on), or None where no dimension is uneven for any axis."""
    moves = [(axis, d) for axis, n in sizes.items() for d in range(len(shape))
             if spec[d] is None and shape[d] > 1 and shape[d] % n != 0]
    if not moves:
        return None
    axis, dim = moves[int(rng.integers(len(moves)))]
    return [axis if d == dim else (None if e == axis else e) for d, e in enumerate(spec)]


def _region(rng: np.random.Generator, value: Value, sizes: dict[str, int]) -> dict[str, Any] | None:
    """A random identity region that fits `value` (shape and dtype), or None."""
    shape = value.shape
    if not shape:
        return None
    kinds = [k for k in REGION_KINDS if not (value.dtype == "bool" and k in ARITHMETIC_REGIONS)]
    kind = str(rng.choice(kinds))
    axis = str(rng.choice(list(sizes)))
    n = sizes[axis]
    divisible = [d for d, s in enumerate(shape) if s % n == 0 and s >= n]
    if kind == "constraint":
        return {"kind": kind, "spec": _spec(rng, shape, sizes, 0.7)}
    if kind in ("psum_broadcast", "pmax_broadcast"):
        return {"kind": kind, "axis": axis, "source": int(rng.integers(n))}
    if not divisible:
        return None
    dim = int(rng.choice(divisible))
    if kind == "psum_scatter":
        return {"kind": kind, "axis": axis, "dim": dim, "source": int(rng.integers(n))}
    if kind == "ppermute":
        return {"kind": kind, "axis": axis, "dim": dim, "shift": int(rng.integers(1, n)) if n > 1 else 0}
    if kind == "all_gather":
        return {"kind": kind, "axis": axis, "dim": dim}
    others = [d for d in divisible if d != dim]
    if not others:
        return None
    return {"kind": kind, "axis": axis, "dim": dim, "to": int(rng.choice(others))}


def plan(graph: Graph, devices: int, rng: np.random.Generator,
         partitioners: tuple[str, ...] = PARTITIONERS,
         uneven: np.random.Generator | None = None) -> ShardingPlan:
    """A sharding plan for `graph` on `devices` devices (graph.json's `sharding`).
    `uneven`: a stream of its own that makes UNEVEN_P of the sharding constraints uneven,
    after everything else is drawn, so the rest of a seed's plans stay as they were."""
    shapes = mesh_shapes(devices)
    mesh = shapes[int(rng.integers(len(shapes)))]
    sizes = dict(zip(AXES, mesh, strict=False))
    regions = {}
    for v, value in enumerate(graph.values):
        if rng.random() < REGION_P:
            region = _region(rng, value, sizes)
            if region is not None:
                regions[v] = region
    # The draws in this order (partitioner, inputs, outputs): the plans of a seed stay.
    partitioner = str(rng.choice(list(partitioners)))
    inputs = [_spec(rng, v.shape, sizes) for v in graph.inputs]
    outputs = [_spec(rng, graph.values[o].shape, sizes) for o in graph.outputs]
    for v, region in regions.items():
        if uneven is not None and region["kind"] == "constraint" and uneven.random() < UNEVEN_P:
            spec = _uneven(uneven, region["spec"], tuple(graph.values[v].shape), sizes)
            if spec is not None:
                region["spec"] = spec
    return ShardingPlan(devices=devices, mesh=mesh, axes=AXES[:len(mesh)], partitioner=partitioner,
                        inputs=inputs, outputs=outputs, regions=regions)


def _partition(*entries: str | None) -> PartitionSpec:
    """`PartitionSpec(*entries)`, through a typed view: jax leaves its constructor unannotated."""
    from jax.sharding import PartitionSpec

    make: Callable[..., PartitionSpec] = PartitionSpec
    return make(*entries)


def _identity_region(region: dict[str, Any], mesh: Any, rank: int) -> Callable[[Any], Any]:
    """The region as a function of its value; each returns its argument, value for value."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import NamedSharding

    # jax leaves these unannotated: their signatures here, so that calls are checked.
    constrain: Callable[[Any, NamedSharding], Any] = lax.with_sharding_constraint
    psum: Callable[[Any, str], Any] = lax.psum
    pmax: Callable[[Any, str], Any] = lax.pmax
    ppermute: Callable[[Any, str, list[tuple[int, int]]], Any] = lax.ppermute
    psum_scatter: Callable[..., Any] = lax.psum_scatter
    all_to_all: Callable[..., Any] = lax.all_to_all

    kind = region["kind"]
    if kind == "constraint":
        sharding = NamedSharding(mesh, _partition(*region["spec"]))
        return lambda x: constrain(x, sharding)
    axis = region["axis"]
    n = mesh.shape[axis]

    def on(dim: int) -> Any:
        return _partition(*[axis if d == dim else None for d in range(rank)])

    def neutral(x: Any, biggest: bool) -> Any:
        if biggest:
            low = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else np.iinfo(x.dtype).min
            return jnp.full_like(x, low)
        return jnp.full_like(x, -0.0 if jnp.issubdtype(x.dtype, jnp.floating) else 0)

    def only_source(x: Any, biggest: bool = False) -> Any:
        return jnp.where(lax.axis_index(axis) == region["source"], x, neutral(x, biggest))

    if kind == "all_gather":
        body, ins, outs = (lambda x: lax.all_gather(x, axis, axis=region["dim"], tiled=True)), on(region["dim"]), _partition()
    elif kind == "psum_scatter":
        body = lambda x: psum_scatter(only_source(x), axis,  # noqa: E731
                                      scatter_dimension=region["dim"], tiled=True)
        ins, outs = _partition(), on(region["dim"])
    elif kind == "psum_broadcast":
        body, ins, outs = (lambda x: psum(only_source(x), axis)), _partition(), _partition()
    elif kind == "pmax_broadcast":
        body, ins, outs = (lambda x: pmax(only_source(x, biggest=True), axis)), _partition(), _partition()
    elif kind == "ppermute":
        there = [(i, (i + region["shift"]) % n) for i in range(n)]
        back = [(j, i) for i, j in there]
        body = lambda x: ppermute(ppermute(x, axis, there), axis, back)  # noqa: E731
        ins = outs = on(region["dim"])
    elif kind == "all_to_all":
        body = lambda x: all_to_all(x, axis, split_axis=region["to"],  # noqa: E731
                                    concat_axis=region["dim"], tiled=True)
        ins, outs = on(region["dim"]), on(region["to"])
    else:
        raise ValueError(f"unknown SPMD region {kind!r}")
    # check_vma off: the replication a region's out_specs claim holds by construction
    # (tests/spmd check every region against its value), and jax cannot infer it through
    # a tiled all_gather.
    return jax.shard_map(body, mesh=mesh, in_specs=ins, out_specs=outs, check_vma=False)


def make_mesh(sharding: ShardingPlan) -> Any:
    import jax
    from jax.sharding import AxisType, Mesh

    devices = jax.devices()
    if len(devices) < sharding.devices:
        raise RuntimeError(f"the program needs {sharding.devices} devices, this process has "
                           f"{len(devices)} (XLA_FLAGS=--xla_force_host_platform_device_count)")
    grid = np.array(devices[:math.prod(sharding.mesh)]).reshape(sharding.mesh)
    return Mesh(grid, sharding.axes, axis_types=(AxisType.Auto,) * len(sharding.axes))


def sharded_fn(graph: Graph, sharding: ShardingPlan) -> tuple[Wrapped, list[Any]]:
    """The program as a jitted function with its plan, and its inputs' abstract values."""
    import jax
    from jax.sharding import NamedSharding

    from xla_sentinel.core.dtypes import NP_DTYPES
    from xla_sentinel.ops.lax_builders import build
    from xla_sentinel.ops.table import OPS
    from xla_sentinel.programs.evaluate import own_operands, shape_struct

    mesh = make_mesh(sharding)
    regions = {v: _identity_region(r, mesh, len(graph.values[v].shape))
               for v, r in sharding.regions.items()}

    def program(*args: Any) -> tuple[Any, ...]:
        # The graph's one walk, each value (input or op result) passed through its region.
        def region(v: int, x: Any) -> Any:
            return regions[v](x) if v in regions else x

        def apply(v: int, node: Node, xs: list[Any]) -> Any:
            return region(v, build(OPS[node.op], node.attrs, *own_operands(graph, node, xs)))

        return tuple(graph.run(args, apply, load=region))

    def named(spec: Spec) -> Any:
        return NamedSharding(mesh, _partition(*spec))

    structs = [shape_struct(v.shape, NP_DTYPES[v.dtype], sharding=named(s))
               for v, s in zip(graph.inputs, sharding.inputs, strict=True)]
    fn = jax.jit(program, keep_unused=True,
                 out_shardings=tuple(named(s) for s in sharding.outputs))
    return fn, structs


def lower_text(graph: Graph) -> str:
    """StableHLO text of the program: partitioned per its plan if it has one."""
    from xla_sentinel.programs import evaluate

    sharding = graph.sharding
    if sharding is None:
        return evaluate.lower_text(graph)
    from jax._src import config

    fn, structs = sharded_fn(graph, sharding)
    with config.use_shardy_partitioner(sharding.partitioner == "shardy"):
        return fn.lower(*structs).as_text()


def per_device_values(info: dict[str, Any]) -> set[str]:
    """The values of @main (module info: xla/cuts.py) that exist only per device:
    inside a GSPMD manual region, from SPMDFullToShardShape to SPMDShardToFullShape."""
    manual: set[str] = set()
    for op in info["ops"]:
        if _LEAVES.search(op["text"]):
            continue
        if _ENTERS.search(op["text"]) or any(v in manual for v in op["operands"]):
            manual.update(r["vid"] for r in op["results"])
    return manual


def region_ops(info: dict[str, Any], i: int, manual: set[str]) -> list[int]:
    """Op i with every op it needs back to where its per-device operands enter their
    region, and the Sharding custom calls that say how they enter: the smallest cut that
    computes op i's global results from global values."""
    made_by = {r["vid"]: k for k, op in enumerate(info["ops"]) for r in op["results"]}
    keep, stack = {i}, [i]
    while stack:
        op = info["ops"][stack.pop()]
        entering = _ENTERS.search(op["text"]) is not None
        for v in op["operands"]:
            k = made_by.get(v)
            if k is None or k in keep:
                continue
            if v in manual or (entering and _SHARDING.search(info["ops"][k]["text"])):
                keep.add(k)
                stack.append(k)
    return sorted(keep)
