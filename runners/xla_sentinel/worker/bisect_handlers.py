"""What a worker does with the bisector's requests (runs inside the worker, with jax).

`Info`, `Cut`, `Region` and `Strip` read and edit modules; `RunHlo` compiles and runs HLO text;
`EveryValue` evaluates every value of a module op by op in float64 and `Legal` a case's
outputs under the legal settings, both unsharded where the module is partitioned;
`ListPasses` lists the HLO passes XLA runs on a module. Running a module is the campaign's `Run`
(handlers.run); the handler table (worker/registry.py) maps every request class to its handler.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.elements import NUMPY
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import promote_floats
from xla_sentinel.ops.rules import annotate_ops
from xla_sentinel.programs import spmd
from xla_sentinel.spec.options import LEGAL
from xla_sentinel.worker.protocol import (
    Cut,
    Donation,
    EveryValue,
    Info,
    Legal,
    ListPasses,
    ModuleInfo,
    ModuleText,
    Outputs,
    PassNames,
    Region,
    RunHlo,
    Strip,
    Values,
)
from xla_sentinel.worker.registry import handles
from xla_sentinel.xla import compiler
from xla_sentinel.xla import cuts as mod

# Single-op modules repeat (same op, same shapes) in large programs: compile each once.
_CACHE: OrderedDict[str, Any] = OrderedDict()
_CACHE_SIZE = 512


def _compiled(text: str, options: dict[str, Any]) -> Any:
    key = f"{sorted(options.items())}\n{text}"
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    exe = compiler.compile_module(text, options)
    _CACHE[key] = exe
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return exe


def run_hlo_text(text: str, inputs: list[np.ndarray], options: dict[str, Any]) -> list[np.ndarray]:
    """Compile HLO text (defused, see hlo.defuse) under XLA options and run it."""
    import jaxlib._jax as _jax

    from xla_sentinel.xla import hlo_proto

    stablehlo = _jax.mlir.hlo_to_stablehlo(hlo_proto.proto_from_text(text))
    return compiler.execute(compiler.compile_module(stablehlo, options), inputs)


def _own(value: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(value).astype(NUMPY[dtype])


def _wide(value: np.ndarray) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype.kind == "f" or a.dtype == NP_DTYPES["bf16"]:
        return a.astype(np.float64)
    return a


def _ops_alone(parsed: mod.Parsed, info: dict[str, Any], one_device: bool = False,
               ) -> Iterator[tuple[dict[str, Any], list[str], list[str], str]]:
    """Each op of @main as a module of its own, in order: (op, its operands, its results,
    the module). A GSPMD module's per-device values have no global value: an op that reads
    them is evaluated with the rest of its manual region, whose inner ops are not yielded
    (runners/xla_sentinel/programs/spmd.py). `one_device` (for a partitioned module, mhlo.num_partitions > 1):
    each op compiled unsharded on one device (module.one_device), so the SPMD partitioner
    that every configuration of the module runs is no part of the result; a manual region,
    which exists only per device, keeps its devices."""
    manual = spmd.per_device_values(info)
    for i, op in enumerate(info["ops"]):
        outs = [r["vid"] for r in op["results"]]
        if outs and set(outs) <= manual:
            continue
        keep = spmd.region_ops(info, i, manual) if manual.intersection(op["operands"]) else [i]
        made = {r["vid"] for k in keep for r in info["ops"][k]["results"]}
        params = list(dict.fromkeys(v for k in keep for v in info["ops"][k]["operands"] if v not in made))
        text = parsed.cut(keep, params, outs, debug_info=False)
        yield op, params, outs, (mod.one_device(text) or text) if one_device else text


def _value_types(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {**{a["vid"]: a for a in info["args"]},
            **{r["vid"]: r for op in info["ops"] for r in op["results"]}}


@handles(EveryValue)
def every_value(req: EveryValue) -> Values:
    """Every value of @main in float64: each op compiled alone on float64 operands (the
    float64 eager reference of docs/architecture.md, for any module), on one device where
    the module is partitioned (_ops_alone's `one_device`). Ops that do not widen (hex
    constants, bitcasts) run at their own precision on rounded operands; their names are
    returned in `own_precision`."""
    parsed = mod.Parsed(req.module)
    parsed_info = parsed.info()
    types = _value_types(parsed_info)
    values: dict[str, np.ndarray] = {a["vid"]: _wide(x)
                                     for a, x in zip(parsed_info["args"], req.inputs, strict=True)}
    own_precision = []
    for op, params, outs, text in _ops_alone(parsed, parsed_info,
                                             one_device=compiler.partitions(req.module) > 1):
        results = None
        if _narrowing_float_convert(op, types):
            # The program asks for this rounding: the float64 reference keeps it (as the
            # eager float64 reference does), rounding the exact operand once.
            results = [_own(values[params[0]], op["results"][0]["dtype"])]
        elif op["name"] != "stablehlo.constant" and (wide := promote_floats(text)) is not None:
            try:
                exe = _compiled(wide, LEGAL)
                results = compiler.execute(exe, [values[p] for p in params])
            except Exception:  # XLA rejects the widened op: evaluate it at its own precision
                results = None
        if results is None:
            if op["name"] != "stablehlo.constant":
                own_precision.append(op["results"][0]["vid"])
            exe = _compiled(text, LEGAL)
            results = compiler.execute(exe, [_own(values[p], types[p]["dtype"]) for p in params])
        values.update({v: _wide(r) for v, r in zip(outs, results, strict=True)})
    return Values(values, own_precision)


def op_by_op(module: str, inputs: list[np.ndarray], *, one_device: bool = False) -> list[np.ndarray]:
    """@main's outputs evaluated op by op at the module's own precision: each op compiled
    alone (under the legal reference options) on what the ops before it gave, so no fusion
    or rewrite across ops reaches the result. The op-by-op reference (`eager`) of a module
    without a graph: compiled whole, even at O0, a replayed module shared every bug that
    XLA's simplifier has in all configurations (a dynamic_slice of a dynamic_slice merged
    into one slice, clamped once, replayed as clean). `one_device`: as _ops_alone says
    (the bisector's legal reference, `legal`; the campaign's keeps the partitioning). Calls
    are inlined first: a `func.call` compiled alone is a whole module again, with every bug
    inside it (a divide by a broadcast in a jitted helper replayed as clean, issue 36)."""
    # Only an unpartitioned module: a partitioned one's calls hold its manual regions
    # (shard_map bodies with partition-id), which exist per device only.
    if "call @" in module and compiler.partitions(module) == 1:
        module = mod.inline_calls(module)
    parsed = mod.Parsed(module)
    info = parsed.info()
    values = {a["vid"]: np.asarray(x) for a, x in zip(info["args"], inputs, strict=True)}
    for _, params, outs, text in _ops_alone(parsed, info, one_device and compiler.partitions(module) > 1):
        results = compiler.execute(_compiled(text, LEGAL), [values[p] for p in params])
        values.update(zip(outs, results, strict=True))
    return [values[v] for v in info["returns"]]


@handles(Legal)
def legal(req: Legal) -> Outputs:
    """The bisector's legal configuration of a case: its own precision, the legal settings
    (options.LEGAL), no plugins. A partitioned module runs unsharded, as the campaign's
    `eager` and `unsharded` references do: compiled whole on one device without its
    shardings (module.one_device) where it allows, else, where a manual region only exists
    per device, op by op with every other op on one device. Compiled whole as it is, an
    SPMD case shared every bug of the partitioner with the target, so a bug that every
    configuration shows passed as right (s31-i60, docs/spmd.md "Bisecting")."""
    module = req.module
    if compiler.partitions(module) > 1:
        whole = mod.one_device(module)
        if whole is None:
            return Outputs(op_by_op(module, req.inputs, one_device=True))
        module = whole
    return Outputs(compiler.run_module(module, req.inputs, LEGAL).outputs)


def _narrowing_float_convert(op: dict[str, Any], types: dict[str, dict[str, Any]]) -> bool:
    if op["name"] != "stablehlo.convert" or len(op["results"]) != 1:
        return False
    source, dest = types[op["operands"][0]]["dtype"], op["results"][0]["dtype"]
    return source in FLOATS and dest in FLOATS and dest != "f64"


_DUMP_NAME = re.compile(r"\.(?:after|before)_([\w\-]+)")


@handles(ListPasses)
def list_passes(req: ListPasses) -> PassNames:
    """Names of the HLO passes XLA runs on this module, from a dump of every pass."""
    with tempfile.TemporaryDirectory(prefix="sentinel-passes-") as tmp:
        options = {**req.options, "xla_dump_to": tmp, "xla_dump_hlo_pass_re": ".*"}
        compiler.compile_module(req.module, options)
        names = set()
        for f in os.listdir(tmp):
            names.update(_DUMP_NAME.findall(f.removesuffix(".txt")))
    names -= {"pipeline-start", "pipeline-end"}
    return PassNames(sorted(names))


@handles(Info)
def info(req: Info) -> ModuleInfo:
    return ModuleInfo(annotate_ops(mod.module_info(req.module)))


@handles(Cut)
def cut(req: Cut) -> ModuleText:
    return ModuleText(mod.cut(req.module, req.keep, req.params, req.outputs))


@handles(Region)
def region(req: Region) -> ModuleInfo:
    """A region of the module, calls inlined (the bisector's descent, bisect/regions.py)."""
    text = mod.inline_calls(req.module)
    ops, arguments = mod.region_ops(text, req.path), mod.region_arguments(text, req.path)
    if req.expose:
        text = mod.expose(text, req.path, req.expose)
    return ModuleInfo({"module": text, "ops": ops, "arguments": arguments,
                       "returns": mod.module_info(text)["returns"]})


@handles(Donation)
def donation(req: Donation) -> ModuleInfo:
    from xla_sentinel.xla import buffers

    return ModuleInfo({"donated": buffers.donated_args(req.module), "undonated": buffers.without_donation(req.module),
                       "fault": buffers.injected_fault()})


@handles(Strip)
def strip(req: Strip) -> ModuleText:
    return ModuleText(mod.strip_locations(req.module))


@handles(RunHlo)
def run_hlo(req: RunHlo) -> Outputs:
    return Outputs(run_hlo_text(req.hlo, req.inputs, req.options))
