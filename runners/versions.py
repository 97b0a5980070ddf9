"""Versions of the installed jax and jaxlib, from package metadata (no jax import)."""

from __future__ import annotations

from importlib import metadata


def package_versions() -> dict[str, str]:
    out = {}
    for pkg in ("jax", "jaxlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out
