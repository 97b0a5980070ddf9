"""Record every computation a JAX program compiles, as trace folders `replay` reads.

Two hooks in jax's own compile path (jax 0.10.x): `compiler.compile_or_get_cached`, which
every jit, pjit and AOT compile goes through, hands us the StableHLO module; the
`ExecuteReplicated` built around the executable sees the arguments of its first call,
from which the per-argument statistics are taken (values only with `with_values`).

A trace folder per distinct module (`<module name>-<sha256 prefix>`): module.mlir,
meta.json (versions, backend, devices, XLA flags, shardings, donation), stats.json after
the first call, and inputs.npz and outputs.npz when values are allowed. A module compiled
again (another jit of the same function, another process) is stored once; meta.json
counts the compiles.

    with recording("traces/"):            # or @recorded("traces/")
        train_step(params, batch)
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import re
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.program import ProgramError, param_specs, save_arrays
from xla_sentinel.core.versions import package_versions
from xla_sentinel.programs.argstats import arg_stats, dtype_name

F = TypeVar("F", bound=Callable[..., Any])

# Where `xla-sentinel record` tells the recording hook in the child process to write.
ENV_OUT = "XLA_SENTINEL_RECORD_OUT"
ENV_WITH_VALUES = "XLA_SENTINEL_RECORD_WITH_VALUES"


@dataclass
class _Entry:
    folder: Path
    specs: list[dict[str, Any]] | None
    meta: dict[str, Any]
    called: bool = False
    outputs_saved: bool = False


@dataclass
class TraceRecorder:
    """Writes one trace folder per distinct compiled module under `out`."""

    out: Path
    with_values: bool = False
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _entries: dict[str, _Entry] = field(default_factory=dict)
    # Compiled executables waiting for the ExecuteReplicated that will run them. An
    # executable is not weak-referenceable, so it is held here until that happens.
    _compiled: dict[int, tuple[Any, _Entry]] = field(default_factory=dict)
    _executors: weakref.WeakKeyDictionary[Any, _Entry] = field(default_factory=weakref.WeakKeyDictionary)

    def __post_init__(self) -> None:
        self.out = Path(self.out)

    @property
    def traces(self) -> list[Path]:
        return sorted(e.folder for e in self._entries.values())

    # -- context manager and decorator --------------------------------------------------
    def __enter__(self) -> TraceRecorder:
        _install(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _uninstall(self)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]

    # -- hooks (called from inside jax; they must never break the user's program) --------
    def on_compile(self, exe: Any, computation: Any, backend: Any, devices: Any, options: Any) -> None:
        from jax._src.interpreters import mlir

        text = mlir.module_to_string(computation, enable_debug_info=False)
        digest = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                entry = self._new_entry(text, digest, computation, backend, devices, options)
                self._entries[digest] = entry
            else:
                entry.meta["provenance"]["compiles"] += 1
                _write_json(entry.folder / "meta.json", entry.meta)
            self._compiled[id(exe)] = (exe, entry)

    def on_executor(self, executor: Any) -> None:
        with self._lock:
            found = self._compiled.pop(id(executor.xla_executable), None)
            if found is not None:
                self._executors[executor] = found[1]

    def on_call(self, executor: Any, args: tuple[Any, ...]) -> _Entry | None:
        entry = self._executors.get(executor)
        if entry is None or entry.called:
            return None
        entry.called = True
        kept = [x for i, x in enumerate(args) if i in executor.kept_var_idx]
        if executor.mut:
            kept += list(executor.mut.in_mut)
        self._write_arguments(entry, kept)
        return entry

    def on_outputs(self, entry: _Entry, outputs: list[Any]) -> None:
        if not self.with_values or entry.outputs_saved:
            return
        entry.outputs_saved = True
        arrays = [np.asarray(o) for o in outputs]
        if all(np.dtype(a.dtype) in NP_DTYPES.values() for a in arrays):
            save_arrays(entry.folder / "outputs.npz", arrays, [dtype_name(a) for a in arrays])

    # -- writing -------------------------------------------------------------------------
    def _new_entry(self, text: str, digest: str, computation: Any, backend: Any, devices: Any,
                   options: Any) -> _Entry:
        from jaxlib.mlir import ir

        name = ir.StringAttr(computation.operation.attributes["sym_name"]).value
        folder = self.out / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:80]}-{digest[:12]}"
        try:
            specs: list[dict[str, Any]] | None = param_specs(text)
        except ProgramError as e:  # a type replay cannot feed yet: keep the module anyway
            specs = None
            self.errors.append(f"{folder.name}: {e}")
        flat = list(np.asarray(devices).flat)
        if (folder / "meta.json").exists():  # recorded by an earlier run: count, keep the rest
            try:
                meta = json.loads((folder / "meta.json").read_text())
                meta["provenance"]["compiles"] += 1
                _write_json(folder / "meta.json", meta)
                return _Entry(folder, specs, meta, called=(folder / "stats.json").exists())
            except (OSError, ValueError, KeyError, TypeError):
                pass  # damaged: written anew below
        meta = {"id": folder.name, "provenance": {
            "source": "record", "module_name": name, "module_sha256": digest,
            **package_versions(), "backend": backend.platform,
            "platform_version": getattr(backend, "platform_version", ""),
            "device_count": backend.device_count(), "devices_in_computation": len(flat),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "compile_options": {k: str(v) for k, v in options.env_option_overrides},
            "argv": list(sys.argv), "with_values": self.with_values, "compiles": 1,
            "donated": [int(i) for i in re.findall(r"%arg(\d+): [^,{)]*\{[^}]*(?:tf\.aliasing_output|"
                                                      r"jax\.buffer_donor)", text)],
        }}
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "module.mlir").write_text(text)
        _write_json(folder / "meta.json", meta)
        return _Entry(folder, specs, meta)

    def _write_arguments(self, entry: _Entry, args: list[Any]) -> None:
        specs = entry.specs
        if specs is None or len(args) != len(specs):
            self.errors.append(f"{entry.folder.name}: {len(args)} arguments for "
                               f"{'?' if specs is None else len(specs)} parameters; no statistics")
            return
        arrays = [np.asarray(x) for x in args]
        stats: dict[str, Any] = {}
        for i, (x, a) in enumerate(zip(args, arrays, strict=True)):
            stats[f"arg{i}"] = {**arg_stats(a), "sharding": str(getattr(x, "sharding", ""))}
        _write_json(entry.folder / "stats.json", stats)
        entry.meta["provenance"]["shardings"] = [stats[f"arg{i}"]["sharding"] for i in range(len(args))]
        _write_json(entry.folder / "meta.json", entry.meta)
        if self.with_values:
            save_arrays(entry.folder / "inputs.npz", arrays, [s["dtype"] for s in specs])


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True))


# -- the patches into jax: installed while one recorder is active ----------------------
_active: list[TraceRecorder] = []
_originals: dict[str, Any] = {}


def _install(rec: TraceRecorder) -> None:
    if _active:
        raise RuntimeError("a recording is already active in this process")
    from jax._src import compiler
    from jax._src.interpreters import pxla

    _originals.update(compile=compiler.compile_or_get_cached,
                      init=pxla.ExecuteReplicated.__init__, call=pxla.ExecuteReplicated.__call__)
    compile_orig, init_orig, call_orig = _originals["compile"], _originals["init"], _originals["call"]

    def compile_hook(backend: Any, computation: Any, devices: Any, options: Any, *a: Any, **kw: Any) -> Any:
        exe = compile_orig(backend, computation, devices, options, *a, **kw)
        _guarded(rec, "compile", rec.on_compile, exe, computation, backend, devices, options)
        return exe

    def init_hook(self: Any, *a: Any, **kw: Any) -> None:
        init_orig(self, *a, **kw)
        _guarded(rec, "executor", rec.on_executor, self)

    def call_hook(self: Any, *args: Any) -> Any:
        # Before the call: a donated argument's buffer is gone after it.
        entry = _guarded(rec, "arguments", rec.on_call, self, args)
        out = call_orig(self, *args)
        if entry is not None:
            _guarded(rec, "outputs", rec.on_outputs, entry, out)
        return out

    # Recording is patching jax._src: each hook passes the original's arguments through,
    # which mypy cannot match to jax's signatures (and it refuses assigning to methods).
    compiler.compile_or_get_cached = compile_hook  # type: ignore[assignment]
    pxla.ExecuteReplicated.__init__ = init_hook  # type: ignore[method-assign]
    pxla.ExecuteReplicated.__call__ = call_hook  # type: ignore[method-assign]
    rec.out.mkdir(parents=True, exist_ok=True)
    _active.append(rec)


def _uninstall(rec: TraceRecorder) -> None:
    if rec not in _active:
        return
    from jax._src import compiler
    from jax._src.interpreters import pxla

    compiler.compile_or_get_cached = _originals["compile"]
    pxla.ExecuteReplicated.__init__ = _originals["init"]  # type: ignore[method-assign]
    pxla.ExecuteReplicated.__call__ = _originals["call"]  # type: ignore[method-assign]
    _active.remove(rec)
    rec._compiled.clear()


def _guarded(rec: TraceRecorder, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as e:  # a recording failure must not change what the program does
        rec.errors.append(f"{what}: {type(e).__name__}: {str(e)[:200]}")
        return None


def recording(out: str | Path, with_values: bool = False) -> TraceRecorder:
    """A context manager recording every computation compiled inside it into `out`."""
    return TraceRecorder(Path(out), with_values)


def recorded(out: str | Path, with_values: bool = False) -> Callable[[F], F]:
    """A decorator recording every computation the function compiles into `out`."""
    return TraceRecorder(Path(out), with_values)


def start_from_env() -> TraceRecorder | None:
    """Start recording for the whole process when `xla-sentinel record` asked for it."""
    out = os.environ.get(ENV_OUT)
    if not out:
        return None
    rec = TraceRecorder(Path(out), os.environ.get(ENV_WITH_VALUES) == "1")
    _install(rec)
    atexit.register(_report_errors, rec)
    return rec


def _report_errors(rec: TraceRecorder) -> None:
    for e in rec.errors:
        print(f"xla-sentinel record: {e}", file=sys.stderr)


# The sitecustomize `xla-sentinel record` puts first on the child's PYTHONPATH. It waits
# for jax's own import to finish before patching, so a script that sets JAX_* or
# XLA_FLAGS variables before `import jax` is recorded as it runs unrecorded.
SITECUSTOMIZE = '''\
import importlib.abc, importlib.machinery, sys

class _AfterJax(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            try:
                from xla_sentinel.programs.record import start_from_env
            except ImportError as e:
                print(f"xla-sentinel record: not recording ({e})", file=sys.stderr)
                return
            start_from_env()
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _AfterJax())
'''


def child_environment(out: Path, with_values: bool, site_dir: Path) -> dict[str, str]:
    """The environment of a command `xla-sentinel record` runs: the hook on PYTHONPATH."""
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ)
    env[ENV_OUT] = str(Path(out).resolve())
    env[ENV_WITH_VALUES] = "1" if with_values else "0"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site_dir), env.get("PYTHONPATH", "")) if p)
    return env
