"""HLO pass plugins (`--inject-pass FILE.py[:FUNC]`): load, check and register them.

A plugin is `transform(proto: bytes) -> bytes | None` over a serialized HloModuleProto.
It is registered after fusion (PRE_SCHEDULER) in the worker processes of targets under
test only, never in references, so a campaign can prove it catches a miscompilation.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path

from .campaign import SpecError


def split_ref(ref: str) -> tuple[Path, str]:
    path, _, func = ref.partition(":")
    return Path(path), func or "transform"


def check_ref(ref: str, field: str = "injectPasses") -> None:
    """Fail with one clear line if a plugin reference cannot be used (no jax needed)."""
    path, func = split_ref(ref)
    if path.suffix != ".py":
        raise SpecError(f"{field}: {ref!r} must be FILE.py[:FUNC]")
    if not path.is_file():
        raise SpecError(f"{field}: plugin file {path} does not exist")
    if not func.isidentifier():
        raise SpecError(f"{field}: {func!r} in {ref!r} is not a function name")


def load(ref: str) -> Callable[[bytes], bytes | None]:
    path, func = split_ref(ref)
    check_ref(ref)
    spec = importlib.util.spec_from_file_location(f"xla_sentinel_plugin_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SpecError(f"injectPasses: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # a plugin's own import error must name the plugin
        raise SpecError(f"injectPasses: importing {path} failed: {type(e).__name__}: {e}") from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise SpecError(f"injectPasses: {path} has no function {func!r}")
    return fn


def register(refs: Sequence[str], platform: str = "cpu") -> list[str]:
    """Register plugins in this process; returns the names they were registered under."""
    import jax
    import jax.extend as jex

    names = []
    for i, ref in enumerate(refs):
        fn = load(ref)
        name = f"xla_sentinel_inject_{i}_{split_ref(ref)[0].stem}"
        jex.xla.register_hlo_module_transformation(
            fn, name=name, platforms=platform, stage=jex.xla.PipelineStage.PRE_SCHEDULER)
        names.append(name)
    jax.clear_caches()
    return names
