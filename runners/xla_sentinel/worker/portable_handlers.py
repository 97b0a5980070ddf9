"""What a worker serves for other jaxlib releases (docs/versions.md): which versions it
holds, a module as a VHLO artifact for an older release (served by the current one), and
running a module or checking options under another release, whose workers import only this
module of the handlers: it needs no more of jax than compiling and running a module,
which is what older releases still share with this one.
"""

from __future__ import annotations

from xla_sentinel.worker.protocol import (
    PortableArtifact,
    Ran,
    Run,
    ToPortable,
    Validate,
    Validated,
    VersionInfo,
    WhichVersions,
)
from xla_sentinel.worker.registry import RELEASES, handles
from xla_sentinel.xla import compiler, portable
from xla_sentinel.xla.portable import CHECK_MODULE


@handles(WhichVersions, releases=RELEASES)
def which_versions(req: WhichVersions) -> VersionInfo:
    import jax
    import jaxlib
    from jaxlib.mlir.dialects import stablehlo
    minimum = stablehlo.get_minimum_version() if hasattr(stablehlo, "get_minimum_version") else ""
    return VersionInfo(jax=jax.__version__, jaxlib=getattr(jaxlib, "__version__", "") or
                       jaxlib.version.__version__,
                       stablehlo_current=stablehlo.get_current_version(),
                       stablehlo_minimum=minimum)


@handles(ToPortable)
def to_portable(req: ToPortable) -> PortableArtifact:
    return PortableArtifact(data=portable.to_portable(req.module, req.version), version=req.version)


@handles(Run, releases=("other",))
def run(req: Run) -> Ran:
    """Run a module given as a portable artifact (bytes) or as text; the optimized HLO is
    not asked of another jaxlib (the bisector and coverage read the current one's)."""
    module = portable.from_portable(req.module) if isinstance(req.module, bytes) else req.module
    portable.to_hlo(module)
    ex = compiler.run_module(module, req.inputs, req.options)
    again = compiler.run_module(module, req.inputs, req.options).outputs if req.repeat else None
    return Ran(outputs=ex.outputs, compile_s=ex.compile_s, run_s=ex.run_s, again=again,
               anomalies=ex.anomalies)


@handles(Validate, releases=("other",))
def validate(req: Validate) -> Validated:
    """Does this release's XLA take each target's options? One line per target it rejects,
    `NAME: XLA's words` (they name the option: "No such compile option: 'xla_...'"). The
    plugins are not this worker's (they are registered in the current release's workers)."""
    errors = []
    for t in req.targets:
        try:
            compiler.compile_module(CHECK_MODULE, dict(t["options"]), str(t.get("platform") or "cpu"))
        except Exception as e:  # XLA raises its own error types; the text says why
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            errors.append(f"{t['name']}: {first}"[:500])
    return Validated(errors)


