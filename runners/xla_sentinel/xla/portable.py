"""Portable artifacts across jaxlib versions (docs/versions.md): VHLO artifacts out of and
into this jaxlib, and the check that it can convert a module to HLO. Also what an option
check compiles in any release. Runs inside workers only (imports jax); the requests that
use it are served by worker/portable_handlers.py.
"""

from __future__ import annotations

from typing import Any


class NotPortable(ValueError):
    """A module one side cannot hand to the other: the message names the StableHLO version
    and what MLIR said. Never a verdict on the compiler (assess.py skips the target)."""


def _xla_mlir() -> Any:
    """XLA's MLIR helpers of this jaxlib (`_jax.mlir`; `xla_extension.mlir` before 0.7)."""
    try:
        import jaxlib._jax as ext
    except ImportError:
        # jaxlib before 0.7, which the installed jax (the one mypy reads) no longer has.
        from jax._src.lib import xla_extension as ext  # type: ignore[attr-defined]
    return ext.mlir


def _reason(e: Exception) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def to_portable(module: str, version: str) -> bytes:
    """The module as a VHLO artifact at `version`, made as jax.export makes one (XLA's
    serializer: CHLO ops such as chlo.top_k and chlo.square are legalized to StableHLO
    first; VHLO has no CHLO, so the StableHLO dialect's own serializer refuses them). An
    op or attribute that version cannot express is NotPortable, with MLIR's words."""
    try:
        data = _xla_mlir().serialize_portable_artifact(module, version)
    except Exception as e:  # XLA raises its own error types; the text says why
        raise NotPortable(f"not portable to StableHLO {version}: {_reason(e)}"[:2000]) from None
    return bytes(data)


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


# A module every release from 0.4.x on compiles: what an option check compiles.
CHECK_MODULE = """module @check {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"""


