"""Buffer findings get bundles (issue 36): their outputs are right, so a repro.py that
checks numbers exited 0 and the bundle gate refused every one (CI rehearsal 1). repro.py
now judges a buffer finding by the buffers, as the campaign's worker did: a non-donated
input changed or consumed (`input_clobbered`), a donated input not consumed
(`donation_mismatch`). What is injected is xla/buffers.py's runtime fault
(XLA_SENTINEL_BUFFER_FAULT; no XLA pass makes XLA:CPU write into a caller's buffer), which
the bundle's repro.py replays after the run as the worker did (RUNTIME_FAULT), and leaves
out with --without-plugins: then it exits 0, so it checks the buffers and not its own
constants. Real compiles in real workers, whole local campaigns with bisection on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.xla.buffers import FAULT_ENV

BASE = {"seed": 3, "generator": {"version": 1, "minOps": 2, "maxOps": 4, "dtypes": ["f32", "s32"],
                                 "shapes": ["buffers"]},
        "targets": ["default"], "references": ["f64_numpy", "eager"], "workers": 1,
        "bisect": {"enabled": True, "perSignature": 1}}


def test_an_input_clobbered_findings_bundle_shows_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fault, verdict = "input_alias", "input_clobbered"
    monkeypatch.setenv(FAULT_ENV, fault)
    run_campaign(parse_spec({**BASE, "budget": {"programs": 1}}), tmp_path)
    bisected = [(p.parent, r) for p in sorted(tmp_path.glob("findings/*/finding.json"))
                if (r := json.loads(p.read_text()))["evidence"].get("bisect")]
    assert bisected, "no finding was bisected"
    _, record = bisected[0]
    assert record["verdict"] == verdict
    bundle = record["evidence"]["bisect"]["stages"]["bundle"]
    assert bundle["written"] is True and bundle["repro_exit"] == 1, bundle
    repro = tmp_path / record["repro"]
    text = (repro / "repro.py").read_text()
    assert f"FAILURE = {verdict!r}" in text and f"RUNTIME_FAULT = {fault!r}" in text
    shows = subprocess.run([sys.executable, "repro.py"], cwd=repro, capture_output=True, text=True, timeout=300,
                           env={k: v for k, v in __import__("os").environ.items() if k != FAULT_ENV})
    assert shows.returncode == 1 and "BUG: input" in shows.stdout, shows.stdout + shows.stderr
    clean = subprocess.run([sys.executable, "repro.py", "--without-plugins"], cwd=repro, capture_output=True,
                           text=True, timeout=300)
    assert clean.returncode == 0 and "OK: every buffer" in clean.stdout, clean.stdout + clean.stderr


def _bundle(folder: Path, failure: str, fault: str | None) -> Path:
    """A bundle laid out as bisect/bundle.py writes one, by hand: a module that donates its
    first input (jax's donate_argnums), its inputs, float64 expected values, repro.py."""
    import jax
    import numpy as np
    from xla_sentinel.bisect import repro_template
    from xla_sentinel.core.program import save_arrays
    from xla_sentinel.xla import buffers

    x, y = np.arange(12, dtype=np.float32).reshape(3, 4), np.full((3, 4), 0.5, np.float32)
    module = jax.jit(lambda a, b: (a * 2 + b, b - 1), donate_argnums=0).lower(x, y).as_text()
    assert buffers.donated_args(module) == [0]
    folder.mkdir()
    (folder / "module.mlir").write_text(module)
    (folder / "module_undonated.mlir").write_text(buffers.without_donation(module))
    save_arrays(folder / "inputs.npz", [x, y], ["f32", "f32"])
    save_arrays(folder / "expected.npz", [(x * 2 + y).astype(np.float64), (y - 1).astype(np.float64)],
                ["f64", "f64"])
    outputs = [{"dtype": "f32", "float": True, "threshold": 1e-6}] * 2
    (folder / "repro.py").write_text(repro_template.render("by-hand", failure, {}, [], ["f32", "f32"], outputs,
                                                           donated=[0], runtime_fault=fault))
    return folder


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in __import__("os").environ.items() if k != FAULT_ENV}
    return subprocess.run([sys.executable, "repro.py", *args], cwd=folder, capture_output=True, text=True,
                          timeout=300, env=env)


def test_a_donation_mismatch_repro_checks_that_a_donated_input_is_consumed(tmp_path: Path) -> None:
    """donation_ignored (the run consumes a copy of the donated input): repro.py finds the
    donated input alive (exit 1); without the fault XLA consumes it and the outputs equal
    the undonated module's (exit 0). The campaign's bisector does not reproduce this
    verdict on its cuts yet (not_reproduced), so it is built by hand here."""
    folder = _bundle(tmp_path / "donation", "donation_mismatch", "donation_ignored")
    shows = _run(folder)
    assert shows.returncode == 1 and "input 0 is donated and was not consumed" in shows.stdout, \
        shows.stdout + shows.stderr
    clean = _run(folder, "--without-plugins")
    assert clean.returncode == 0 and "OK: every buffer" in clean.stdout, clean.stdout + clean.stderr
    # An input_clobbered bundle of the same module: the non-donated input is checked bit for bit.
    alias = _bundle(tmp_path / "alias", "input_clobbered", "input_alias")
    hit = _run(alias)
    assert hit.returncode == 1 and "input 1 is not donated and the run changed it" in hit.stdout, \
        hit.stdout + hit.stderr
    assert _run(alias, "--without-plugins").returncode == 0
