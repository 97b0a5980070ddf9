"""Injecting a pass plugin leaves no buffer finding of its own (issue 36).

jaxlib builds a module again from any proto a plugin returns, and that rebuild drops the
module's donation: an identity plugin (`transform` returns its argument) made every program
with a donated input a `donation_mismatch`. A plugin's result equal to its input is no
change now, so the module keeps its donation and the check still judges it; a plugin that
rewrites the module leaves an executable that donates nothing, and its inputs are checked
as inputs the module does not donate (docs/detection.md, "Buffer corruption")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest
import yaml
from xla_sentinel.campaign.check import check_program
from xla_sentinel.core.program import Program
from xla_sentinel.xla import buffers, compiler, plugins

PLUGINS = {
    "identity.py": "def transform(proto):\n    return proto\n",
    # The same module serialized again: other bytes, nothing else changed.
    "roundtrip.py": ("from xla_sentinel.xla import hlo_proto\n\n\n"
                     "def transform(proto):\n    return hlo_proto.rewrite_proto(proto, lambda module: True)\n"),
}


def _update(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    return x.at[0].set(y[0]) * 2, y + 1


ARGS = [np.arange(8, dtype=np.float32), np.full(8, 3.0, np.float32)]
DONATED = jax.jit(_update, donate_argnums=(0,)).lower(*ARGS).as_text()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("donation")
    Program("donated", DONATED, ARGS, ["f32", "f32"]).save(folder / "program")
    (folder / "campaign.yaml").write_text(
        yaml.safe_dump({"targets": ["default"], "references": ["f64_eager", "eager"]}))
    for name, source in PLUGINS.items():
        (folder / name).write_text(source)
    return folder


def _verdict(folder: Path, plugin: str) -> dict[str, Any]:
    (verdict,) = check_program(folder / "program", folder / "campaign.yaml", [str(folder / plugin)])
    return verdict


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_a_plugin_that_changes_nothing_gives_no_finding_on_a_donated_program(
        folder: Path, plugin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(buffers.FAULT_ENV, raising=False)
    verdict = _verdict(folder, plugin)
    assert verdict["verdict"] == "pass", verdict


def test_under_the_identity_plugin_an_ignored_donation_is_still_found(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(buffers.FAULT_ENV, "donation_ignored")
    verdict = _verdict(folder, "identity.py")
    assert verdict["verdict"] == "donation_mismatch", verdict
    assert [p["buffer"] for p in verdict["evidence"]["buffers"]] == ["input 0"]


def test_an_input_whose_donation_a_rewrite_dropped_is_checked_as_not_donated(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # input_alias writes into the first input the run treats as not donated: input 0.
    monkeypatch.setenv(buffers.FAULT_ENV, "input_alias")
    verdict = _verdict(folder, "roundtrip.py")
    assert verdict["verdict"] == "input_clobbered", verdict
    assert [p["buffer"] for p in verdict["evidence"]["buffers"]] == ["input 0"]


def test_a_result_equal_to_the_input_is_no_change() -> None:
    proto = plugins.sample_module()
    assert plugins.guarded("identity.py", lambda p: p)(proto) is None
    assert plugins.guarded("copy.py", lambda p: bytearray(p))(proto) is None


def test_the_executable_says_which_parameters_it_donates() -> None:
    assert buffers.kept_donation(compiler.compile_module(DONATED, {}, "cpu")) == {0}
    donor = DONATED.replace("%arg1: tensor<8xf32>", "%arg1: tensor<8xf32> {jax.buffer_donor = true}")
    assert buffers.kept_donation(compiler.compile_module(donor, {}, "cpu")) == {0, 1}
    plain = buffers.without_donation(DONATED)
    assert buffers.kept_donation(compiler.compile_module(plain, {}, "cpu")) == set()
