"""The container images, run for real with the real container runtime.

`make images` (deploy/images/build.sh) builds the operator image and the cpu runner image and
leaves each as an archive under IMAGES_OUT (default ~/.cache/xla-sentinel/images) with
images.json. These tests take those archives as a cluster node would: `docker load` and
`ctr images import` them, run the operator as the chart runs it (uid 10001, read-only root
filesystem, here with no network) and run a small campaign in the runner image.

Where the archives are missing the tests fail and say to run `make images`: a skip would let
a broken image pass unnoticed, which is how the operator image shipped unable to start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from tools import REPO_ROOT

BUILD = REPO_ROOT / "deploy" / "images" / "build.sh"
IMAGES_OUT = Path(os.environ.get("IMAGES_OUT") or Path.home() / ".cache" / "xla-sentinel" / "images")
MANIFEST = IMAGES_OUT / "images.json"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
UID = 10001  # the chart's runAsUser (tests/chart/test_dockerfile.py checks the Dockerfile's USER)


@pytest.fixture(scope="module")
def images() -> dict[str, dict[str, Any]]:
    """target ('operator', 'runner-cpu') -> its images.json row, archives checked present."""
    if not MANIFEST.is_file():
        pytest.fail(f"{MANIFEST} is missing: run `make images` first (it builds the operator and "
                    f"cpu runner images and leaves their archives in {IMAGES_OUT})", pytrace=False)
    rows = json.loads(MANIFEST.read_text())["images"]
    by_target = {row["target"] + (f"-{row['flavor']}" if row["flavor"] else ""): row for row in rows}
    for want in ("operator", "runner-cpu"):
        row = by_target.get(want)
        if row is None or not Path(row["archive"]).is_file():
            pytest.fail(f"no {want} image archive in {MANIFEST}: run `make images`", pytrace=False)
    return by_target


@pytest.fixture(scope="module")
def engine() -> dict[str, str]:
    """DOCKER, DOCKER_HOST and (for the dockerd build.sh runs) CONTAINERD_ADDRESS."""
    out = subprocess.run([str(BUILD), "engine"], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        pytest.fail(f"no container engine: {BUILD} engine said: {out.stderr.strip()}", pytrace=False)
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


def docker(engine: dict[str, str], *args: str, timeout: float = 300, check: bool = False
           ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if engine.get("DOCKER_HOST"):
        env["DOCKER_HOST"] = engine["DOCKER_HOST"]
    out = subprocess.run([engine["DOCKER"], *args], capture_output=True, text=True, env=env,
                         timeout=timeout)
    if check:
        assert out.returncode == 0, f"docker {' '.join(args)}: {out.stderr}"
    return out


# How the chart runs the pods: its user, a read-only root filesystem; here, no network either.
RESTRICTED = ("--network", "none", "--read-only", "--user", f"{UID}:{UID}")


@pytest.mark.parametrize("target", ["operator", "runner-cpu"])
def test_each_archive_loads_with_docker_load(images: dict[str, dict[str, Any]],
                                             engine: dict[str, str], target: str) -> None:
    row = images[target]
    out = docker(engine, "load", "-i", row["archive"], check=True)
    assert f"Loaded image: {row['ref']}" in out.stdout
    loaded = docker(engine, "image", "inspect", "-f", "{{.Id}}", row["ref"], check=True).stdout.strip()
    assert loaded == row["id"], f"{row['archive']} holds {loaded}, images.json says {row['id']}"
    config = json.loads(docker(engine, "image", "inspect", "-f", "{{json .Config}}", row["ref"],
                               check=True).stdout)
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["xla-sentinel"]


@pytest.mark.parametrize("target", ["operator", "runner-cpu"])
def test_each_archive_imports_with_ctr(images: dict[str, dict[str, Any]], engine: dict[str, str],
                                       target: str) -> None:
    address, ctr = engine.get("CONTAINERD_ADDRESS"), shutil.which("ctr")
    if not address or not ctr:
        pytest.skip("no containerd of the dockerd that deploy/images/build.sh runs answers here "
                    "(the engine is another Docker): `ctr images import` is checked against that one")
    row = images[target]
    namespace = f"xs-images-test-{uuid.uuid4().hex[:8]}"  # apart from dockerd's own "moby"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ctr, "-a", address, "-n", namespace, *args], capture_output=True,
                              text=True, timeout=600)

    try:
        out = run("images", "import", row["archive"])
        assert out.returncode == 0, out.stderr
        listed = run("images", "ls", "-q").stdout.split()
        assert any(name == row["ref"] or name.endswith("/" + row["ref"]) for name in listed), listed
        # The import unpacked the layers: the image's files are there for a container.
        mounted = run("images", "check")
        assert mounted.returncode == 0 and "complete" in mounted.stdout, mounted.stdout + mounted.stderr
    finally:
        for name in run("images", "ls", "-q").stdout.split():
            run("images", "rm", "--sync", name)
        run("namespaces", "rm", namespace)


def test_operator_image_holds_no_jax(images: dict[str, dict[str, Any]], engine: dict[str, str]) -> None:
    out = docker(engine, "run", "--rm", *RESTRICTED, "--entrypoint", "pip", images["operator"]["ref"],
                 "show", "jax", "jaxlib")
    assert out.returncode != 0 and "not found: jax" in out.stderr.replace("Package(s) ", ""), out.stderr


def test_operator_image_starts_the_operator_command(images: dict[str, dict[str, Any]],
                                                    engine: dict[str, str]) -> None:
    out = docker(engine, "run", "--rm", *RESTRICTED, images["operator"]["ref"], "operator", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: xla-sentinel operator")
    assert "--runner-image" in out.stdout


# An API server address inside the container's own network namespace, where nothing listens.
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: absent
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: operator
  user: {token: no-cluster-here}
contexts:
- name: absent
  context: {cluster: absent, user: operator}
current-context: absent
"""


