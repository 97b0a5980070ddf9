"""Portable artifacts across jaxlib versions, and what a worker under another jaxlib serves.

Programs cross to another jaxlib as VHLO portable artifacts (docs/versions.md): a worker of
the current jaxlib serializes the module at the StableHLO version the other side reads
(`ToPortable`), and the other side deserializes and compiles it (`Run` with bytes). A
worker under another interpreter (worker.py, `foreign`) imports this table instead of
dispatch.HANDLERS: it needs no more of jax than compiling and running a module, which is
what older releases still share with this one. Runs inside workers only (imports jax).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import targets
from .protocol import (
    Ping,
    Pong,
    PortableArtifact,
    Ran,
    Reply,
    Request,
    Run,
    ToPortable,
    Validate,
    Validated,
    VersionInfo,
    WhichVersions,
)


class NotPortable(ValueError):
    """A module one side cannot hand to the other: the message names the StableHLO version
    and what MLIR said. Never a verdict on the compiler (assess.py skips the target)."""


def _xla_mlir() -> Any:
    """XLA's MLIR helpers of this jaxlib (`_jax.mlir`; `xla_extension.mlir` before 0.7)."""
    try:
        from jax._src.lib import _jax as ext  # type: ignore[attr-defined]
    except ImportError:
        from jax._src.lib import xla_extension as ext  # type: ignore[attr-defined,no-redef]
    return ext.mlir


def _reason(e: Exception) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def which_versions(req: WhichVersions) -> VersionInfo:
    import jax
    import jaxlib
    from jaxlib.mlir.dialects import stablehlo
    minimum = stablehlo.get_minimum_version() if hasattr(stablehlo, "get_minimum_version") else ""
    return VersionInfo(jax=jax.__version__, jaxlib=getattr(jaxlib, "__version__", "") or
                       jaxlib.version.__version__,  # type: ignore[attr-defined]
                       stablehlo_current=stablehlo.get_current_version(),
                       stablehlo_minimum=minimum)


def to_portable(req: ToPortable) -> PortableArtifact:
    """The module as a VHLO artifact at `req.version`, made as jax.export makes one (XLA's
    serializer: CHLO ops such as chlo.top_k and chlo.square are legalized to StableHLO
    first; VHLO has no CHLO, so the StableHLO dialect's own serializer refuses them). An
    op or attribute that version cannot express is NotPortable, with MLIR's words."""
    try:
        data = _xla_mlir().serialize_portable_artifact(req.module, req.version)
    except Exception as e:  # XLA raises its own error types; the text says why
        raise NotPortable(f"not portable to StableHLO {req.version}: {_reason(e)}"[:2000]) from None
    return PortableArtifact(data=bytes(data), version=req.version)


def from_portable(data: bytes) -> str:
    """StableHLO text of a portable artifact, as this jaxlib reads it; NotPortable if it
    cannot (an artifact newer than this StableHLO, or not an artifact)."""
    from jax._src.interpreters import mlir

    try:
        with mlir.make_ir_context():  # the binding parses into the current context
            text = _xla_mlir().deserialize_portable_artifact(data)
    except Exception as e:
        raise NotPortable(f"this jaxlib cannot read the artifact: {_reason(e)}"[:2000]) from None
    return text.decode() if isinstance(text, bytes) else str(text)


def to_hlo(module: str) -> None:
    """Convert the module to HLO as compiling it would, apart: a release whose converter
    refuses what a newer jax writes (0.4.31 rejects the gathers 0.10.2 lowers for
    take_along_axis, and has no HLO for the `chlo.top_k` composite) cannot take the
    module, which is NotPortable, not a compile error of that release's compiler."""
    try:
        _xla_mlir().mlir_module_to_xla_computation(module, use_tuple_args=False, return_tuple=False)
    except Exception as e:
        raise NotPortable(f"this jaxlib cannot convert the module to HLO: {_reason(e)}"[:2000]) from None


def run(req: Run) -> Ran:
    """Run a module given as a portable artifact (bytes) or as text; the optimized HLO is
    not asked of another jaxlib (the bisector and coverage read the current one's)."""
    module = from_portable(req.module) if isinstance(req.module, bytes) else req.module
    to_hlo(module)
    ex = targets.run_module(module, req.inputs, req.options)
    again = targets.run_module(module, req.inputs, req.options).outputs if req.repeat else None
    return Ran(outputs=ex.outputs, compile_s=ex.compile_s, run_s=ex.run_s, again=again)


# A module every release from 0.4.x on compiles: what an option check compiles.
CHECK_MODULE = """module @check {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"""


def validate(req: Validate) -> Validated:
    """Does this release's XLA take each target's options? One line per target it rejects,
    `NAME: XLA's words` (they name the option: "No such compile option: 'xla_...'"). The
    plugins are not this worker's (they are registered in the current release's workers)."""
    errors = []
    for t in req.targets:
        try:
            targets.compile_module(CHECK_MODULE, dict(t["options"]), str(t.get("platform") or "cpu"))
        except Exception as e:  # XLA raises its own error types; the text says why
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            errors.append(f"{t['name']}: {first}"[:500])
    return Validated(errors)


# What a worker under another jaxlib serves (worker.py imports this as its table).
HANDLERS: dict[type[Request[Any]], Callable[[Any], Reply]] = {
    Ping: lambda req: Pong(),
    WhichVersions: which_versions,
    Run: run,
    Validate: validate,
}


def handle(request: Request[Any]) -> Reply:
    fn = HANDLERS.get(type(request))
    if fn is None:
        raise ValueError(f"a worker under another jaxlib does not serve {type(request).__name__}")
    return fn(request)
