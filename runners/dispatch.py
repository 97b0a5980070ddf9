"""The one dispatch table of the worker protocol: each request class to its handler.

Imported by the worker process only (the handlers import jax); the coordinator knows
the request classes (protocol.py), not this table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import handlers, portable
from .bisect import serve
from .protocol import (
    ClassifyModule,
    Cut,
    EveryValue,
    Generate,
    GraphReference,
    Info,
    Legal,
    ListPasses,
    LoadCorpus,
    LoadTrace,
    Lower,
    ModuleReference,
    Noise,
    NumpyReference,
    PassEffects,
    Ping,
    Pong,
    Reply,
    Request,
    Run,
    RunHlo,
    Strip,
    ToPortable,
    Validate,
    WhichVersions,
)

HANDLERS: dict[type[Request[Any]], Callable[[Any], Reply]] = {
    Ping: lambda req: Pong(),
    Validate: handlers.validate,
    Generate: handlers.generate_program,
    LoadTrace: handlers.load_trace,
    LoadCorpus: handlers.load_corpus,
    PassEffects: handlers.pass_effects,
    ClassifyModule: handlers.classify,
    Lower: handlers.lower,
    Run: handlers.run,
    GraphReference: handlers.graph_reference,
    ModuleReference: handlers.module_reference,
    NumpyReference: handlers.numpy_reference,
    Noise: handlers.noise,
    RunHlo: serve.run_hlo,
    EveryValue: serve.every_value,
    Legal: serve.legal,
    Info: serve.info,
    Cut: serve.cut,
    Strip: serve.strip,
    ListPasses: serve.list_passes,
    # Other jaxlib versions (docs/versions.md): the handlers live in portable.py.
    WhichVersions: portable.which_versions,
    ToPortable: portable.to_portable,
}


def handle(request: Request[Any]) -> Reply:
    """Serve one request by its class."""
    fn = HANDLERS.get(type(request))
    if fn is None:
        raise ValueError(f"unknown request {type(request).__name__}")
    return fn(request)