def _events(stderr: str) -> list[dict[str, Any]]:
    """The operator's JSON log lines (it logs to stderr)."""
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_operator_image_reaches_its_first_api_call_and_retries_without_a_cluster(
        images: dict[str, dict[str, Any]], engine: dict[str, str], tmp_path: Path) -> None:
    """The operator as the chart's pod starts it, with a kubeconfig whose API server does not
    answer: it logs in, its first request (discovery, GET /api) fails with the reason, it keeps
    retrying instead of dying, and it stops cleanly on SIGTERM."""
    config = tmp_path / "config"
    config.mkdir(mode=0o755)  # readable by uid 10001 (tmp_path itself is not)
    (config / "kubeconfig").write_text(KUBECONFIG)
    (config / "kubeconfig").chmod(0o644)
    name = f"xs-operator-{uuid.uuid4().hex[:8]}"
    docker(engine, "run", "-d", "--name", name, *RESTRICTED, "-v", f"{config}:/config:ro",
           images["operator"]["ref"], "operator", "--kubeconfig", "/config/kubeconfig", check=True)
    try:
        deadline, logs = time.monotonic() + 90, ""
        while time.monotonic() < deadline:
            logs = docker(engine, "logs", name).stderr
            if "GET https://127.0.0.1:6443/api -> " in logs:
                break
            time.sleep(1)
        events = [e["event"] for e in _events(logs)]
        assert "Initial authentication has finished." in events, logs
        failed = [e for e in events if "failed; will retry: GET https://127.0.0.1:6443/api -> " in e]
        assert failed and "Connect call failed ('127.0.0.1', 6443)" in failed[0], logs
        state = json.loads(docker(engine, "inspect", "-f", "{{json .State}}", name, check=True).stdout)
        assert state["Running"], (state, logs[-3000:])
        docker(engine, "stop", "-t", "30", name, check=True)
        state = json.loads(docker(engine, "inspect", "-f", "{{json .State}}", name, check=True).stdout)
        logs = docker(engine, "logs", name).stderr
        assert state["ExitCode"] == 0, (state, logs[-3000:])
        assert "Signal SIGTERM is received. Operator is stopping." in [e["event"] for e in _events(logs)]
    finally:
        docker(engine, "rm", "-f", name)


