"""The Dockerfile agrees with the project it packages and the chart that runs it. No Docker
engine exists here, so these checks read the file; `make images` builds it elsewhere."""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from tools import REPO_ROOT

from .render import CI_VALUES, by_kind, render

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
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
    block = DOCKERFILE.split("COPY <<EOF /opt/constraints.txt\n", 1)[1].split("\nEOF\n", 1)[0]
    pins = {}
    for line in block.splitlines():
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


def test_runner_flavours_select_the_pinned_jax() -> None:
    build = _stages()["runner-build"]
    jax_pin = next(Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["engine"]
                   if Requirement(r).name == "jax")
    version = re.search(r"^ARG JAX_VERSION=(\S+)$", build, flags=re.M).group(1)
    assert jax_pin.specifier.contains(version)
    for flavour, extra in (("cpu", "cpu"), ("cuda", "cuda12"), ("tpu", "tpu")):
        assert f'{flavour}) jax="jax[{extra}]==${{JAX_VERSION}}"' in re.sub(r" +", " ", build)
    assert "'.[engine]'" in build


def test_constraints_satisfy_every_dependency_the_project_declares() -> None:
    pins = _constraints()
    declared = PYPROJECT["project"]["dependencies"] + [
        r for extra in ("engine", "operator") for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    for line in declared:
        req = Requirement(line)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{req.name} is installed unpinned"
        assert req.specifier.contains(pins[name]), f"{req.name}=={pins[name]} violates {line!r}"


def test_dockerignore_lets_in_what_the_build_copies() -> None:
    allowed = {line[1:].rstrip("/") for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")}
    copied = set(re.findall(r"^COPY (?!--from|<<)(\S+)", DOCKERFILE, flags=re.M))
    assert copied == allowed == {"pyproject.toml", "runners", "operator"}
