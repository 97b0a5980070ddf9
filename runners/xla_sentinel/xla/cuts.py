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
from typing import TYPE_CHECKING, Any, cast

from xla_sentinel.core.elements import MLIR_ELEMENTS
from xla_sentinel.core.stablehlo import LOCATION_PREFIX

if TYPE_CHECKING:
    from jaxlib.mlir import ir

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


def _asm(module: ir.Module, debug_info: bool) -> str:
    """The module as MLIR text. jaxlib's stub types `get_asm` as `object` because
    `binary=True` gives bytes; without it the result is a str."""
    return cast(str, module.operation.get_asm(enable_debug_info=debug_info))


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
        name: str = value.get_name(self.state)
        return name

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
            # jaxlib's func.py subclass adds add_entry_block; its stub types FuncOp as the
            # generated base class, which lacks it.
            entry = fn.add_entry_block()  # type: ignore[attr-defined]
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
            return _asm(module, debug_info)

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
    id, a collective) or a Shardy construct this does not know. Functions @main does not
    reach are dropped first: a cut keeps every function of its module, a shard_map's body
    among them, and each op of s33-i45 and s33-i297 alone was refused for one and compiled
    partitioned, so the reference shared the partitioner's bug or aborted on it."""
    from jaxlib.mlir import ir, passmanager

    with _context():
        try:
            module = ir.Module.parse(text)
        except Exception as e:  # MLIR raises its own error type
            raise CutError(f"module does not parse: {str(e).splitlines()[0]}") from None
        passmanager.PassManager.parse("builtin.module(symbol-dce)").run(module.operation)
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
        out = _asm(module, debug_info=False)
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
        return _asm(ir.Module.parse(text), debug_info=False)


# Inside regions (issue 28): a culprit that is a region op (a loop, a conditional, a
# manual computation) or a call is descended into by exposing inner values as extra results
# of every op around them, up to @main, which then returns only those. A region path is
# [op index, region index] per level from @main; a while's level may add the iteration
# whose values are exposed ([op, 1, k]: the body at iteration k, from 0; [op, 0, k]: the
# condition's ops as it computes them before iteration k, `expose`).
# How a region's values leave its op, per op kind (`_thread`); a while's condition hands
# nothing on, so its values are recomputed where they can leave (`_condition_values`).
EXPOSABLE = {"stablehlo.while": (1,), "stablehlo.case": None, "stablehlo.if": None,
             "sdy.manual_computation": (0,)}  # None: every region (each branch)
WHILE_CONDITION = 0
_MESH_AXIS = re.compile(r'"(\w+)"\s*=\s*(\d+)')
_QUOTED = re.compile(r'"(\w+)"')


def inline_calls(text: str) -> str:
    """The module with every func.call reachable from @main inlined, its callee's ops
    cloned in its place as written (MLIR's inliner leaves calls inside StableHLO regions,
    whose dialect declares no inlining, and canonicalizes what it inlines)."""
    from jaxlib.mlir import ir

    with _context():
        module = ir.Module.parse(text)
        funcs = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                 for op in module.body.operations if "sym_name" in op.attributes}
        main, _ = _main_block(module)
        for _ in range(_MAX_INLINES):
            call = next((op for op in _walk(main) if op.name == "func.call"), None)
            if call is None:
                break
            _inline(call, funcs[ir.FlatSymbolRefAttr(call.attributes["callee"]).value])
        else:
            raise CutError(f"more than {_MAX_INLINES} calls to inline (recursion?)")
        return _asm(module, debug_info=True)


_MAX_INLINES = 1000


def _inline(call: Any, callee: Any) -> None:
    from jaxlib.mlir import ir

    block = callee.regions[0].blocks[0]
    mapping = dict(zip(block.arguments, call.operands, strict=True))
    ip = ir.InsertionPoint(call)
    for old in _body(block):
        # The clone would still read the callee's values, in its operands and its regions.
        _clone_with(old, ip, mapping)
    ret = block.operations[len(block.operations) - 1].operation
    for r, v in zip(call.results, ret.operands, strict=True):
        r.replace_all_uses_with(mapping.get(v, v))
    call.erase()


def _main_block(module: Any) -> Any:
    from jaxlib.mlir import ir

    for op in module.body.operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op.operation, op.regions[0].blocks[0]
    raise CutError("module has no @main function")


def _body(block: Any) -> list[Any]:
    """A block's ops without its terminator."""
    return [op.operation for op in block.operations][:-1]


