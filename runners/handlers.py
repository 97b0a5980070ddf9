"""What a worker process does with one request (runs inside the worker, with jax).

Requests: `generate` a program, `run` a module under a target's options, evaluate a
`reference` (f64_numpy, eager, f64_eager, f64_jit, noise) from a program graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import evaluate, spmd, targets
from .campaign import GeneratorSpec, build
from .generator import Graph, generate
from .inputs import make_inputs
from .program import promote_floats

# The float64 jit reference runs under a setting other than default jit.
F64_JIT_OPTIONS = targets.REFERENCE_OPTIONS


def _generate(req: dict[str, Any]) -> dict[str, Any]:
    spec = build(GeneratorSpec, req["generator"], "spec.generator")
    graph = generate(req["seed"], req["index"], spec, req.get("bias"))
    recipe = {"seed": req["seed"], "index": req["index"], "special": req["special"]}
    inputs = make_inputs(recipe, graph.inputs)
    return {"module": spmd.lower_text(graph), "graph": graph.to_json(), "inputs": inputs,
            "input_dtypes": [v["dtype"] for v in graph.inputs], "recipe": recipe}


def _run(req: dict[str, Any]) -> dict[str, Any]:
    ex = targets.run_module(req["module"], req["inputs"], req["options"],
                            want_hlo=req.get("want_hlo", False))
    reply = {"outputs": ex.outputs, "compile_s": ex.compile_s, "run_s": ex.run_s,
             "hlo": ex.optimized_hlo}
    if req.get("recheck"):
        # Nondeterminism screen: a fresh compile and run of the same module must agree
        # bitwise with the first (CPU results are deterministic across runs, measured).
        again = targets.run_module(req["module"], req["inputs"], req["options"])
        reply["recheck"] = again.outputs
    return reply


def _promote_inputs(inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) or x.dtype.name == "bfloat16"
            else x for x in inputs]


# What the StableHLO reference interpreter cannot take (docs/architecture.md, "References"): chlo.erf kills the
# process, chlo.square is unsupported, bf16 values cannot be read back; and it is slow, so
# large modules are left to the other references.
INTERPRETER_UNSUPPORTED = ("chlo.erf", "chlo.square", "bf16")
INTERPRETER_MAX_OPS = 150


def _interpret(module: str, inputs: list[np.ndarray]) -> dict[str, Any]:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    blocked = [u for u in INTERPRETER_UNSUPPORTED if u in module]
    if blocked:
        return {"outputs": None, "skipped": f"interpreter cannot run {blocked[0]}"}
    if module.count(" = ") > INTERPRETER_MAX_OPS:
        return {"outputs": None, "skipped": f"more than {INTERPRETER_MAX_OPS} ops"}
    with mlir.make_ir_context() as ctx:
        stablehlo.register_interpreter_dialect(ctx)
        parsed = ir.Module.parse(module)
        # StableHLO integers are signless except the unsigned ones (ui8, ui32): an
        # unsigned array given as signless is refused as a type mismatch.
        args = [ir.DenseElementsAttr.get(np.ascontiguousarray(x),
                                         signless=np.asarray(x).dtype.kind != "u")
                for x in inputs]
        return {"outputs": [np.array(o) for o in stablehlo.eval_module(parsed, args)]}


def _reference(req: dict[str, Any]) -> dict[str, Any]:
    kind = req["kind"]
    if kind == "interpreter":
        return _interpret(req["module"], req["inputs"])
    if kind == "f64_text":
        text = promote_floats(req["module"])
        if text is None:
            raise ValueError("module cannot be promoted to float64 (it bit-casts floats)")
        return {"outputs": targets.run_module(text, _promote_inputs(req["inputs"]), F64_JIT_OPTIONS).outputs}
    if kind == "f64_numpy":
        return _numpy_reference(req)
    if kind == "reference_o0":
        return {"outputs": targets.run_module(req["module"], req["inputs"], F64_JIT_OPTIONS).outputs}
    graph = Graph.from_json(req["graph"])
    if kind == "eager":
        return {"outputs": evaluate.eager(graph, req["inputs"])}
    if kind == "f64_eager":
        return {"outputs": evaluate.eager(graph, req["inputs"], promote=True)}
    if kind == "unsharded":  # an SPMD program's own module, on one device (runners/spmd.py)
        return {"outputs": targets.run_module(evaluate.lower_text(graph), req["inputs"], {}).outputs}
    if kind == "noise":
        # Two antithetic samples (perturbations U and -U): a rounding tie that one legal
        # configuration breaks upwards and another downwards is flipped by one of them.
        # Two directed samples (every op up, then down, by its largest legal rounding): a
        # clean-run f16 floor(rsqrt(1.00098)) = floor(0.99951) flipped to 1 in one
        # configuration whose rsqrt was one ulp high, beyond what U(-u, u) per op reaches.
        seed = req.get("noise_seed", 0)
        samples = [evaluate.eager(graph, req["inputs"], promote=True,
                                  perturb=np.random.default_rng(seed), sign=sign)
                   for sign in (1.0, -1.0)]
        samples += [evaluate.eager(graph, req["inputs"], promote=True, sign=sign, directed=True)
                    for sign in (1.0, -1.0)]
        return {"outputs": samples[0], "samples": samples,
                "overflow": evaluate.overflow_prone(graph, req["inputs"])}
    if kind == "f64_jit":
        text = evaluate.lower_f64_text(graph)
        return {"outputs": targets.run_module(text, _promote_inputs(req["inputs"]), F64_JIT_OPTIONS).outputs}
    raise ValueError(f"unknown reference {kind!r}")


def _numpy_reference(req: dict[str, Any]) -> dict[str, Any]:
    """The float64 reference in numpy (npref), on the module every float type is promoted
    in: the float64 lowering of a graph (what f64_eager and f64_jit evaluate), or a replayed
    module promoted as f64_text promotes it. Not the own-precision module: jax lowers f16
    and bf16 transcendentals as f32 computations rounded back, which float64 must not round
    (11 of 150 programs disagreed with f64_eager by a unit roundoff of their dtype)."""
    from . import npref

    inputs = _promote_inputs(req["inputs"])
    if req.get("graph") is not None:
        text = evaluate.lower_f64_text(Graph.from_json(req["graph"]))
    else:
        text = promote_floats(req["module"])
        if text is None:
            # It bit-casts floats: evaluated at its own types (npref holds them in float64).
            text, inputs = req["module"], req["inputs"]
    result = npref.evaluate_module(text, inputs)
    return {"outputs": result.outputs, "fallbacks": dict(result.fallbacks)}


TRIVIAL_MODULE = """module @check {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"""


def _validate(req: dict[str, Any]) -> dict[str, Any]:
    """Check plugins import and each target's options are known to this XLA."""
    from . import plugins
    from .campaign import SpecError

    errors = []
    for ref in req["plugins"]:
        try:
            plugins.probe(ref)  # imports it and runs it once on a small module
        except SpecError as e:
            errors.append(str(e))
    for i, t in enumerate(req["targets"]):
        try:
            targets.compile_module(TRIVIAL_MODULE, t["options"])
        except Exception as e:  # XLA raises its own runtime error type
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            errors.append(f"spec.targets[{i}].options ({t['name']}): XLA rejected them: {msg}")
    return {"errors": errors}


def _load(req: dict[str, Any]) -> dict[str, Any]:
    from .traces import load

    p = load(req["path"], req.get("seed", 0))
    return {"id": p.id, "module": p.module, "inputs": p.inputs, "input_dtypes": p.input_dtypes,
            "provenance": p.provenance}


def _load_corpus(req: dict[str, Any]) -> dict[str, Any]:
    from pathlib import Path

    from .corpus import load

    p = load(Path(req["path"]), req.get("seed", 0))
    return {"id": p.id, "module": p.module, "inputs": p.inputs, "input_dtypes": p.input_dtypes,
            "provenance": p.provenance}


def _pass_effects(req: dict[str, Any]) -> dict[str, Any]:
    """Which of `passes` changed the module: disabling the pass changes the optimized HLO."""
    from .coverage import hlo_fingerprint

    base = hlo_fingerprint(targets.compile_module(req["module"], {}).get_hlo_text())
    changed = []
    for name in req["passes"]:
        exe = targets.compile_module(req["module"], {"xla_disable_hlo_passes": name})
        if hlo_fingerprint(exe.get_hlo_text()) != base:
            changed.append(name)
    return {"changed": changed}


HANDLERS = {
    "ping": lambda req: {},
    "validate": _validate,
    "generate": _generate,
    "load": _load,
    "load_corpus": _load_corpus,
    "pass_effects": _pass_effects,
    "run": _run,
    "reference": _reference,
}


def handle(req: dict[str, Any]) -> dict[str, Any]:
    """Serve one worker request by its `cmd`."""
    fn = HANDLERS.get(req["cmd"])
    if fn is None:
        raise ValueError(f"unknown request {req['cmd']!r}")
    return fn(req)
