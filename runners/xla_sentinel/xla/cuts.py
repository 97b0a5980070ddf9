"""Cut a StableHLO module into subgraphs: the primitive every bisection stage is built on.

Works on any StableHLO text (generated programs and replayed traces alike) through the
MLIR bindings that ship in jaxlib. Values of @main are named as MLIR prints them
(`%arg0`, `%3`, `%cst_1`, `%5#1`); a cut keeps some of @main's ops, feeds the values they
read from outside as parameters, and returns the values it is asked for. What an op reads
includes the values of @main that its regions use (the implicit captures StableHLO allows
in case, if and while regions, as jax lowers a cond that closes over a value): a cut feeds
them as parameters as well, since a function cannot read another's values. Kept ops carry the
location `sentinel.op<i>` (i = index in the original @main), which XLA copies into HLO
metadata, so an op can be found again inside the optimized HLO. Runs in worker processes.
"""

from __future__ import annotations

import re
from typing import Any

from xla_sentinel.core.elements import MLIR_ELEMENTS
from xla_sentinel.core.stablehlo import LOCATION_PREFIX

_TENSOR = re.compile(r"^tensor<(?:([\d?]+(?:x[\d?]+)*)x)?([a-z]+\d*)>$")
# Argument and result attributes that say how an SPMD module shards a value (Shardy, GSPMD).
SHARDING_ATTRS = ("sdy.sharding", "mhlo.sharding")
# Ops that only say how a value is laid out over the devices: on one device each is its
# operand (Shardy's constraint and reshard, GSPMD's Sharding custom call).
_LAYOUT_OPS = frozenset({"sdy.sharding_constraint", "sdy.reshard"})
_LAYOUT_CALLS = frozenset({"Sharding"})
# What exists only per device, so has no one-device form: a manual (shard_map) region
# (Shardy's manual computation, GSPMD's shape custom calls around its body), a device's or
# replica's id, a collective.
_PER_DEVICE_OPS = frozenset({
    "sdy.manual_computation", "stablehlo.partition_id", "stablehlo.replica_id",
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
    "stablehlo.reduce_scatter", "stablehlo.collective_permute", "stablehlo.collective_broadcast"})
_PER_DEVICE_CALLS = frozenset({"SPMDFullToShardShape", "SPMDShardToFullShape"})
_SDY = re.compile(r"\bsdy\.")


class CutError(ValueError):
    """The module cannot be cut as asked (e.g. a parameter of a type XLA cannot feed)."""


def describe_type(t: str) -> dict[str, Any]:
    """{"type", "dtype", "shape"} of an MLIR type; dtype None for non-tensor types."""
    m = _TENSOR.match(t)
    if not m or m.group(2) not in MLIR_ELEMENTS:
        return {"type": t, "dtype": None, "shape": None}
    dims = [int(d) for d in m.group(1).split("x")] if m.group(1) else []
    return {"type": t, "dtype": MLIR_ELEMENTS[m.group(2)], "shape": dims}


def _context() -> Any:
    from jax._src.interpreters import mlir

    return mlir.make_ir_context()