def _descend(main_block: Any, path: list[list[int]]) -> tuple[list[tuple[Any, int, int]], Any]:
    """The ops (with the region taken and the iteration, 0 unless a while's level names
    one) from @main's block down `path` ([op index, region index(, iteration)] per level),
    and the block reached."""
    chain, block = [], main_block
    for level in path:
        j, r, *rest = level
        k = rest[0] if rest else 0
        ops = _body(block)
        if len(rest) > 1 or j >= len(ops) or r >= len(ops[j].regions):
            raise CutError(f"no region {r} of op {j} at {path}")
        if k and (k < 0 or ops[j].name != "stablehlo.while"):
            raise CutError(f"iteration {k} of op {j} ({ops[j].name}) at {path}")
        chain.append((ops[j], r, k))
        block = ops[j].regions[r].blocks[0]
    return chain, block


def region_ops(text: str, path: list[list[int]]) -> list[dict[str, Any]]:
    """The ops of the block at `path` (module info's form, names from types only, since
    a value's printed name inside a region means nothing outside it): name, first line of
    text, operand and result types, region count, location, and whether the block's
    terminator hands on one of its results ("returned": a while condition's decision)."""
    from jaxlib.mlir import ir

    with _context():
        module = ir.Module.parse(text)
        _, block = _descend(_main_block(module)[1], path)
        handed = list(block.operations[len(block.operations) - 1].operation.operands)
        out = []
        for op in _body(block):
            lines = op.get_asm(large_elements_limit=4).strip().splitlines()
            out.append({"name": op.name, "text": lines[0][:300] if lines else op.name,
                        "operands": [describe_type(str(v.type)) for v in op.operands],
                        "results": [describe_type(str(r.type)) for r in op.results],
                        "regions": len(op.regions), "location": str(op.location)[:300],
                        "returned": any(r in handed for r in op.results)})
        return out


def region_arguments(text: str, path: list[list[int]]) -> list[dict[str, Any]]:
    """The types of the block arguments of the block at `path` (describe_type)."""
    from jaxlib.mlir import ir

    with _context():
        module = ir.Module.parse(text)  # held: the blocks below live as long as it does
        _, block = _descend(_main_block(module)[1], path)
        return [describe_type(str(a.type)) for a in block.arguments]


def expose(text: str, path: list[list[int]], ops: list[int]) -> str:
    """The module whose @main returns only the tensor results of ops `ops` of the block at
    `path` (-k-1 for its block argument k): each region op on the way out carries them as
    extra results. A while carries the value of the iteration its level names (0, the
    first, unless [op, 1, k] says k: a counter carried beside the loop's values picks it;
    the trip count and the body's other ops are untouched), so it is computed from the
    loop's initial values, which a cut feeds exactly, and zeros where the loop stops
    sooner; a case or if returns zeros from its other branches; a manual computation
    returns each device's value stacked along a new leading dimension.

    A while's condition ([op, 0, k]) hands no value on: its ops are recomputed where
    they can leave, from what the condition reads before iteration k (the loop's initial
    values for k = 0, else what the body returns at iteration k - 1). Op index
    len(its ops) (its terminator) stands for the loop's trip count: how often the
    condition let the body run, counted beside the loop."""
    from jaxlib.mlir import ir

    with _context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        main, block = _main_block(module)
        chain, inner = _descend(block, path)
        if chain and chain[-1][0].name == "stablehlo.while" and chain[-1][1] == WHILE_CONDITION:
            values, chain = _condition_values(chain, inner, ops)
        else:
            body = _body(inner)
            arguments = list(inner.arguments)
            values = [r for j in ops for r in ([arguments[-j - 1]] if j < 0 else body[j].results)]
        values = [v for v in values if describe_type(str(v.type))["dtype"]]
        if not values:
            raise CutError(f"ops {ops} at {path} give no tensor to expose")
        for op, r, k in reversed(chain):
            values = _thread(module, op, r, values, k)
        ret = block.operations[len(block.operations) - 1].operation
        ir.Operation.create("func.return", operands=values, ip=ir.InsertionPoint(ret))
        ret.erase()
        fn_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(fn_type.inputs, [v.type for v in values]))
        if "res_attrs" in main.attributes:
            del main.attributes["res_attrs"]  # they describe @main's own results
        if not module.operation.verify():
            raise CutError(f"exposing ops {ops} at {path} does not verify")
        return _asm(module, debug_info=True)


