"""`xla-sentinel --version`: this package's version and the jax and jaxlib installed beside
it, read from package metadata (jax is not imported, so the answer is instant). Imports
nothing of the engine: the operator image, which holds no numpy, answers it too."""

from __future__ import annotations

import argparse
from typing import Any

from xla_sentinel import __version__
from xla_sentinel.core.versions import package_versions


def version_line() -> str:
    found = ", ".join(f"{name} {version}" for name, version in package_versions().items())
    return f"xla-sentinel {__version__} ({found})"


class VersionAction(argparse.Action):
    """`--version` on a parser: prints `version_line()` and exits 0."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the versions of xla-sentinel, jax and jaxlib and exit", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(version_line())
        parser.exit()