class Parsed:
    """A parsed module with @main's ops and the names of their values."""

    def __init__(self, text: str) -> None:
        from jaxlib.mlir import ir

        self.ir = ir
        self.ctx = _context()
        with self.ctx:
            try:
                self.module = ir.Module.parse(text)
            except Exception as e:  # MLIR raises its own error type
                raise CutError(f"module does not parse: {str(e).splitlines()[0]}") from None
            self.main = self._find_main()
            self.block = self.main.regions[0].blocks[0]
            self.state = ir.AsmState(self.main.operation)
            ops = list(self.block.operations)
            self.ops, self.terminator = ops[:-1], ops[-1]
        self._by_name: dict[str, Any] | None = None
        self._name_of: dict[Any, str] | None = None

    def _find_main(self) -> Any:
        for op in self.module.body.operations:
            if "sym_name" in op.attributes and \
                    self.ir.StringAttr(op.attributes["sym_name"]).value == "main":
                return op
        raise CutError("module has no @main function")

    def name(self, value: Any) -> str:
        return value.get_name(self.state)

    def info(self) -> dict[str, Any]:
        """@main's arguments, ops and returned values. An op's "operands" are every value of
        @main it reads: its own operands, then the values its regions capture that are not
        among them (also listed as its "captures"), so that whoever follows the graph (the
        cuts of context.py and worker/bisect_handlers.py, spmd.py's regions) sees a case depend on what its
        branches read."""
        with self.ctx:
            args = [{"vid": self.name(a), **describe_type(str(a.type))} for a in self.block.arguments]
            ops = []
            for op in self.ops:
                o = op.operation
                text = o.get_asm(large_elements_limit=4).strip().splitlines()
                operands = [self.name(v) for v in o.operands]
                captures = [v for v in self.captures(o) if v not in operands]
                ops.append({"name": o.name,
                            "operands": operands + captures, "captures": captures,
                            "results": [{"vid": self.name(r), **describe_type(str(r.type))}
                                        for r in o.results],
                            "regions": len(o.regions), "text": text[0][:300] if text else o.name})
            returns = [self.name(v) for v in self.terminator.operation.operands]
        return {"args": args, "ops": ops, "returns": returns}

    def _values(self) -> dict[str, Any]:
        if self._by_name is None:
            self._by_name = {self.name(a): a for a in self.block.arguments}
            for op in self.ops:
                self._by_name.update({self.name(r): r for r in op.operation.results})
        return self._by_name

    def _names(self) -> dict[Any, str]:
        """@main's own values (its arguments, its ops' results) by value: the names MLIR
        gives values nested in regions repeat from one region to the next, so only
        identity tells a value of @main from one defined inside an op."""
        if self._name_of is None:
            self._name_of = {v: k for k, v in self._values().items()}
        return self._name_of

    def captures(self, op: Any) -> list[str]:
        """The values of @main that ops nested in `op`'s regions read, each once, in order:
        what the op reads besides its operands."""
        names = self._names()
        found: dict[str, None] = {}
        for inner in _walk(op):
            for v in inner.operands:
                if v in names:
                    found[names[v]] = None
        return list(found)

    def cut(self, keep: list[int], params: list[str], outputs: list[str], *,
            debug_info: bool = True) -> str:
        """A new module whose @main takes `params`, runs the ops `keep` (indices, in order)
        and returns `outputs`; the other functions come along. Every value the kept ops
        read must be kept or a parameter. This module is left as it was, so one parse
        serves many cuts."""
        ir = self.ir
        from jaxlib.mlir.dialects import func

        with self.ctx, ir.Location.unknown():
            values = self._values()
            missing = [v for v in [*params, *outputs] if v not in values]
            if missing:
                raise CutError(f"no value {missing[0]} in @main")
            in_types = [values[p].type for p in params]
            for p, t in zip(params, in_types, strict=True):
                if describe_type(str(t))["dtype"] is None:
                    raise CutError(f"{p} has type {t}, which cannot be a parameter")
            out_types = [values[o].type for o in outputs]
            available = set(params)
            for i in keep:
                op = self.ops[i].operation
                for name in [*(self.name(v) for v in op.operands), *self.captures(op)]:
                    if name not in available:
                        raise CutError(f"op {i} ({op.name}) reads {name}, which the cut "
                                       "neither keeps nor takes as a parameter")
                available.update(self.name(r) for r in op.results)
            module = ir.Module.create()
            attrs = self.module.operation.attributes
            for k in range(len(attrs)):  # num_partitions, num_replicas, the module's name
                module.operation.attributes[attrs[k].name] = attrs[k].attr
            body = ir.InsertionPoint(module.body)
            for op in self.module.body.operations:
                if op.operation != self.main.operation:
                    op.operation.clone(ip=body)
            with body:
                fn = func.FuncOp("main", ir.FunctionType.get(in_types, out_types))
            entry = fn.add_entry_block()
            mapped = dict(zip(params, entry.arguments, strict=True))
            at_end = ir.InsertionPoint(entry)
            for i in keep:
                old = self.ops[i].operation
                operand_names = [self.name(v) for v in old.operands]
                result_names = [self.name(r) for r in old.results]
                new = old.clone(ip=at_end)
                for k, name in enumerate(operand_names):
                    new.operands[k] = mapped[name]
                self._remap_captures(old, new, mapped)
                new.location = ir.Location.name(f"{LOCATION_PREFIX}{i}")
                mapped.update(zip(result_names, new.results, strict=True))
            with at_end:
                func.ReturnOp([mapped[o] for o in outputs])
            fn.attributes["sym_visibility"] = ir.StringAttr.get("public")
            self._carry_value_attrs(fn, params, outputs)
            if not module.operation.verify():
                raise CutError("the cut module does not verify")
            return module.operation.get_asm(enable_debug_info=debug_info)

    def _remap_captures(self, old: Any, new: Any, mapped: dict[str, Any]) -> None:
        """Point what `new` (a clone of @main's op `old`) captures in its regions at the new
        function's values: the clone's nested ops still read @main's, which the new
        function cannot (func.func is isolated from above: "using value defined outside
        the region"). A clone has the same nesting, so the two walks pair op with op."""
        names = self._names()
        for inner_old, inner_new in zip(_walk(old), _walk(new), strict=True):
            for k, v in enumerate(inner_old.operands):
                if v in names:
                    inner_new.operands[k] = mapped[names[v]]

    def _carry_value_attrs(self, fn: Any, params: list[str], outputs: list[str]) -> None:
        """A parameter that is one of @main's arguments, and an output that @main returns,
        keep their shardings (SHARDING_ATTRS): they decide how each device of an SPMD module
        slices them, and a cut without them is another partitioned program (runners/xla_sentinel/programs/spmd.py).
        Other attributes (donation aliases name @main's own result indices) stay behind."""
        ir = self.ir
        main = self.main.operation.attributes

        def shardings(d: Any) -> Any:
            named = [ir.DictAttr(d)[k] for k in range(len(ir.DictAttr(d)))]
            return ir.DictAttr.get({a.name: a.attr for a in named if a.name in SHARDING_ATTRS})

        def attrs(name: str, count: int) -> list[Any]:
            if name not in main:
                return [ir.DictAttr.get({})] * count
            return [shardings(d) for d in ir.ArrayAttr(main[name])]

        args = attrs("arg_attrs", len(self.block.arguments))
        arg_at = {self.name(a): args[k] for k, a in enumerate(self.block.arguments)}
        returns = [self.name(v) for v in self.terminator.operation.operands]
        results = attrs("res_attrs", len(returns))
        res_at: dict[str, Any] = {}
        for k, name in enumerate(returns):
            res_at.setdefault(name, results[k])
        empty = ir.DictAttr.get({})
        if any(p in arg_at for p in params):
            fn.attributes["arg_attrs"] = ir.ArrayAttr.get([arg_at.get(p, empty) for p in params])
        if any(o in res_at for o in outputs):
            fn.attributes["res_attrs"] = ir.ArrayAttr.get([res_at.get(o, empty) for o in outputs])


