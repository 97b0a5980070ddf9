"""The architecture holds: the engine's import graph has no cycle, and every contract of
pyproject's [tool.importlinter] is kept (layers; the coordinator, the operator and the op
specs import no jax; the references compile nothing). Imports inside functions count."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import import_graph

REPO = Path(__file__).resolve().parents[2]


def test_the_engine_has_no_import_cycle() -> None:
    f = import_graph.figures("xla_sentinel")
    assert f["knots"] == []


def test_the_operator_has_no_import_cycle() -> None:
    assert import_graph.figures("xla_sentinel_operator")["knots"] == []


def test_every_import_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " 0 broken" in out.stdout.split("Contracts:")[-1]


def test_a_broken_layer_would_be_caught(tmp_path: Path) -> None:
    # The contract is not vacuous: a core module importing the campaign breaks it. A copy
    # of the package, first on the path, carries the offending module (the tree is shared
    # with tests running beside this one).
    shutil.copytree(REPO / "runners" / "xla_sentinel", tmp_path / "xla_sentinel",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "xla_sentinel" / "core" / "probe.py").write_text(
        "from xla_sentinel.campaign import engine  # noqa: F401\n")
    layers = _ini_of_layers((REPO / "pyproject.toml").read_text(), roots=["xla_sentinel"])
    (tmp_path / ".importlinter").write_text(layers)
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.returncode != 0
    assert "xla_sentinel.core.probe -> xla_sentinel.campaign.engine" in out.stdout


def _ini_of_layers(pyproject: str, roots: list[str]) -> str:
    """The layers contract of pyproject.toml alone, in import-linter's INI form."""
    import tomllib

    cfg = tomllib.loads(pyproject)["tool"]["importlinter"]
    layers = next(c for c in cfg["contracts"] if c["type"] == "layers")
    lines = ["[importlinter]", "root_packages =", *[f"    {p}" for p in roots],
             "", "[importlinter:contract:layers]", f"name = {layers['name']}", "type = layers",
             "containers =", *[f"    {c}" for c in layers["containers"]],
             "layers =", *[f"    {layer}" for layer in layers["layers"]]]
    return "\n".join(lines) + "\n"