def _condition_values(chain: list[tuple[Any, int, int]], cond: Any, ops: list[int]
                      ) -> tuple[list[Any], list[tuple[Any, int, int]]]:
    """The values of ops `ops` of a while's condition block `cond` (chain[-1]: the while,
    its condition, check k), and the chain that takes them out: clones of the condition's
    ops, fed what the condition reads at check k, placed before the loop (k = 0) or at the
    end of its body (taken out at iteration k - 1); len(ops of cond): the trip count."""
    from jaxlib.mlir import ir

    loop, _, k = chain[-1]
    outer = chain[:-1]
    cond_ops = _body(cond)
    if ops == [len(cond_ops)]:
        return [_trip_count(loop)], outer
    if any(j >= len(cond_ops) for j in ops):
        raise CutError(f"the condition has {len(cond_ops)} ops; asked {ops}")
    if k == 0:
        ip, reads, rest = ir.InsertionPoint(loop), list(loop.operands), outer
    else:
        body = loop.regions[1].blocks[0]
        term = body.operations[len(body.operations) - 1].operation
        ip, reads, rest = ir.InsertionPoint(term), list(term.operands), [*outer, (loop, 1, k - 1)]
    mapping = dict(zip(cond.arguments, reads, strict=True))
    clones: list[Any] = []
    for old in cond_ops[:max([j for j in ops if j >= 0], default=-1) + 1]:
        clones.append(_clone_with(old, ip, mapping))
    return [r for j in ops for r in ([reads[-j - 1]] if j < 0 else clones[j].results)], rest


def _clone_with(old: Any, ip: Any, mapping: dict[Any, Any]) -> Any:
    """`old` cloned at `ip`, reading mapping[v] for each value v it (or an op nested in
    it) reads that `mapping` holds; its results join the mapping."""
    new = old.clone(ip=ip)
    for inner_old, inner_new in zip([old, *_walk(old)], [new, *_walk(new)], strict=True):
        for k, v in enumerate(inner_old.operands):
            if v in mapping:
                inner_new.operands[k] = mapping[v]
    mapping.update(zip(old.results, new.results, strict=True))
    return new


def _counter_type() -> Any:
    from jaxlib.mlir import ir

    return ir.RankedTensorType.get([], ir.IntegerType.get_signless(32))


def _scalar(t: Any, value: str, ip: Any) -> Any:
    from jaxlib.mlir import ir

    return ir.Operation.create("stablehlo.constant", results=[t], ip=ip, attributes={
        "value": ir.Attribute.parse(f"dense<{value}> : {t}")}).results[0]


def _count(counter: Any, ip: Any) -> Any:
    """counter + 1."""
    from jaxlib.mlir import ir

    one = _scalar(counter.type, "1", ip)
    return ir.Operation.create("stablehlo.add", results=[counter.type], operands=[counter, one],
                               ip=ip).results[0]


def _trip_count(loop: Any) -> Any:
    """The while `loop` rebuilt with a counter carried beside its values, one more per run
    of its body: the new loop's last result, how many iterations ran."""
    from jaxlib.mlir import ir

    ct = _counter_type()
    attrs = {loop.attributes[k].name: loop.attributes[k].attr for k in range(len(loop.attributes))}
    zero = _scalar(ct, "0", ir.InsertionPoint(loop))
    cond, body = (loop.regions[k].blocks[0] for k in (0, 1))
    cond.add_argument(ct, ir.Location.unknown())
    counter = body.add_argument(ct, ir.Location.unknown())
    end = ir.InsertionPoint(body.operations[len(body.operations) - 1])
    _retarget(body, [_count(counter, end)], "stablehlo.return")
    n = len(loop.results)
    return list(_rebuild(loop, [*loop.operands, zero], [ct], attrs).results)[n]


def _zeros(t: Any, ip: Any) -> Any:
    from jaxlib.mlir import ir

    dtype = describe_type(str(t))["dtype"]
    zero = "false" if dtype == "bool" else "0" if dtype and dtype[0] in "su" else "0.0"
    if dtype is None or dtype.startswith("c"):
        raise CutError(f"no zero of type {t}")
    return ir.Operation.create("stablehlo.constant", results=[t], ip=ip, attributes={
        "value": ir.Attribute.parse(f"dense<{zero}> : {t}")}).results[0]


def _rebuild(op: Any, operands: list[Any], extra_types: list[Any], attrs: dict[str, Any]) -> Any:
    """`op` again with more operands and results, its regions moved over, its old results'
    uses pointed at the new op's; the old op is erased."""
    from jaxlib.mlir import ir

    new = ir.Operation.create(op.name, results=[*(r.type for r in op.results), *extra_types],
                              operands=operands, attributes=attrs, regions=len(op.regions),
                              loc=op.location, ip=ir.InsertionPoint(op))
    for old_region, new_region in zip(op.regions, new.regions, strict=True):
        for b in list(old_region.blocks):
            b.append_to(new_region)
    for k, r in enumerate(op.results):
        r.replace_all_uses_with(new.results[k])
    op.erase()
    return new


def _retarget(block: Any, extra: list[Any], name: str) -> None:
    """Give the block's terminator (`name`) the extra operands."""
    from jaxlib.mlir import ir

    term = block.operations[len(block.operations) - 1].operation
    ir.Operation.create(name, operands=[*term.operands, *extra], ip=ir.InsertionPoint(term))
    term.erase()


