"""What a worker process does with the campaign's requests (runs inside the worker, with
jax): generate or load a program, run a module under a target's options, evaluate a
reference from a program's graph or its module text. the handler table (worker/registry.py) maps each
request class (protocol.py) to its handler here or in worker/bisect_handlers.py.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from xla_sentinel.core import cpu_account
from xla_sentinel.core.cpu_account import stage
from xla_sentinel.core.program import promote_floats
from xla_sentinel.ops.rules import has_discrete_ops
from xla_sentinel.programs import evaluate, spmd
from xla_sentinel.programs.generator import generate
from xla_sentinel.programs.inputs import make_inputs, stress_recipe
from xla_sentinel.spec import options
from xla_sentinel.spec.campaign import GeneratorSpec, build
from xla_sentinel.worker.protocol import (
    ChangedPasses,
    ClassifyModule,
    Generate,
    Generated,
    GraphReference,
    LoadCorpus,
    Loaded,
    LoadTrace,
    Lower,
    ModuleClass,
    ModuleReference,
    ModuleText,
    Noise,
    NoiseSamples,
    NumpyReference,
    Outputs,
    PassEffects,
    Ran,
    Run,
    Validate,
    Validated,
)
from xla_sentinel.worker.registry import handles
from xla_sentinel.xla import buffers, compiler
from xla_sentinel.xla.portable import CHECK_MODULE

# The float64 jit reference runs under a setting other than default jit.
F64_JIT_OPTIONS = options.REFERENCE_OPTIONS
# `eager` entirely through XLA, op by op, as before own_precision.py: only so that
# bench/throughput.py can measure the two in one run (its worker processes inherit it).
EAGER_ALL_XLA = os.environ.get("XLA_SENTINEL_EAGER_ALL_XLA") == "1"
# The CPU account's stage of turning a graph into StableHLO text through jax (jit lowering).
LOWERING = "lowering"


@handles(Generate)
def generate_program(req: Generate) -> Generated:
    spec = build(GeneratorSpec, req.generator, "spec.generator")
    with stage("generation"):
        graph = generate(req.seed, req.index, spec, req.bias)
    with stage("inputs"):
        recipe = {"seed": req.seed, "index": req.index, "special": req.special,
                  **stress_recipe(graph, req.seed, req.index, spec.version)}  # version 1: none
        inputs = make_inputs(recipe, graph.inputs)
    with stage(LOWERING):
        module = spmd.lower_text(graph)
    return Generated(module=module, graph=graph, inputs=inputs,
                     input_dtypes=[v.dtype for v in graph.inputs], recipe=recipe)


@handles(Lower)
def lower(req: Lower) -> ModuleText:
    return ModuleText(module=spmd.lower_text(req.graph))


@handles(Run)
def run(req: Run) -> Ran:
    checked = buffers.enabled()
    ex = compiler.run_module(req.module, req.inputs, req.options, req.platform, want_hlo=req.want_hlo,
                             checked=checked)
    problems = ex.buffers
    with stage(cpu_account.BUFFER_CHECKS):
        text = compiler.text_or_empty(req.module) if checked else ""
        if checked and buffers.donated_args(text):
            # Donation must not change a bit: the module without it, compiled and run under
            # the same options (docs/detection.md, "Buffer corruption").
            plain = compiler.run_module(buffers.without_donation(text), req.inputs, req.options,
                                        req.platform).outputs
            problems = problems + buffers.compare(ex.outputs, plain, "donation_mismatch",
                                                  "outputs with donation differ from the module without it",
                                                  nan_equal=True)
    again = None
    if req.repeat:
        # A fresh compile and run of the same module must agree bitwise with the first
        # (CPU results are deterministic across runs, docs/architecture.md "Oracle").
        again = compiler.run_module(req.module, req.inputs, req.options, req.platform).outputs
    return Ran(outputs=ex.outputs, compile_s=ex.compile_s, run_s=ex.run_s, hlo=ex.optimized_hlo,
               again=again, buffers=problems, anomalies=ex.anomalies)


def _promote_inputs(inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) or x.dtype.name == "bfloat16"
            else x for x in inputs]


# What the StableHLO reference interpreter cannot take (docs/architecture.md, "References"): chlo.erf kills the
# process, chlo.square is unsupported, bf16 values cannot be read back; and it is slow, so
# large modules are left to the other references.
INTERPRETER_UNSUPPORTED = ("chlo.erf", "chlo.square", "bf16")
INTERPRETER_MAX_OPS = 150


def interpret(module: str, inputs: list[np.ndarray]) -> Outputs:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    blocked = [u for u in INTERPRETER_UNSUPPORTED if u in module]
    if blocked:
        return Outputs(None, skipped=f"interpreter cannot run {blocked[0]}")
    if module.count(" = ") > INTERPRETER_MAX_OPS:
        return Outputs(None, skipped=f"more than {INTERPRETER_MAX_OPS} ops")
    with mlir.make_ir_context() as ctx:
        stablehlo.register_interpreter_dialect(ctx)
        parsed = ir.Module.parse(module)
        # StableHLO integers are signless except the unsigned ones (ui8, ui32): an
        # unsigned array given as signless is refused as a type mismatch.
        # An ndarray is a buffer; numpy's stubs declare `__buffer__` only for Python 3.12 on.
        args = [ir.DenseElementsAttr.get(np.ascontiguousarray(x),  # type: ignore[call-overload]
                                         signless=np.asarray(x).dtype.kind != "u")
                for x in inputs]
        return Outputs([np.array(o) for o in stablehlo.eval_module(parsed, args)])


@handles(ModuleReference)
def module_reference(req: ModuleReference) -> Outputs:
    if req.kind == "interpreter":
        return interpret(req.module, req.inputs)
    if req.kind == "f64_text":
        text = promote_floats(req.module)
        if text is None:
            raise ValueError("module cannot be promoted to float64 (it bit-casts floats)")
        return Outputs(compiler.run_module(text, _promote_inputs(req.inputs), F64_JIT_OPTIONS).outputs)
    if req.kind == "eager_module":
        from xla_sentinel.worker.bisect_handlers import op_by_op

        return Outputs(op_by_op(req.module, req.inputs))
    raise ValueError(f"unknown module reference {req.kind!r}")


@handles(GraphReference)
def graph_reference(req: GraphReference) -> Outputs:
    graph = req.graph
    if req.kind == "eager" and EAGER_ALL_XLA:
        return Outputs(evaluate.eager(graph, req.inputs))
    if req.kind == "eager":
        # numpy where it reproduces XLA:CPU bit for bit, XLA for each other op alone
        # (own_precision.py); the latter counted (summary.json eager_xla_ops).
        xla_ops: Counter[str] = Counter()
        outputs = evaluate.literal(graph, req.inputs, xla_ops)
        return Outputs(outputs, fallbacks=dict(xla_ops))
    if req.kind == "f64_eager":
        return Outputs(evaluate.eager(graph, req.inputs, promote=True))
    if req.kind == "unsharded":  # an SPMD program's own module, on one device (runners/xla_sentinel/programs/spmd.py)
        return Outputs(compiler.run_module(evaluate.lower_text(graph), req.inputs, {}).outputs)
    if req.kind == "f64_jit":
        with stage(LOWERING):
            text = evaluate.lower_f64_text(graph)
        return Outputs(compiler.run_module(text, _promote_inputs(req.inputs), F64_JIT_OPTIONS).outputs)
    raise ValueError(f"unknown graph reference {req.kind!r}")


def xla_fallback(module: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """npref's evaluator of an op it has no numpy form for: the op alone, compiled by XLA
    in float64 under the references' legal options."""
    return compiler.run_module(module, args, options.REFERENCE_OPTIONS).outputs


