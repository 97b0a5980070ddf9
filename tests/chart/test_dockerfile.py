"""The Dockerfile agrees with the project it packages and the chart that runs it, and stays
buildable with the legacy builder of Debian's docker 20.10 without a registry. These checks read
the file; `make images` builds it and tests/chart/test_images.py runs what it built."""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from tools import REPO_ROOT

from .render import CI_VALUES, by_kind, render

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
CONSTRAINTS = REPO_ROOT / "deploy" / "images" / "constraints.txt"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def _stages() -> dict[str, str]:
    """Stage name -> its instructions (text up to the next FROM)."""
    parts = re.split(r"^FROM\s+", DOCKERFILE, flags=re.M)[1:]
    stages = {}
    for part in parts:
        header, _, body = part.partition("\n")
        match = re.search(r"\bAS\s+(\S+)", header, flags=re.I)
        assert match, f"unnamed stage: FROM {header}"
        stages[match.group(1)] = header + "\n" + body
    return stages


def _constraints() -> dict[str, str]:
    assert "COPY deploy/images/constraints.txt /opt/constraints.txt" in _stages()["base"]
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"constraint {line!r} is not pinned with =="
        pins[name.lower().replace("_", "-")] = version
    return pins


def _chart_user() -> int:
    deployment = by_kind(render(CI_VALUES[0]), "Deployment")[0]
    return deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]


@pytest.mark.parametrize("target,command", [("operator", "operator"), ("runner", "worker")])
def test_final_images_run_the_cli_as_the_chart_user(target: str, command: str) -> None:
    stage = _stages()[target]
    uid = _chart_user()
    assert re.search(rf"^USER {uid}:{uid}$", stage, flags=re.M), f"{target} must run as {uid}"
    script = next(iter(PYPROJECT["project"]["scripts"]))
    assert f'ENTRYPOINT ["{script}"]' in stage
    assert f'CMD ["{command}"]' in stage


def test_operator_image_installs_the_operator_extra_and_no_jax() -> None:
    build = _stages()["operator-build"]
    assert "'.[operator]'" in build
    assert "jax" not in build.replace("! pip show jax jaxlib", "")
    # ... and its build fails where the command the image runs cannot start.
    assert "xla-sentinel operator --help" in build


def test_the_legacy_builder_takes_it_without_a_registry() -> None:
    """Debian's docker 20.10 builds without BuildKit: no `# syntax=` line (BuildKit would pull
    that frontend image from a registry), no heredocs (the legacy builder rejects them), and
    the base an argument whose default is the public Python 3.11 slim image."""
    assert not re.search(r"^#\s*syntax\s*=", DOCKERFILE, flags=re.M | re.I)
    assert "<<" not in re.sub(r"^#.*$", "", DOCKERFILE, flags=re.M)
    default = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, flags=re.M).group(1)
    assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-bookworm)?(@sha256:[0-9a-f]{64})?", default)
    assert DOCKERFILE.index("ARG PYTHON_IMAGE") < DOCKERFILE.index("FROM ${PYTHON_IMAGE} AS base")
    # The legacy builder builds every stage above --target: the operator's come first.
    order = list(_stages())
    assert order.index("operator") < order.index("runner-build")


def test_runner_flavours_select_the_pinned_jax() -> None:
    build = _stages()["runner-build"]
    jax_pin = next(Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["engine"]
                   if Requirement(r).name == "jax")
    version = re.search(r"^ARG JAX_VERSION=(\S+)$", build, flags=re.M).group(1)
    assert jax_pin.specifier.contains(version)
    for flavour, extra in (("cpu", "cpu"), ("cuda", "cuda12"), ("tpu", "tpu")):
        assert f'{flavour}) jax="jax[{extra}]==${{JAX_VERSION}}"' in re.sub(r" +", " ", build)
    assert "'.[engine,agents]'" in build  # agent pods (spec.agents) run the runner image


def test_constraints_satisfy_every_dependency_the_project_declares() -> None:
    pins = _constraints()
    declared = PYPROJECT["project"]["dependencies"] + [
        r for extra in ("engine", "operator", "agents") for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    for line in declared:
        req = Requirement(line)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{req.name} is installed unpinned"
        assert req.specifier.contains(pins[name]), f"{req.name}=={pins[name]} violates {line!r}"


def test_dockerignore_lets_in_what_the_build_copies() -> None:
    allowed = {line[1:].rstrip("/") for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")}
    copied = set(re.findall(r"^COPY (?!--from)(\S+)", DOCKERFILE, flags=re.M))
    # bench/repros: the agents' regression corpus, package data through a link (docs/agents.md).
    assert copied == allowed == {"pyproject.toml", "runners", "operator", "deploy/images/constraints.txt",
                                 "bench/repros"}
