"""Recording real jax compiles into trace folders, and replaying them without values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from xla_sentinel.core.program import ProgramError, load_arrays
from xla_sentinel.programs import traces
from xla_sentinel.programs.record import recorded, recording

ROOT = Path(__file__).resolve().parents[2]
CLI = [str(ROOT / ".venv/bin/xla-sentinel")]


def _gather_scale(x: jax.Array, idx: jax.Array) -> jax.Array:
    return jnp.tanh(x)[idx] * 2.0


def _only(folder: Path, name: str) -> Path:
    found = [p for p in folder.iterdir() if p.name.startswith(name)]
    assert len(found) == 1, found
    return found[0]


def test_context_manager_records_module_stats_and_values(tmp_path: Path) -> None:
    x = jnp.asarray(np.array([[0.0, 1.0, np.nan, 4.0], [np.inf, 1e-40, -2.0, 0.0]], np.float32))
    idx = jnp.array([1, 0, 1], jnp.int32)
    with recording(tmp_path, with_values=True) as rec:
        out = jax.jit(_gather_scale)(x, idx)
    trace = _only(tmp_path, "jit__gather_scale")
    assert rec.errors == []
    assert "stablehlo.gather" in (trace / "module.mlir").read_text()
    stats = json.loads((trace / "stats.json").read_text())
    assert stats["arg0"]["shape"] == [2, 4] and stats["arg0"]["dtype"] == "f32"
    assert stats["arg0"]["nan"] == stats["arg0"]["inf"] == pytest.approx(1 / 8)
    assert stats["arg0"]["subnormal"] == pytest.approx(1 / 8)  # 1e-40 is subnormal in f32
    assert stats["arg0"]["zero"] == pytest.approx(2 / 8)
    assert (stats["arg0"]["min"], stats["arg0"]["max"]) == (-2.0, 4.0)
    assert (stats["arg1"]["min"], stats["arg1"]["max"]) == (0, 1)
    stored = load_arrays(trace / "inputs.npz", ["f32", "s32"])
    np.testing.assert_array_equal(stored[0], np.asarray(x))
    outs = load_arrays(trace / "outputs.npz", ["f32"])
    np.testing.assert_array_equal(outs[0], np.asarray(out))
    meta = json.loads((trace / "meta.json").read_text())["provenance"]
    assert meta["jaxlib"] == jax.__version__ and meta["backend"] == "cpu" and meta["device_count"] >= 1
    assert "SingleDeviceSharding" in meta["shardings"][0]


def test_repeated_compiles_stored_once_and_no_values_by_default(tmp_path: Path) -> None:
    @recorded(tmp_path)
    def step() -> None:
        for _ in range(2):  # two jit objects of one function: two compiles, one module
            jax.jit(lambda a: jnp.sin(a) * 3.0)(jnp.ones(5))

    step()
    trace = _only(tmp_path, "jit__lambda")
    assert json.loads((trace / "meta.json").read_text())["provenance"]["compiles"] == 2
    assert (trace / "stats.json").exists()
    assert not (trace / "inputs.npz").exists() and not (trace / "outputs.npz").exists()


def test_donated_argument_recorded_before_its_buffer_is_gone(tmp_path: Path) -> None:
    with recording(tmp_path, with_values=True) as rec:
        jax.jit(lambda a: a * 3, donate_argnums=0)(jnp.full(5, 2.0, jnp.bfloat16))
    trace = _only(tmp_path, "jit__lambda")
    assert rec.errors == []
    assert json.loads((trace / "meta.json").read_text())["provenance"]["donated"] == [0]
    assert json.loads((trace / "stats.json").read_text())["arg0"]["mean"] == 2.0


def test_replay_without_values_stays_in_recorded_ranges(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(64, 32)) * 5 + 3).astype(np.float32)
    idx = rng.integers(3, 9, size=(40,)).astype(np.int32)
    with recording(tmp_path):
        jax.jit(_gather_scale)(x[:10], idx)
    trace = _only(tmp_path, "jit__gather_scale")
    program = traces.load(trace, seed=4)
    synth_x, synth_idx = program.inputs
    assert synth_x.dtype == np.float32 and synth_idx.dtype == np.int32
    assert synth_idx.min() == 3 and synth_idx.max() == 8  # an index stays a valid index
    assert synth_x.min() == x[:10].min() and synth_x.max() == x[:10].max()
    assert abs(synth_x.mean() - x[:10].mean()) < 0.5 * x[:10].std()


def test_statistics_contradicting_the_module_name_the_file(tmp_path: Path) -> None:
    with recording(tmp_path):
        jax.jit(_gather_scale)(jnp.ones((2, 3)), jnp.zeros(2, jnp.int32))
    trace = _only(tmp_path, "jit__gather_scale")
    stats = json.loads((trace / "stats.json").read_text())
    stats["arg0"]["shape"] = [3, 3]
    (trace / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(ProgramError, match=r"stats.json: arg0 was recorded with shape \[3, 3\]"):
        traces.load(trace)


def test_record_command_records_a_script_and_reports_its_failure(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import os, sys\nos.environ['XLA_FLAGS'] = '--xla_cpu_enable_fast_math=false'\n"
                      "import jax, jax.numpy as jnp\n"
                      "jax.jit(lambda x: jnp.exp(x).sum())(jnp.ones(3))\n"
                      "sys.exit(int(sys.argv[1]))\n")
    out = tmp_path / "traces"
    ok = subprocess.run([*CLI, "record", "--out", str(out), "--", sys.executable, str(script), "0"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    trace = _only(out, "jit__lambda")
    meta = json.loads((trace / "meta.json").read_text())["provenance"]
    assert meta["xla_flags"] == "--xla_cpu_enable_fast_math=false"  # set by the script before import
    bad = subprocess.run([*CLI, "record", "--out", str(out), "--", sys.executable, str(script), "3"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert f"{script} 3 exited with status 3" in bad.stderr
