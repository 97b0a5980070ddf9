"""Targets: the XLA configurations under test, as the coordinator knows them.

A Target is a named set of per-compile XLA options (identical to XLA_FLAGS in a fresh
process, measured bitwise). Compiling a module under one happens in a worker
(xla/compiler.py); this module is the record, its resolution from the spec, and the check
that another release takes its options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xla_sentinel.core import versions
from xla_sentinel.spec.campaign import (  # the preset table is part of the schema
    PRESETS,
    SpecError,
    TargetSpec,
)


@dataclass(frozen=True)
class Target:
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    platform: str = "cpu"
    # Another environment's interpreter (another jaxlib, docs/versions.md), and the jaxlib
    # it holds when known; None for this process's own.
    python: str | None = None
    jaxlib: str | None = None

    def describe(self) -> str:
        opts = " ".join(f"--{k}={v}" for k, v in sorted(self.options.items()))
        where = f" on jaxlib {self.jaxlib}" if self.python and self.jaxlib else (
            f" under {self.python}" if self.python else "")
        return f"{self.name} ({opts or 'default options'}){where}"


def resolve(spec: TargetSpec) -> Target:
    """A preset's options, overridden by the spec's own; a `jaxlib` other than this one
    runs under the interpreter of its environment (SpecError naming the target and the
    make command when there is none)."""
    options = dict(PRESETS.get(spec.name, {}))
    options.update(spec.options)
    python, jaxlib = spec.python, spec.jaxlib
    try:
        if python is None and jaxlib is not None and jaxlib != versions.current_jaxlib():
            python = versions.environment(jaxlib).python
    except versions.VersionError as e:
        raise SpecError(f"target {spec.name!r}: {e}") from None
    if python is not None and not Path(python).is_file():
        raise SpecError(f"target {spec.name!r}: python {python}: no such interpreter")
    return Target(spec.name, options, spec.platform, python, jaxlib)


def release_option_errors(specs: list[TargetSpec], timeout: float = 120.0) -> list[str]:
    """Whether each target of another jaxlib release takes its options there: a worker
    under its interpreter compiles a small module with them (portable.validate), so an
    option that release does not know is one error at campaign start naming the target,
    the release and the option, not a compile_error on every program. The current
    release's targets are checked by the engine's own validation; a worker that does not
    start is left to the campaign's start-up, which says so."""
    from dataclasses import asdict

    from xla_sentinel.worker.client import Worker, WorkerDied, WorkerHung
    from xla_sentinel.worker.protocol import RequestFailed, Validate, WhichVersions

    by_python: dict[str, list[tuple[int, Target]]] = {}
    for i, spec in enumerate(specs):
        t = resolve(spec)
        if t.python is not None:
            by_python.setdefault(t.python, []).append((i, t))
    errors: list[tuple[int, str]] = []
    for python, group in by_python.items():  # one worker per interpreter, its targets at once
        worker = Worker("options", (), None, python)
        try:
            release = worker.call(WhichVersions(), timeout).jaxlib
            rejected = worker.call(Validate([], [asdict(t) for _, t in group]), timeout).errors
        except (WorkerDied, WorkerHung, RequestFailed):
            continue
        finally:
            worker.close()
        why = dict(line.split(": ", 1) for line in rejected)  # NAME: XLA's words
        errors += [(i, f"spec.targets[{i}].options ({t.name}): jaxlib {release} does not take them: "
                       f"{why[t.name]}") for i, t in group if t.name in why]
    return [line for _, line in sorted(errors)]  # in the spec's order


# How XLA reports a module it cannot compile or run: jaxlib's runtime error (named
# XlaRuntimeError in older jaxlibs, which targets of another environment run), and
# per-device results that do not tile their output (ShardLayoutError below). A worker's
# error text is `Type: message` (protocol.Failed).
XLA_FAILURES = ("JaxRuntimeError", "XlaRuntimeError", "ShardLayoutError")


def xla_failure(error: str) -> bool:
    """Whether a failed run's error (`Type: message`) is XLA's, not the harness's."""
    return error.split(":", 1)[0].strip() in XLA_FAILURES


