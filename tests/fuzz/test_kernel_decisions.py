"""Kernel-decision coverage (issue 28) on real XLA:CPU compiles: the decisions of
coverage.KERNEL_DECISIONS read from the optimized HLO a target returns, the summary.json key
and the guide's steering towards a decision rarely reached."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from xla_sentinel.campaign import coverage
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.campaign.guide import WARMUP, Guide
from xla_sentinel.programs import evaluate, generator
from xla_sentinel.programs.inputs import make_inputs
from xla_sentinel.report import tables
from xla_sentinel.report.tables import html_report
from xla_sentinel.spec.campaign import GeneratorSpec, parse_spec
from xla_sentinel.xla import compiler


def _decisions(f, *args: np.ndarray, donate: tuple[int, ...] = ()) -> list[str]:
    """The decisions of `f`'s module as a target compiles it (the run path of the worker,
    optimized HLO printed as it returns it for coverage)."""
    module = jax.jit(f, donate_argnums=donate).lower(*args).as_text()
    ex = compiler.run_module(module, list(args), {}, want_hlo=True)
    return coverage.kernel_decisions(ex.optimized_hlo)


def test_a_max_reduction_of_8192_elements_goes_to_ynnpack() -> None:
    x = np.linspace(-1, 1, 8192, dtype=np.float32)
    assert "fusion:ynn" in _decisions(lambda x: jnp.max(jnp.exp(x)), x)
    # Below YNNPACK's threshold the reduction stays XLA's own, rewritten into a tree.
    small = _decisions(lambda x: jnp.sum(x * 2), x[:2048])
    assert "fusion:ynn" not in small and "emitter:tree_reduction" in small


def test_a_dot_is_a_ynn_fusion_and_a_tall_elementwise_is_split_in_parallel() -> None:
    a = np.ones((64, 64), np.float32)
    assert "fusion:ynn" in _decisions(lambda a, b: jnp.tanh(a @ b), a, a)
    tall = _decisions(lambda x: jnp.tanh(x) * x + 1, np.ones((16385, 4), np.float32))
    assert "emitter:parallel" in tall and "fusion:kLoop" in tall


def test_dynamic_update_slice_in_place_protected_by_a_copy_and_aliased() -> None:
    x, u = np.ones((16, 8), np.float32), np.ones((1, 8), np.float32)

    def update(x: jax.Array, u: jax.Array) -> jax.Array:
        return jax.lax.dynamic_update_slice(jnp.sin(x), u, (3, 0))

    in_place = _decisions(update, x, u)
    assert {"buffer:in_place_update", "emitter:dynamic_update_slice"} <= set(in_place)
    assert "buffer:copy_protect" not in in_place and "buffer:io_alias" not in in_place
    # The old value is read after the update: copy insertion protects it.
    protected = _decisions(lambda x, u: (x.at[3].set(u[0]), x + 1), x, u)
    assert "buffer:copy_protect" in protected
    # A donated input is aliased to the output and updated in place.
    donated = _decisions(lambda x, u: x.at[3].set(u[0]), x.copy(), u, donate=(0,))
    assert {"buffer:io_alias", "buffer:in_place_update"} <= set(donated)


def test_sort_and_while_are_thunks() -> None:
    x = np.arange(128, dtype=np.float32)[::-1].reshape(16, 8).copy()
    assert "thunk:sort" in _decisions(lambda x: jnp.sort(x, axis=0), x)
    loop = _decisions(lambda x: jax.lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * 1.5, c[1] + 1),
                                                   (x, 0))[0], x)
    assert "thunk:while" in loop


def test_version_2_large_programs_reach_the_large_kernel_paths(x64: None) -> None:
    spec = GeneratorSpec()
    found: set[str] = set()
    large = [i for i in range(200) if generator.large_drawn(11, i, spec)][:6]
    for i in large:
        graph = generator.generate(11, i, spec)
        inputs = make_inputs({"seed": 11, "index": i, "special": False}, graph.inputs)
        ex = compiler.run_module(evaluate.lower_text(graph), inputs, {}, want_hlo=True)
        found |= set(coverage.kernel_decisions(ex.optimized_hlo))
    assert found & {"fusion:ynn", "emitter:parallel"}, found


def test_every_decision_is_in_the_table() -> None:
    assert all(d.split(":")[0] in ("fusion", "emitter", "thunk", "buffer") for d in coverage.KERNEL_DECISIONS)
    summary = coverage.decisions_summary(coverage.total([
        {"coverage": {"fusion_kinds": {"ynn": 1}, "kernel_decisions": ["fusion:ynn", "thunk:sort"]}},
        {"coverage": {"fusion_kinds": {}, "kernel_decisions": ["fusion:ynn"]}},
    ]))
    assert summary["reached"] == {"fusion:ynn": 2, "thunk:sort": 1}
    assert summary["programs_with_hlo"] == 2
    assert set(summary["not_reached"]) == set(coverage.KERNEL_DECISIONS) - {"fusion:ynn", "thunk:sort"}


def test_summary_json_names_the_decisions_the_campaign_reached(tmp_path: Path) -> None:
    spec = parse_spec({"seed": 2, "workers": 1, "targets": ["default"], "references": ["f64_numpy", "eager"],
                       "generator": {"version": 1, "minOps": 2, "maxOps": 4, "dtypes": ["f32"],
                                     "ops": ["exp", "add", "reduce_max", "sort"]},
                       "budget": {"programs": 3}, "bisect": {"enabled": False}})
    summary = run_campaign(spec, tmp_path / "out", progress=False)
    decisions = summary["kernel_decisions"]
    assert decisions["programs_with_hlo"] == 3
    assert decisions["reached"] and set(decisions["reached"]) <= set(coverage.KERNEL_DECISIONS)
    assert set(decisions["reached"]) | set(decisions["not_reached"]) == set(coverage.KERNEL_DECISIONS)
    assert decisions["reached"] == {d: n for d, n in summary["coverage"]["kernel_decisions"].items()
                                    if d in coverage.KERNEL_DECISIONS}
    # The triage page shows every decision of the table, with the same counts.
    page = (tmp_path / "out" / "report.html")
    html_report(tmp_path / "out", page)
    text = page.read_text()
    assert '<h2 id="kernel-decisions">' in text
    for d in coverage.KERNEL_DECISIONS:
        n = decisions["reached"].get(d)
        assert f'<tr data-decision="{d}">' in text
        assert (f'<td class="n">{n}</td></tr>' if n else '<td class="n empty">never</td></tr>') in \
            text.split(f'<tr data-decision="{d}">')[1].split("</tr>")[0] + "</tr>"
    # So does `xla-sentinel report`, as text: the reached ones with their counts, then the rest.
    report = tables.report(tmp_path / "out")
    never = report.split("### Kernel decisions never reached")[1].split("###")[0]
    for d in coverage.KERNEL_DECISIONS:
        n = decisions["reached"].get(d)
        assert (f"| {d} | {n} |" in report) == bool(n), d
        assert (d in never) != bool(n), d


def _guide(decisions: bool) -> Guide:
    """A guide that saw `exp` only in programs reaching a oneDNN fusion (rare: once) and
    `add` in programs of the common kLoop decision."""
    guide = Guide(3, decisions=decisions)
    for i in range(WARMUP + 20):
        guide.observe(i, {"ops": {"add": 1}, "fusion_kinds": {"kLoop": 1},
                          "kernel_decisions": ["fusion:kLoop"]}, None, None)
    guide.observe(99, {"ops": {"exp": 1}, "fusion_kinds": {"kLoop": 1},
                       "kernel_decisions": ["fusion:kLoop", "fusion:onednn"]}, None, None)
    return guide


def test_guidance_weights_shift_toward_a_rare_decision() -> None:
    steered, plain = _guide(True).bias(1000), _guide(False).bias(1000)
    assert steered["ops"]["exp"] / steered["ops"]["add"] > plain["ops"]["exp"] / plain["ops"]["add"]
    assert steered["ops"]["exp"] > 2 * plain["ops"]["exp"]
    # Neither YNNPACK fusions nor parallel partitions were reached: large programs are
    # drawn up to LARGE_BOOST_CAP times as often; version 1's guide draws none.
    assert steered["large"] > 1 and "large" not in plain


@pytest.mark.parametrize("boost", [1.0, 4.0])
def test_the_large_boost_draws_more_large_programs(boost: float) -> None:
    spec = GeneratorSpec()
    n = sum(generator.large_drawn(5, i, spec, boost) for i in range(400))
    assert abs(n / 400 - generator.LARGE_P * boost) < 0.05
