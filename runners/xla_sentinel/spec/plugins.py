"""Plugin references (`--inject-pass FILE.py[:FUNC]`, the campaign's `injectPasses`): their
form and the checks that need no jax. Loading and registering them happens in workers
(xla/plugins.py)."""

from __future__ import annotations

from pathlib import Path

from xla_sentinel.spec.campaign import SpecError


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
