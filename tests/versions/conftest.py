"""Fixtures of the cross-version tests: a real environment of another jaxlib, made by the
project's own function (`make version-envs` runs the same), and fake "releases" that are
this interpreter with or without an injected fault.

The real environment lives under ~/.cache/xla-sentinel/envs (or $XLA_SENTINEL_TEST_ENVS).
The tests download nothing: `make test` first runs `make test-envs`, which installs
jax/jaxlib 0.10.1 there from PyPI once (about 45 s on 2 cores; nothing after, its
`.installed` stamp is kept), as it installs the project's own venv.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from xla_sentinel.core import versions
from xla_sentinel.xla import faults

# The release before the current 0.10.2: its XLA:CPU keeps the NaN of a 4,096-element max
# reduction, 0.10.2's drops it (bench/repros/reduce_max_drops_nan.py), a real regression.
OLD = "0.10.1"
FAULTS = Path(faults.__file__).parent


def cached_envs() -> Path:
    return Path(os.environ.get("XLA_SENTINEL_TEST_ENVS")
                or Path.home() / ".cache" / "xla-sentinel" / "envs")


@pytest.fixture(scope="session")
def old_env() -> versions.Environment:
    """jaxlib 0.10.1's environment, as `make test-envs` created it (no download here: a
    test reaches nothing beyond loopback)."""
    path = cached_envs() / f"jaxlib-{OLD}"
    python = path / "bin" / "python"
    if not ((path / ".installed").is_file() and python.exists()):
        pytest.fail(f"no jaxlib {OLD} environment at {path}: run `make test-envs` "
                    f"(make test runs it before the tests)")
    return versions.Environment(str(python), OLD)


@pytest.fixture
def with_old_env(old_env: versions.Environment, monkeypatch: pytest.MonkeyPatch) -> versions.Environment:
    """The cached environments are where `jaxlib: 0.10.1` targets and probes look."""
    monkeypatch.setenv(versions.ENVS_VARIABLE, str(cached_envs()))
    return old_env


def fake_release(root: Path, version: str, fault: str | None = None, broken: bool = False) -> Path:
    """A simulated release `version` under `root`: its interpreter is this one (the current
    jaxlib); with `fault` (a file of runners/xla_sentinel/xla/faults/) that injected pass is registered when
    the interpreter starts (a sitecustomize on its PYTHONPATH), which is the simulated
    version difference; `broken`: an interpreter that exits at once."""
    env = root / f"jaxlib-{version}"
    (env / "bin").mkdir(parents=True)
    lines = ["#!/bin/sh"]
    if broken:
        lines.append("echo 'simulated broken environment' >&2; exit 3")
    if fault:
        site = env / "site"
        site.mkdir()
        # Registered before the worker's own code runs; device flags as the worker sets them.
        (site / "sitecustomize.py").write_text(
            "import os\n"
            "os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') +"
            " ' --xla_force_host_platform_device_count=8').strip()\n"
            "from xla_sentinel.xla import plugins\n"
            f"plugins.register([{str(FAULTS / fault) + ':transform'!r}])\n")
        lines.append(f'PYTHONPATH="{site}" exec {sys.executable} "$@"')
    else:
        lines.append(f'exec {sys.executable} "$@"')
    python = env / "bin" / "python"
    python.write_text("\n".join(lines) + "\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    (env / ".installed").write_text('{"simulated": true}\n')
    return env