def _thread(module: Any, op: Any, r: int, values: list[Any], k: int = 0) -> list[Any]:
    """`values` (of region `r` of `op`; of iteration `k` of a while) as extra results of
    `op`; returns them."""
    from jaxlib.mlir import ir

    allowed = EXPOSABLE.get(op.name, ())
    if allowed is not None and r not in allowed:
        raise CutError(f"cannot expose values of region {r} of {op.name}")
    attrs = {op.attributes[k].name: op.attributes[k].attr for k in range(len(op.attributes))}
    types = [v.type for v in values]
    n = len(op.results)
    if op.name == "stablehlo.while":
        ct = _counter_type()
        before = ir.InsertionPoint(op)
        inits = [*(_zeros(t, before) for t in types), _scalar(ct, "0", before)]
        cond, body = (op.regions[b].blocks[0] for b in (0, 1))
        for t in [*types, ct]:
            cond.add_argument(t, ir.Location.unknown())
            body.add_argument(t, ir.Location.unknown())
        carried, counter = list(body.arguments)[-len(types) - 1:-1], list(body.arguments)[-1]
        end = ir.InsertionPoint(body.operations[len(body.operations) - 1])
        # A counter of iterations, not a flag: at iteration k the value is taken, the
        # others keep what is carried (zeros before it, and where the loop stops sooner).
        at_k = ir.Operation.create(
            "stablehlo.compare", results=[ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))],
            operands=[counter, _scalar(ct, str(k), end)], ip=end,
            attributes={"comparison_direction": ir.Attribute.parse("#stablehlo<comparison_direction EQ>")}
        ).results[0]
        picked = [ir.Operation.create("stablehlo.select", results=[t], operands=[at_k, v, c],
                                      ip=end).results[0]
                  for t, c, v in zip(types, carried, values, strict=True)]
        _retarget(body, [*picked, _count(counter, end)], "stablehlo.return")
        new = _rebuild(op, [*op.operands, *inits], [*types, ct], attrs)
        return list(new.results)[n:n + len(types)]
    if op.name in ("stablehlo.case", "stablehlo.if"):
        for k, region in enumerate(op.regions):
            block = region.blocks[0]
            if k == r:
                _retarget(block, values, "stablehlo.return")
            else:
                end = ir.InsertionPoint(block.operations[len(block.operations) - 1])
                _retarget(block, [_zeros(t, end) for t in types], "stablehlo.return")
        return list(_rebuild(op, list(op.operands), types, attrs).results)[n:]
    # sdy.manual_computation: each device's value, with a leading dimension of 1, joined
    # along it over the manual axes.
    outs = str(attrs["out_shardings"])
    mesh_name = re.search(r"<@([\w.$-]+)", outs) or re.search(r"<@([\w.$-]+)", str(attrs["in_shardings"]))
    if mesh_name is None:
        raise CutError("manual computation without a named mesh")
    sizes = _mesh_sizes(module, mesh_name.group(1))
    manual = _QUOTED.findall(str(attrs["manual_axes"]))
    devices = 1
    for a in manual:
        devices *= sizes[a]
    block = op.regions[0].blocks[0]
    end = ir.InsertionPoint(block.operations[len(block.operations) - 1])
    stacked, global_types, specs = [], [], []
    for v in values:
        t = ir.RankedTensorType(v.type)
        one = ir.RankedTensorType.get([1, *t.shape], t.element_type)
        stacked.append(ir.Operation.create("stablehlo.reshape", results=[one], operands=[v],
                                           ip=end).results[0])
        global_types.append(ir.RankedTensorType.get([devices, *t.shape], t.element_type))
        axes = ", ".join(f'"{a}"' for a in manual)
        dims = ", ".join([f"{{{axes}}}", *["{}"] * len(t.shape)])
        specs.append(f"<@{mesh_name.group(1)}, [{dims}]>")
    _retarget(block, stacked, "sdy.return")
    listed = outs.rstrip()
    assert listed.endswith("]>"), listed
    joined = listed[:-2] + (", " if "<@" in listed else "") + ", ".join(specs) + "]>"
    attrs["out_shardings"] = ir.Attribute.parse(joined)
    return list(_rebuild(op, list(op.operands), global_types, attrs).results)[n:]


def _mesh_sizes(module: Any, name: str) -> dict[str, int]:
    for op in module.body.operations:
        if op.operation.name == "sdy.mesh" and f"@{name} " in str(op.operation):
            return {a: int(s) for a, s in _MESH_AXIS.findall(str(op.operation))}
    raise CutError(f"no sdy.mesh @{name}")
