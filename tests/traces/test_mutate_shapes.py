"""The `batch` and `donation` mutations on the shipped workload traces (recorded here from
examples/workloads/) and on small modules: each mutant verifies, compiles and means what
its kind says, a module that does not allow the kind gives no mutant, and a campaign
judges the mutants with real compiles."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import jax
import numpy as np
import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.core.program import ProgramError
from xla_sentinel.programs import traces
from xla_sentinel.programs.mutate import mutate
from xla_sentinel.programs.record import recording
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.xla import compiler

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"


@pytest.fixture(scope="module")
def workload_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("workloads")
    folders = {}
    for name in ("mlp_adam", "decoder_kv_cache", "cnn_batchnorm"):
        spec = importlib.util.spec_from_file_location(f"workload_{name}", WORKLOADS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with recording(out / name, with_values=True) as rec:
            module.main()
        assert rec.errors == []
        [folders[name]] = rec.traces
    return folders


def _record(tmp_path: Path, fn, *args: np.ndarray, **jit: object) -> Path:  # noqa: ANN001
    with recording(tmp_path, with_values=True) as rec:
        jax.jit(fn, **jit)(*args)
    [folder] = rec.traces
    return folder


def _outputs(module: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return compiler.run_module(module, inputs, {}).outputs


def _batch_sizes(describe: str) -> tuple[int, int]:
    m = re.fullmatch(r"batch (\d+)->(\d+)", describe)
    assert m, describe
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("name", ["mlp_adam", "decoder_kv_cache"])
@pytest.mark.parametrize("seed", [0, 1])
def test_batch_retypes_the_leading_dimension_and_resamples_rows(workload_traces: dict[str, Path],
                                                                name: str, seed: int) -> None:
    base = traces.load(workload_traces[name])
    mutant = traces.load(Path(f"{workload_traces[name]}@batch.0"), seed=seed)  # verified by load
    old, new = _batch_sizes(mutant.provenance["mutation"]["what"])
    resized = 0
    for x, y in zip(base.inputs, mutant.inputs, strict=True):
        if x.ndim and x.shape[0] == old:
            assert y.shape == (new, *x.shape[1:])
            # Every row is one of the recorded rows: labels stay valid labels, positions positions.
            assert all(any(np.array_equal(r, s) for s in x) for r in y)
            resized += 1
        else:
            assert y.tobytes() == x.tobytes()
    assert resized >= 1
    got, want = _outputs(mutant.module, mutant.inputs), _outputs(base.module, base.inputs)
    assert [g.shape for g in got] == [tuple(new if d == old else d for d in w.shape) for w in want]
    assert all(np.isfinite(g).all() for g in got)


def _layer(x: jax.Array, w: jax.Array) -> jax.Array:
    # A dot, a whole-dimension slice of the batch (its limit an attribute), a reduction.
    return jax.numpy.max(jax.numpy.tanh(x @ w) * 0.5 + x[:, :4], axis=1)


def test_batch_mutant_computes_what_the_function_computes_at_the_new_size(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    trace = _record(tmp_path, _layer, rng.normal(size=(8, 6)).astype(np.float32),
                    rng.normal(size=(6, 4)).astype(np.float32))
    base = traces.load(trace)
    for seed in range(3):
        mutant = mutate(base.module, base.inputs, base.input_dtypes, "batch", seed)
        assert mutant is not None
        old, new = _batch_sizes(mutant.describe)
        assert old == 8 and mutant.inputs[0].shape == (new, 6)
        [got] = _outputs(mutant.module, mutant.inputs)
        want = np.asarray(jax.jit(_layer)(*mutant.inputs))  # re-lowered at the new size
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_batch_gives_no_mutant_where_the_module_does_not_allow_it(workload_traces: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    # cnn_batchnorm: its batch size, 8, is also a channel count of the conv weights.
    cnn = traces.load(workload_traces["cnn_batchnorm"])
    assert mutate(cnn.module, cnn.inputs, cnn.input_dtypes, "batch", 0) is None
    with pytest.raises(ProgramError, match="no site for a batch mutation"):
        traces.load(Path(f"{workload_traces['cnn_batchnorm']}@batch.0"))
    # A reshape whose result carries the size (4x3 -> 12): every retyping fails to verify.
    flat = traces.load(_record(tmp_path, lambda x: x.reshape(-1) * 2.0, np.ones((4, 3), np.float32)))
    assert "stablehlo.reshape" in flat.module
    assert all(mutate(flat.module, flat.inputs, flat.input_dtypes, "batch", s) is None for s in range(3))


def _aliased(module: str) -> bool:
    return "input_output_alias" in compiler.compile_module(module, {}).hlo_modules()[0].to_string()


def test_donation_added_where_a_result_matches_and_values_unchanged(workload_traces: dict[str, Path]) -> None:
    base = traces.load(workload_traces["mlp_adam"])
    assert "tf.aliasing_output" not in base.module and not _aliased(base.module)
    mutant = traces.load(Path(f"{workload_traces['mlp_adam']}@donation.0"))
    assert mutant.module.count("tf.aliasing_output") == 19  # params, moments and the step
    assert _aliased(mutant.module)
    inputs = [x.copy() for x in mutant.inputs]
    got, want = _outputs(mutant.module, mutant.inputs), _outputs(base.module, base.inputs)
    assert all(np.array_equal(a, b) for a, b in zip(inputs, mutant.inputs, strict=True))  # not clobbered
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    back = mutate(mutant.module, mutant.inputs, mutant.input_dtypes, "donation", 0)
    assert back is not None and back.module == base.module


def test_donation_removed_from_a_module_jax_donates(tmp_path: Path) -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    base = traces.load(_record(tmp_path, lambda a, b: (a * 2.0, b + 1.0), x, x + 1, donate_argnums=(0,)))
    assert "tf.aliasing_output" in base.module and _aliased(base.module)
    mutant = mutate(base.module, base.inputs, base.input_dtypes, "donation", 0)
    assert mutant is not None and mutant.describe == "donation removed"
    assert "tf.aliasing_output" not in mutant.module and not _aliased(mutant.module)
    got = _outputs(mutant.module, mutant.inputs)
    assert [g.tobytes() for g in got] == [(x * 2).tobytes(), (x + 2).tobytes()]


def test_donation_gives_no_mutant_without_a_matching_result(tmp_path: Path) -> None:
    base = traces.load(_record(tmp_path, lambda a: a.sum(), np.ones((4, 3), np.float32)))
    assert mutate(base.module, base.inputs, base.input_dtypes, "donation", 0) is None


def test_a_campaign_judges_batch_and_donation_mutants(workload_traces: dict[str, Path], tmp_path: Path) -> None:
    units = [str(workload_traces["mlp_adam"]), str(workload_traces["decoder_kv_cache"])]
    spec = parse_spec({"traces": units, "mutations": {"perTrace": 4, "kinds": ["batch", "donation"]},
                       "targets": ["default", "O0"], "references": ["f64_numpy", "eager"],
                       "budget": {"programs": 10}, "workers": 1})
    summary = run_campaign(spec, tmp_path / "out", name="shapes", progress=False)
    assert summary["program_status"] == {"judged": 10}
    assert summary["findings"] == {}


def test_sharding_partitions_an_unsharded_module_along_dividing_dimensions(workload_traces: dict[str, Path]) -> None:
    base = traces.load(workload_traces["mlp_adam"])
    for seed in range(4):
        mutant = mutate(base.module, base.inputs, base.input_dtypes, "sharding", seed)
        assert mutant is not None
        n = compiler.partitions(mutant.module)
        assert n in (2, 4) and all(a is b for a, b in zip(mutant.inputs, base.inputs, strict=True))
        split = re.findall(r"%arg(\d+): tensor<[^>]*> \{mhlo.sharding = \"\{devices=\[([\d,]+)\]<=\[(\d+)\]\}\"\}",
                           mutant.module)
        assert split and all(int(d) == n for _, _, d in split)
        for i, tiles, _ in split:  # one dimension split n ways, and n divides it
            [(dim, ways)] = [(k, int(t)) for k, t in enumerate(tiles.split(",")) if t != "1"]
            assert ways == n and base.inputs[int(i)].shape[dim] % n == 0
        compiler.verify_module(mutant.module)
        # Already partitioned: no second sharding mutant.
        assert mutate(mutant.module, mutant.inputs, mutant.input_dtypes, "sharding", seed) is None


def test_sharding_gives_no_mutant_for_scalars_only(tmp_path: Path) -> None:
    base = traces.load(_record(tmp_path, lambda a, b: a * b + 1.0, np.float32(2), np.float32(3)))
    assert mutate(base.module, base.inputs, base.input_dtypes, "sharding", 0) is None


def test_a_campaign_judges_sharded_mutants_on_virtual_devices(workload_traces: dict[str, Path],
                                                              tmp_path: Path) -> None:
    units = [str(workload_traces["mlp_adam"]), str(workload_traces["decoder_kv_cache"])]
    spec = parse_spec({"traces": units, "mutations": {"perTrace": 2, "kinds": ["sharding"]},
                       "targets": ["default", "O0"], "references": ["f64_numpy", "eager"],
                       "budget": {"programs": 6}, "workers": 1})
    summary = run_campaign(spec, tmp_path / "out", name="sharded", progress=False)
    assert summary["program_status"] == {"judged": 6}
    assert summary["findings"] == {}