def test_operator_image_without_credentials_exits_saying_so(images: dict[str, dict[str, Any]],
                                                            engine: dict[str, str]) -> None:
    """The image's own command outside a cluster (no service account, no kubeconfig): it
    stops at once with the reason, instead of waiting for credentials that cannot come."""
    out = docker(engine, "run", "--rm", *RESTRICTED, images["operator"]["ref"], timeout=120)
    assert out.returncode != 0
    events = [e["event"] for e in _events(out.stderr)]
    assert ("Initial authentication has failed: no credentials were retrieved from the login "
            "handlers.") in events, out.stderr[-3000:]


@pytest.fixture
def out_dir(tmp_path: Path) -> Iterator[Path]:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)  # written by uid 10001 in the container
    yield out


def test_runner_image_runs_a_small_campaign(images: dict[str, dict[str, Any]], engine: dict[str, str],
                                            out_dir: Path) -> None:
    programs = 4
    out = docker(
        engine, "run", "--rm", *RESTRICTED,
        "--tmpfs", "/tmp:rw,size=1g,mode=1777",  # the emptyDir the chart mounts; HOME=/tmp
        "-v", f"{REPO_ROOT / 'examples' / 'smoke.yaml'}:/campaign/smoke.yaml:ro",
        "-v", f"{out_dir}:/out",
        images["runner-cpu"]["ref"],
        "run", "/campaign/smoke.yaml", "--out", "/out/smoke", "--budget-programs", str(programs),
        "--workers", "1", "--quiet", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith(f"{programs} programs, "), out.stdout
    summary = json.loads((out_dir / "smoke" / "summary.json").read_text())
    assert summary["programs"] == programs
    assert summary["executions"] > 0
    assert (out_dir / "smoke" / "campaign.sqlite").is_file()



def test_runner_image_runs_the_agent_runtime_to_its_credential_check(
        images: dict[str, dict[str, Any]], engine: dict[str, str]) -> None:
    """Agent pods (spec.agents) run `xla-sentinel agent` from the runner image: its agents
    extra is installed (a missing one would say so and exit 1), and without the model's
    credential the agent exits 2 naming the variable, before any tool runs."""
    out = docker(
        engine, "run", "--rm", *RESTRICTED, "--tmpfs", "/tmp:rw,size=256m,mode=1777",
        images["runner-cpu"]["ref"],
        "agent", "--role", "stress", "--model", "openai:gpt-5", "--out", "/tmp/agents", timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "OPENAI_API_KEY" in out.stderr and "agents extra" not in out.stderr, out.stderr


# --- without the images ---------------------------------------------------------------------

def _engine_only_modules() -> set[str]:
    """Import names of what the engine extra installs and the operator image does not."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    names = lambda reqs: {Requirement(r).name.lower().replace("_", "-") for r in reqs}  # noqa: E731
    engine_only = names(extras["engine"]) - names(extras["operator"]) - names(PYPROJECT["project"]["dependencies"])
    modules = {m for m, dists in packages_distributions().items()
               if any(d.lower().replace("_", "-") in engine_only for d in dists)}
    assert {"jax", "jaxlib", "numpy"} <= modules, modules
    return modules


def test_the_operator_command_starts_without_the_engine_packages() -> None:
    """`xla-sentinel operator` as the console script runs it, with numpy, jax and the rest of
    the engine extra unimportable, as in the operator image: the check that needs no engine."""
    script = PYPROJECT["project"]["scripts"]["xla-sentinel"]
    module, _, func = script.partition(":")
    code = f"""
import importlib, importlib.abc, sys
BLOCKED = {sorted(_engine_only_modules())!r}
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in the operator image)", name=name)
sys.meta_path.insert(0, Absent())
sys.argv = ["xla-sentinel", "operator", "--help"]
sys.exit(getattr(importlib.import_module({module!r}), {func!r})())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=REPO_ROOT)
    assert out.returncode == 0, f"`xla-sentinel operator --help` ({script}) without the engine extra:\n{out.stderr}"
    assert out.stdout.startswith("usage: xla-sentinel operator")
