"""jax/jaxlib versions: the installed ones, and the other-jaxlib environments targets run in.

A Target with `jaxlib: X` runs its worker under the interpreter of an environment that holds
jaxlib X (docs/versions.md): `make version-envs` creates one per release under
`.venvs/jaxlib-X/` of the checkout (or $XLA_SENTINEL_VERSION_ENVS), with this project
installed in it without dependencies. No jax import here: the coordinator and the operator
read versions from package metadata.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from xla_sentinel.core.errors import UserError

# A released jax/jaxlib version: 0.10.1, 0.9.0.1 (no pre-releases: only what PyPI ships).
VERSION_PATTERN = re.compile(r"^[0-9]+(\.[0-9]+){1,3}$")
ENVS_VARIABLE = "XLA_SENTINEL_VERSION_ENVS"


class VersionError(UserError, ValueError):
    """A version or an environment that cannot be used; the message says which and why."""


def package_versions() -> dict[str, str]:
    out = {}
    for pkg in ("jax", "jaxlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def current_jaxlib() -> str:
    """The jaxlib of this interpreter (the version a campaign's own targets run)."""
    return package_versions()["jaxlib"]


def parse_version(text: str) -> tuple[int, ...]:
    """A release version as a tuple that orders as releases do (0.9.2 < 0.10.0)."""
    if not VERSION_PATTERN.match(text):
        raise VersionError(f"{text!r} is not a released jaxlib version (like 0.10.1)")
    return tuple(int(p) for p in text.split("."))


def parse_range(text: str) -> tuple[str, str]:
    """`A..B` as (A, B), A older than B."""
    first, sep, last = text.partition("..")
    if not sep:
        raise VersionError(f"{text!r}: a range is OLDEST..NEWEST, like 0.9.0..0.10.2")
    if parse_version(first) >= parse_version(last):
        raise VersionError(f"{text!r}: {first} is not older than {last}")
    return first, last


def envs_dir() -> Path:
    """Where the other-jaxlib environments live: $XLA_SENTINEL_VERSION_ENVS, else `.venvs/`
    of the checkout this package runs from (an editable install, as make sets it up)."""
    if os.environ.get(ENVS_VARIABLE):
        return Path(os.environ[ENVS_VARIABLE])
    root = Path(__file__).resolve().parents[3]  # runners/xla_sentinel/core/versions.py -> the checkout
    if (root / "Makefile").is_file():
        return root / ".venvs"
    return Path.home() / ".cache" / "xla-sentinel" / "envs"


@dataclass(frozen=True)
class Environment:
    """A Python environment a worker can run in: its interpreter and its jaxlib."""

    python: str
    jaxlib: str

    @property
    def current(self) -> bool:
        """This interpreter's own environment. Not by resolved paths: every venv's python
        is a link to the same base interpreter, and the environment is the venv."""
        return os.path.abspath(self.python) == os.path.abspath(sys.executable)


def env_path(version: str) -> Path:
    return envs_dir() / f"jaxlib-{version}"


def make_hint(version: str) -> str:
    return f"make version-envs VERSION_ENVS={version}"


def environment(version: str) -> Environment:
    """The environment of jaxlib `version`: this interpreter for the current version, else
    its env under envs_dir(); VersionError naming the folder and the make command when it
    is not there."""
    parse_version(version)
    if version == current_jaxlib():
        return Environment(sys.executable, version)
    python = env_path(version) / "bin" / "python"
    if not (env_path(version) / ".installed").is_file() or not python.exists():
        raise VersionError(f"no environment for jaxlib {version} at {env_path(version)} "
                           f"(create it with `{make_hint(version)}`)")
    return Environment(str(python), version)


def installed_versions() -> list[str]:
    """The jaxlib versions with an environment here (the current one included), oldest first."""
    found = {current_jaxlib()}
    if envs_dir().is_dir():
        for d in envs_dir().glob("jaxlib-*"):
            v = d.name.removeprefix("jaxlib-")
            if VERSION_PATTERN.match(v) and (d / ".installed").is_file():
                found.add(v)
    return sorted((v for v in found if VERSION_PATTERN.match(v)), key=parse_version)


# What an other-jaxlib environment holds besides jax and jaxlib (and what they pull in:
# numpy, ml_dtypes, scipy): the base dependencies of this project that a worker imports.
# The worker's own code is not installed there: it is loaded from the coordinator's package
# when the worker starts (worker/client.py), so one environment serves every checkout and version
# of this project, and coordinator and worker always speak the same protocol.
ENV_PACKAGES = ("pyyaml", "structlog")


def create_environment(version: str, root: Path | None = None, log: Any = None) -> Environment:
    """Create (once) the environment of jaxlib `version` from PyPI under `root` (default
    envs_dir()): a venv of this interpreter's Python with jax==V, jaxlib==V and
    ENV_PACKAGES, stamped `.installed` (JSON: versions, seconds) when complete. An existing
    stamped environment is returned as is; a half-made one is made again."""
    import json
    import shutil
    import subprocess
    import time

    parse_version(version)
    path = (root or envs_dir()) / f"jaxlib-{version}"
    stamp = path / ".installed"
    if stamp.is_file():
        return Environment(str(path / "bin" / "python"), version)
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    out = log if log is not None else subprocess.DEVNULL
    try:
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True,
                       stdout=out, stderr=subprocess.STDOUT)
        subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", f"jaxlib=={version}", f"jax=={version}",
                        *ENV_PACKAGES], check=True, stdout=out, stderr=subprocess.STDOUT)
    except subprocess.CalledProcessError as e:
        raise VersionError(f"jaxlib {version}: creating {path} failed ({' '.join(e.cmd[:4])}... "
                           f"exited {e.returncode}); is jaxlib=={version} on PyPI for "
                           f"Python {sys.version_info.major}.{sys.version_info.minor}?") from None
    stamp.write_text(json.dumps({"jaxlib": version, "jax": version,
                                 "python": f"{sys.version_info.major}.{sys.version_info.minor}",
                                 "seconds": round(time.monotonic() - started, 1)}) + "\n")
    return Environment(str(path / "bin" / "python"), version)


def main(argv: list[str]) -> int:
    """`python -m xla_sentinel.core.versions create V...` (what `make version-envs` runs)."""
    if len(argv) < 2 or argv[0] != "create":
        print("usage: python -m xla_sentinel.core.versions create VERSION...", file=sys.stderr)
        return 2
    for v in argv[1:]:
        try:
            env = create_environment(v, log=sys.stderr)
        except VersionError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"jaxlib {v}: {env.python}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