def _walk(op: Any) -> Any:
    """Every op nested in `op` (its regions, their regions), before the ops inside them."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner.operation
                yield from _walk(inner.operation)


def _call_target(op: Any) -> str | None:
    from jaxlib.mlir import ir

    if op.name != "stablehlo.custom_call" or "call_target_name" not in op.attributes:
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value


def one_device(text: str) -> str | None:
    """The module as one device runs it: `mhlo.num_partitions` 1, no shardings on any
    function's arguments and results or on any op, each layout op (sharding constraint,
    reshard, GSPMD's Sharding custom call) replaced by its operand, no mesh. What an SPMD
    module computes does not depend on its shardings, so this is the same computation
    without the SPMD partitioner: the bisector's unsharded reference (worker/bisect_handlers.py). None where
    the module holds something that exists only per device (a manual region, a partition
    id, a collective) or a Shardy construct this does not know."""
    from jaxlib.mlir import ir

    with _context():
        try:
            module = ir.Module.parse(text)
        except Exception as e:  # MLIR raises its own error type
            raise CutError(f"module does not parse: {str(e).splitlines()[0]}") from None
        ops = list(_walk(module.operation))
        if any(op.name in _PER_DEVICE_OPS or _call_target(op) in _PER_DEVICE_CALLS for op in ops):
            return None
        layout = [op for op in ops if op.name in _LAYOUT_OPS or _call_target(op) in _LAYOUT_CALLS]
        if any(len(op.operands) != 1 or len(op.results) != 1 for op in layout):
            return None
        for op in layout:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
        for op in module.body.operations:
            if op.operation.name == "sdy.mesh":
                op.operation.erase()
        for op in [module.operation, *_walk(module.operation)]:
            attrs = op.attributes
            for name in [attrs[k].name for k in range(len(attrs))]:
                if name in SHARDING_ATTRS:
                    del attrs[name]
                elif name in ("arg_attrs", "res_attrs"):
                    attrs[name] = ir.ArrayAttr.get([_without_shardings(d) for d in ir.ArrayAttr(attrs[name])])
        module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), 1)
        if not module.operation.verify():
            return None
        out = module.operation.get_asm(enable_debug_info=False)
    return None if _SDY.search(out) else out


def _without_shardings(d: Any) -> Any:
    from jaxlib.mlir import ir

    named = [ir.DictAttr(d)[k] for k in range(len(ir.DictAttr(d)))]
    return ir.DictAttr.get({a.name: a.attr for a in named if a.name not in SHARDING_ATTRS})


def module_info(text: str) -> dict[str, Any]:
    return Parsed(text).info()


def cut(text: str, keep: list[int], params: list[str], outputs: list[str]) -> str:
    return Parsed(text).cut(keep, params, outputs)


def strip_locations(text: str) -> str:
    """The module printed without debug locations (what a bug report shows)."""
    from jaxlib.mlir import ir

    with _context():
        return ir.Module.parse(text).operation.get_asm(enable_debug_info=False)
