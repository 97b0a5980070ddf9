"""Trace replay: every accepted form loads into the same Program; bad files are skipped
with a message naming them; a fault in a replayed module is found without a graph."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import export
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.cli.main import main as cli
from xla_sentinel.core.program import Program, ProgramError
from xla_sentinel.programs import traces, units
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.xla import compiler
from xla_sentinel.xla.faults import fault_path


def f(x, y):
    return jnp.tanh(x @ y) + jnp.exp(x)


X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("traces")
    lowered = jax.jit(f).lower(X, X)
    (d / "a.hlo").write_text(lowered.as_text(dialect="hlo"))
    (d / "b.mlir").write_text(lowered.as_text())
    (d / "c.jaxexport").write_bytes(export.export(jax.jit(f))(X, X).serialize())
    from jaxlib.mlir.dialects import stablehlo
    (d / "d.mlirbc").write_bytes(stablehlo.serialize_portable_artifact_str(lowered.as_text(), "1.0.0"))
    return d


def test_every_form_loads_to_a_module_that_computes_f(trace_dir: Path) -> None:
    want = np.asarray(jax.jit(f)(X, X))
    for unit in units.trace_units([trace_dir]):
        program = traces.load(unit)
        assert program.input_dtypes == ["f32", "f32"], unit
        out = compiler.run_module(program.module, [X, X], {}).outputs[0]
        np.testing.assert_allclose(out, want, rtol=1e-6, err_msg=str(unit))


def test_trace_folder_with_bf16_inputs(tmp_path: Path) -> None:
    g = jax.jit(lambda x: x * 2)
    x = np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16)
    Program("t", g.lower(x).as_text(), [x], ["bf16"]).save(tmp_path / "t")
    p = traces.load(tmp_path / "t")
    np.testing.assert_array_equal(p.inputs[0].view(np.uint16), x.view(np.uint16))


def test_xla_dump_folder_replays_its_unoptimized_modules(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    dump.mkdir()
    hlo = jax.jit(f).lower(X, X).as_text(dialect="hlo")
    (dump / "module_0001.jit_f.before_optimizations.txt").write_text(hlo)
    (dump / "module_0001.jit_f.sm_8.0_gpu_after_optimizations.txt").write_text("ignored")
    assert [u.name for u in units.trace_units([dump])] == ["module_0001.jit_f.before_optimizations.txt"]


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("bad.mlir", "garbage", "bad.mlir: module has no @main"),
    ("bad.hlo", "HloModule broken\nENTRY {", "bad.hlo: not a readable module"),
    ("bad.jaxexport", "nope", "bad.jaxexport: not a readable module"),
])
def test_unreadable_modules_name_the_file(tmp_path: Path, name: str, content: str, needle: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(ProgramError, match=needle):
        traces.load(tmp_path / name)


def test_replay_finds_a_fault_and_skips_bad_files(trace_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("garbage")
    spec = parse_spec({"traces": [str(trace_dir / "b.mlir"), str(bad)], "targets": ["default"],
                       "budget": {"programs": 2}, "workers": 1, "bisect": {"enabled": False}})
    summary = run_campaign(spec, tmp_path / "out", inject_passes=[fault_path("fusion_bf16_rounding")])
    assert summary["program_status"] == {"judged": 1, "trace_error": 1}
    assert "bad.mlir" in summary["trace_errors"][0]["error"]
    assert summary["findings"] == {"mismatch": 1}
    record = json.loads(next((tmp_path / "out").glob("findings/*/finding.json")).read_text())
    assert record["program"] == "trace-b"


def test_replay_cli_exit_codes(trace_dir: Path, tmp_path: Path) -> None:
    assert cli(["replay", str(trace_dir / "b.mlir"), "--out", str(tmp_path / "clean"), "--quiet"]) == 0
    assert cli(["replay", str(tmp_path / "missing.mlir"), "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_the_interpreter_reference_catches_a_bug_every_target_shares(trace_dir: Path, tmp_path: Path) -> None:
    """With no graph and no O0 stand-in, only the StableHLO interpreter is an unaffected
    own-precision configuration; it must be enough."""
    spec = parse_spec({"traces": [str(trace_dir / "b.mlir")], "targets": ["default", "O0"],
                       "references": ["f64_jit", "interpreter"], "budget": {"programs": 1},
                       "workers": 1, "bisect": {"enabled": False}})
    clean = run_campaign(spec, tmp_path / "clean")
    assert clean["findings"] == {} and clean["executions"] == 4
    faulty = run_campaign(spec, tmp_path / "faulty", inject_passes=[fault_path("fusion_bf16_rounding")])
    assert faulty["findings"] == {"mismatch": 2}


def test_replay_counts_only_what_replayed(trace_dir: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 17: a folder whose module could not be read was reported as one module replayed."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "module.mlir").write_text("func.func @main(")
    campaign = tmp_path / "c.yaml"
    campaign.write_text("targets: [default]\nreferences: [f64_jit]\nbisect: {enabled: false}\n")
    assert cli(["replay", str(broken), "--out", str(tmp_path / "none"), "--campaign", str(campaign),
                "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"skipped {broken / 'module.mlir'}: module has no @main" in err
    assert "error: none of the 1 modules could be replayed" in err
    assert cli(["replay", str(broken), str(trace_dir / "b.mlir"), "--out", str(tmp_path / "some"),
                "--campaign", str(campaign), "--quiet"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]  # structlog's warnings come before it
    assert last.startswith("1 modules replayed, 1 not (see above);"), last


def test_a_replayed_module_is_evaluated_op_by_op_not_compiled_whole(tmp_path: Path) -> None:
    """bench/repros/dynamic_slice_of_dynamic_slice.py inside a trace: every compiled
    configuration merges the two slices and clamps once (jaxlib 0.10.2). Compiled whole,
    even at O0, the own-precision reference shared the bug and the trace replayed as
    clean; op by op (worker/bisect_handlers.op_by_op) it gives numpy's x[4:34][16:20], so no target
    passes by matching it. The XLA float64 cross-check (the module compiled whole) shares
    the bug too; a replayed module has no noise model to tell that from ill-conditioning,
    but the op-by-op evaluation at the program's precision is a third opinion
    (docs/detection.md, "A reference that shares the bug"): the float64 reference is far
    beyond its spread, a finding of its own (f64_text), and every target is judged and
    flagged as the known bug."""
    from jax import lax
    from xla_sentinel.worker.bisect_handlers import op_by_op

    def g(x, i):
        return lax.dynamic_slice(lax.dynamic_slice(x, (i,), (30,)), (i,), (4,)) * 2.0

    x, i = np.arange(34, dtype=np.float32), np.array(16, dtype=np.int32)
    module = jax.jit(g).lower(x, i).as_text()
    want = x[4:34][16:20] * 2
    assert not np.array_equal(compiler.run_module(module, [x, i], {}).outputs[0], want)
    np.testing.assert_array_equal(op_by_op(module, [x, i])[0], want)
    Program("ds_of_ds", module, [x, i], ["f32", "s32"]).save(tmp_path / "t")
    spec = parse_spec({"traces": [str(tmp_path / "t")], "budget": {"programs": 1}, "workers": 1})
    summary = run_campaign(spec, tmp_path / "out", name="replay")
    assert summary["program_status"] == {"judged": 1}
    assert summary["findings"] == {"mismatch": 4}  # default, O0, no_fusion_emitters, f64_text
    assert summary["findings_known"] == 4


def test_a_record_output_folder_replays_each_of_its_trace_folders(tmp_path: Path) -> None:
    # `record --out DIR` writes DIR/<computation>/ per compiled module: DIR is the source.
    g = jax.jit(lambda x: x * 2)
    for name in ("jit_b-2", "jit_a-1"):
        Program(name, g.lower(X).as_text(), [X], ["f32"]).save(tmp_path / "rec" / name)
    (tmp_path / "rec" / "notes").mkdir()
    assert [u.name for u in units.trace_units([tmp_path / "rec"])] == ["jit_a-1", "jit_b-2"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProgramError, match="empty: no trace, dump or module files"):
        units.trace_units([tmp_path / "empty"])
