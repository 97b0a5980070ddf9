"""Targets: the XLA configurations under test, and compiling a module under one.

A Target is a named set of per-compile XLA options (identical to XLA_FLAGS in a fresh
process, measured bitwise). Modules are compiled from StableHLO text, so generated
programs and replayed traces take the same path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from . import hlo, plugins
from .campaign import PRESETS, TargetSpec  # the preset table is part of the schema

# The legal configuration the references compile under: the float64 jit reference, the
# replayed module's op-by-op stand-in and the bisector's legal run. Not default jit: a real
# XLA:CPU miscompile in 0.10.2 corrupts default-jit results in f64 too
# (docs/architecture.md, "References").
REFERENCE_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0,
                                     "xla_cpu_use_fusion_emitters": False}


@dataclass(frozen=True)
class Target:
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    platform: str = "cpu"

    def describe(self) -> str:
        opts = " ".join(f"--{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.name} ({opts or 'default options'})"


def resolve(spec: TargetSpec) -> Target:
    """A preset's options, overridden by the spec's own."""
    options = dict(PRESETS.get(spec.name, {}))
    options.update(spec.options)
    return Target(spec.name, options, spec.platform)


def _backend(platform: str) -> Any:
    from jax._src import xla_bridge
    return xla_bridge.get_backend(platform)


def compile_module(module: str, options: dict[str, Any], platform: str = "cpu") -> Any:
    """Compile StableHLO text (or MLIR bytecode) with per-compile XLA options."""
    from jax._src import compiler
    from jax._src.lib import xla_client as xc
    backend = _backend(platform)
    opts = compiler.get_compile_options(num_replicas=1, num_partitions=1,
                                        env_options_overrides=dict(options))
    plugins.take_failure()  # an earlier compile's plugin failure is that compile's
    try:
        return backend.compile_and_load(module, xc.DeviceList((backend.local_devices()[0],)), opts)
    except Exception:
        # XLA reports a failed injected plugin as its own INTERNAL error: say whose it was.
        failure = plugins.take_failure()
        if failure:
            raise plugins.PluginError(failure) from None
        raise


def execute(exe: Any, inputs: list[Any]) -> list[Any]:
    import jax
    import numpy as np
    dev = exe.local_devices()[0]
    bufs = [jax.device_put(x, dev) for x in inputs]
    outs = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
    return [np.asarray(o[0]) for o in outs]


@dataclass
class Execution:
    outputs: list[Any]
    compile_s: float
    run_s: float
    optimized_hlo: str | None = None


def run_module(module: str, inputs: list[Any], options: dict[str, Any], platform: str = "cpu",
               want_hlo: bool = False) -> Execution:
    t0 = time.perf_counter()
    exe = compile_module(module, options, platform)
    t1 = time.perf_counter()
    outs = execute(exe, inputs)
    t2 = time.perf_counter()
    # Full constants: the bisector compiles fusions cut out of this text.
    text = hlo.full_text(exe.hlo_modules()[0]) if want_hlo else None
    return Execution(outs, t1 - t0, t2 - t1, text)