@handles(NumpyReference)
def numpy_reference(req: NumpyReference) -> Outputs:
    """The float64 reference in numpy (npref), on the module every float type is promoted
    in: the float64 lowering of a graph (what f64_eager and f64_jit evaluate), or a replayed
    module promoted as f64_text promotes it. Not the own-precision module: jax lowers f16
    and bf16 transcendentals as f32 computations rounded back, which float64 must not round
    (11 of 150 programs disagreed with f64_eager by a unit roundoff of their dtype)."""
    from xla_sentinel.references import npref

    inputs = _promote_inputs(req.inputs)
    text: str | None
    if req.graph is not None:
        with stage(LOWERING):
            text = evaluate.lower_f64_text(req.graph)
    else:
        text = promote_floats(req.module)
        if text is None:
            # It bit-casts floats: evaluated at its own types (npref holds them in float64).
            text, inputs = req.module, req.inputs
    result = npref.evaluate_module(text, inputs, xla_fallback)
    return Outputs(result.outputs, fallbacks=dict(result.fallbacks), undetermined=result.undetermined)


@handles(Noise)
def noise(req: Noise) -> NoiseSamples:
    # Two antithetic samples (perturbations U and -U): a rounding tie that one legal
    # configuration breaks upwards and another downwards is flipped by one of them.
    # Two directed samples (every op up, then down, by its largest legal rounding): a
    # clean-run f16 floor(rsqrt(1.00098)) = floor(0.99951) flipped to 1 in one
    # configuration whose rsqrt was one ulp high, beyond what U(-u, u) per op reaches.
    graph = req.graph
    samples = [evaluate.eager(graph, req.inputs, promote=True,
                              perturb=np.random.default_rng(req.seed), sign=sign)
               for sign in (1.0, -1.0)]
    samples += [evaluate.eager(graph, req.inputs, promote=True, sign=sign, directed=True)
                for sign in (1.0, -1.0)]
    return NoiseSamples(outputs=samples[0], samples=samples,
                        overflow=evaluate.overflow_prone(graph, req.inputs))


