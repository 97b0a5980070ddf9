"""HLO pass plugins (`--inject-pass FILE.py[:FUNC]`): load, check and register them.

A plugin is `transform(proto: bytes) -> bytes | None` over a serialized HloModuleProto.
It is registered after fusion (PRE_SCHEDULER) in the worker processes of targets under
test only, never in references, so a campaign can prove it catches a miscompilation.

A broken plugin must never pass for a compiler bug. `probe` runs a plugin once on a small
real module before a campaign starts (a plugin that raises, returns something that is no
module, or hangs is bad input); `register` wraps each plugin in a guard that checks every
result, so a plugin that breaks later, on one program, raises PluginError there (the
program's status is `plugin_error`), where XLA would report a failed compile, or abort
the process on a result that is not bytes.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Sequence

from xla_sentinel.core.errors import UserError
from xla_sentinel.spec.campaign import SpecError
from xla_sentinel.spec.plugins import check_ref, split_ref

Transform = Callable[[bytes], bytes | None]
# How long a plugin may take on the probe's small module.
PROBE_SECONDS = 30.0


class PluginError(UserError, RuntimeError):
    """An injected plugin raised or returned no module: its fault, not the compiler's."""


def load(ref: str) -> Transform:
    path, func = split_ref(ref)
    check_ref(ref)
    spec = importlib.util.spec_from_file_location(f"xla_sentinel_plugin_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SpecError(f"injectPasses: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # a plugin's own import error (or sys.exit) must name the plugin
        raise SpecError(f"injectPasses: importing {path} failed: {type(e).__name__}: {e}") from None
    # Its signature is the plugin's promise; guarded() checks what it returns.
    fn: Transform | None = getattr(module, func, None)
    if not callable(fn):
        raise SpecError(f"injectPasses: {path} has no function {func!r}")
    return fn


def result_problem(result: object) -> str | None:
    """Why a plugin's result is unusable, or None when it is no change or a module."""
    if result is None:
        return None
    if not isinstance(result, bytes | bytearray):
        return f"returned {type(result).__name__}, not bytes or None"
    import jaxlib._hlo as _hlo

    try:
        _hlo.HloModule.from_serialized_hlo_module_proto(bytes(result))
    except Exception as e:  # jaxlib raises its own runtime error type
        return f"returned {len(result)} bytes that are not an HloModuleProto ({str(e).splitlines()[0][:120]})"
    return None


def guarded(ref: str, fn: Transform) -> Transform:
    """`fn` with every result checked: a failure raises PluginError naming the plugin,
    and the last failure is kept for `take_failure` (XLA reports only its own message)."""

    def transform(proto: bytes) -> bytes | None:
        try:
            result = fn(proto)
        except (Exception, SystemExit) as e:
            _fail(f"plugin {ref} raised {type(e).__name__}: {_first_line(e)}")
        problem = result_problem(result)
        if problem:
            _fail(f"plugin {ref} {problem}")
        # Its own input back is no change; returned, the module would lose its donation
        # (`registered` says why).
        return None if result is None or result == proto else bytes(result)

    return transform


_failures: list[str] = []
_registered = threading.Event()


def registered() -> bool:
    """Whether plugins are registered in this process.

    Under a plugin, a module's donation is what its executable says, not what the module
    says: jaxlib builds the module again from any proto a plugin returns (XLA's
    UpdateHloModuleFromProto), and the HloModule::ReplaceEntryComputation there resets its
    input_output_alias and buffer_donor configs, so the executable donates nothing whatever
    the proto said. No plugin result can keep it (docs/detection.md, "Buffer corruption")."""
    return _registered.is_set()


def _first_line(e: BaseException) -> str:
    """An exception's message fit for a one-line error (XLA's run over many lines)."""
    lines = str(e).strip().splitlines()
    return lines[0][:200] if lines else ""


def _fail(message: str) -> None:
    _failures.append(message)
    raise PluginError(message)


def take_failure() -> str | None:
    """The first plugin failure since the last call (this process), and forget them all."""
    first = _failures[0] if _failures else None
    _failures.clear()
    return first


def sample_module() -> bytes:
    """A small optimized module with a fusion and a dot: what plugins see in a campaign."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def xla_sentinel_probe(a: jax.Array) -> jax.Array:  # the module's name says what it is
        return jnp.tanh(a @ a) * 2 + a

    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    executable = jax.jit(xla_sentinel_probe).lower(x).compile().runtime_executable()
    if executable is None:  # a compile always makes one; jax's type allows None
        raise RuntimeError("jax compiled the probe module into no executable")
    proto: bytes = executable.hlo_modules()[0].as_serialized_hlo_module_proto()
    return proto


def probe(ref: str, timeout: float = PROBE_SECONDS) -> None:
    """Load a plugin and run it once on `sample_module`; SpecError if that fails.

    Runs in the caller's process (a throwaway worker): a plugin that hangs is left
    running in a daemon thread, and the process is killed when the check is done.
    """
    fn = guarded(ref, load(ref))
    proto = sample_module()
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            fn(proto)
            outcome.append(None)
        except BaseException as e:  # SystemExit from a plugin is its failure too
            outcome.append(e)

    thread = threading.Thread(target=call, daemon=True, name=f"probe {ref}")
    thread.start()
    thread.join(timeout)
    take_failure()
    if thread.is_alive():
        raise SpecError(f"injectPasses: plugin {ref} hung (no result within {timeout:.0f} s on a small module)")
    error = outcome[0]
    if isinstance(error, PluginError):
        raise SpecError(f"injectPasses: {error}")
    if error is not None:
        raise SpecError(f"injectPasses: plugin {ref} raised {type(error).__name__}: {_first_line(error)}")


def register(refs: Sequence[str], platform: str = "cpu") -> list[str]:
    """Register plugins in this process; returns the names they were registered under."""
    import jax
    import jax.extend as jex

    names = []
    for i, ref in enumerate(refs):
        fn = guarded(ref, load(ref))
        name = f"xla_sentinel_inject_{i}_{split_ref(ref)[0].stem}"
        jex.xla.register_hlo_module_transformation(
            fn, name=name, platforms=platform, stage=jex.xla.PipelineStage.PRE_SCHEDULER)
        names.append(name)
    if names:
        _registered.set()
    # jax leaves clear_caches unannotated: its signature, so that the call is checked.
    clear_caches: Callable[[], None] = jax.clear_caches
    clear_caches()
    return names