@handles(Validate)
def validate(req: Validate) -> Validated:
    """Check plugins import and each target's options are known to this XLA."""
    from xla_sentinel.spec.campaign import SpecError
    from xla_sentinel.xla import plugins

    errors, unavailable = [], {}
    for ref in req.plugins:
        try:
            plugins.probe(ref)  # imports it and runs it once on a small module
        except SpecError as e:
            errors.append(str(e))
    for i, t in enumerate(req.targets):
        platform = t.get("platform", "cpu")
        try:
            compiler.backend(platform)
        except Exception as e:  # jax's RuntimeError: no such backend on this machine
            unavailable[t["name"]] = f"platform {platform} is not available here ({_first_line(e)})"
            continue
        try:
            compiler.compile_module(CHECK_MODULE, t["options"], platform)
        except Exception as e:  # XLA raises its own runtime error type
            errors.append(f"spec.targets[{i}].options ({t['name']}): XLA rejected them: {_first_line(e)}")
    return Validated(errors, unavailable)


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


@handles(LoadTrace)
def load_trace(req: LoadTrace) -> Loaded:
    from xla_sentinel.programs.traces import load

    p = load(req.path, req.seed)
    return Loaded(id=p.id, module=p.module, inputs=p.inputs, input_dtypes=p.input_dtypes,
                  provenance=p.provenance)


@handles(LoadCorpus)
def load_corpus(req: LoadCorpus) -> Loaded:
    from pathlib import Path

    from xla_sentinel.programs.corpus import load

    p = load(Path(req.path), req.seed)
    return Loaded(id=p.id, module=p.module, inputs=p.inputs, input_dtypes=p.input_dtypes,
                  provenance=p.provenance)


@handles(PassEffects)
def pass_effects(req: PassEffects) -> ChangedPasses:
    """Which of `passes` changed the module: disabling the pass changes the optimized HLO.

    The base compile dumps the module before and after every run of each pass
    (`xla_dump_hlo_pass_re`). A pass whose every run left the module's text as it found
    it changed nothing, so disabling it runs the same pipeline on the same module: the same
    optimized HLO, without compiling again. Only the passes that did change the text are
    compiled disabled, to see whether the change lasts (a later pass may undo it). The same
    answer as a compile per pass on 70 generated modules, in 25 % less CPU (issue 39)."""
    from xla_sentinel.xla.hlo import hlo_fingerprint

    with tempfile.TemporaryDirectory(prefix="xla-sentinel-passes-") as dump:
        exe = compiler.compile_module(req.module, {
            "xla_dump_to": dump, "xla_dump_hlo_as_text": True, "xla_dump_hlo_as_proto": False,
            "xla_dump_hlo_pass_re": "|".join(f"^{re.escape(p)}$" for p in req.passes)})
        base = hlo_fingerprint(exe.get_hlo_text())
        ran = passes_that_changed_text(Path(dump), req.passes)
    changed = []
    for name in req.passes:
        if name not in ran:
            continue
        exe = compiler.compile_module(req.module, {"xla_disable_hlo_passes": name})
        if hlo_fingerprint(exe.get_hlo_text()) != base:
            changed.append(name)
    return ChangedPasses(changed)


# One dump of XLA's pass pipeline: <module>.<seq>.<pipeline>.after_<pass>.before_<next>.txt
_PASS_DUMP = re.compile(r"\.(\d{4})\.[^.]+\.after_([^.]+)\.before_([^.]+)\.txt$")


def passes_that_changed_text(dump: Path, passes: list[str]) -> set[str]:
    """The passes of `passes` that changed the dumped module text in some run, or whose runs
    the dumps do not bracket (each run must have a dump right before it and right after
    it); every pass, where the dumps are not what this reads."""
    dumps: dict[int, tuple[str, str, Path]] = {}
    for f in dump.iterdir():
        m = _PASS_DUMP.search(f.name)
        if m:
            dumps[int(m.group(1))] = (m.group(2), m.group(3), f)
    if not dumps:
        return set(passes)
    changed: set[str] = set()
    for seq, (after, _, f) in dumps.items():
        if after not in passes:
            continue
        before = dumps.get(seq - 1)
        if before is None or before[1] != after or before[2].read_text() != f.read_text():
            changed.add(after)
    # A pass that never ran leaves no dump after it: not changed (disabling it changes nothing).
    return changed


@handles(ClassifyModule)
def classify(req: ClassifyModule) -> ModuleClass:
    return ModuleClass(has_discrete_ops(req.module))
