"""Stress inputs for the invariants of templates (programs/inputs.py, docs/detection.md
"Invariants"): only generator version 2 draws them, sparingly, from a stream of their own,
so version 1 programs keep their inputs bit for bit; and a template judged on them by the
real targets and references (`xla-sentinel check`) gives no invariant finding."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.program import Program
from xla_sentinel.programs import spmd
from xla_sentinel.programs.generator import single_op
from xla_sentinel.programs.inputs import STRESS_P, make_array, make_inputs, stress_recipe

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / ".venv/bin/xla-sentinel")


def _version1_inputs(recipe: dict, graph) -> list[np.ndarray]:
    """make_inputs as it was before stress inputs: one stream, every parameter in order."""
    rng = np.random.default_rng([recipe["seed"], recipe["index"], 0x1A9])
    return [make_array(rng, v.shape, v.dtype, bool(recipe.get("special"))) for v in graph.inputs]


def test_version_1_never_stresses_and_draws_what_it_drew() -> None:
    graph = single_op("softmax", "f32")
    for index in range(200):
        assert stress_recipe(graph, 3, index, version=1) == {}
        recipe = {"seed": 3, "index": index, "special": index % 5 == 0}
        for a, b in zip(make_inputs(recipe, graph.inputs), _version1_inputs(recipe, graph), strict=True):
            assert a.tobytes() == b.tobytes()


def test_version_2_stresses_a_share_of_template_operands_only() -> None:
    graph = single_op("softmax", "f32")
    drawn = [stress_recipe(graph, 3, index, version=2) for index in range(400)]
    stressed = [d for d in drawn if d]
    assert all(d == {"stress": [0]} for d in stressed)
    assert 0.5 * STRESS_P * 400 < len(stressed) < 2 * STRESS_P * 400
    # No template that declares invariants: nothing to stress.
    assert all(stress_recipe(single_op("tanh", "f32"), 3, i, version=2) == {} for i in range(100))


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_stress_values_are_near_the_dtype_s_overflow_or_1e10(dtype: str) -> None:
    graph = single_op("layer_norm", dtype)
    recipe = {"seed": 1, "index": 2, "special": False, "stress": [0]}
    plain = _version1_inputs(recipe, graph)
    stressed = make_inputs(recipe, graph.inputs)
    x = stressed[0].astype(np.float64)
    scale = min(1e10, float(ml_dtypes.finfo(NP_DTYPES[dtype]).max) / 8)
    assert np.isfinite(x).all() and np.abs(x).max() > scale / 4
    # The other parameters (gamma, beta) keep their values bit for bit.
    for a, b in zip(stressed[1:], plain[1:], strict=True):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize(("op", "dtype"), [("softmax", "f32"), ("softmax", "f16"), ("layer_norm", "bf16")])
def test_a_template_on_stress_inputs_is_clean(tmp_path: Path, op: str, dtype: str) -> None:
    """The real targets (default, O0, no_fusion_emitters) and references on a template fed
    logits of 1e10 (f32, bf16) or 8,188 (f16): the invariants hold, no finding."""
    graph = single_op(op, dtype, seed=4)
    recipe = {"seed": 4, "index": 0, "special": False, "stress": [0]}
    inputs = make_inputs(recipe, graph.inputs)
    program = Program(f"stress-{op}-{dtype}", spmd.lower_text(graph), inputs, [v.dtype for v in graph.inputs],
                      {"recipe": recipe}, graph)
    program.save(tmp_path / "program")
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text("targets: [default, O0, no_fusion_emitters]\n"
                        "references: [f64_numpy, f64_eager, f64_jit, eager]\n")

    proc = subprocess.run([CLI, "check", str(tmp_path / "program"), "--campaign", str(campaign)],
                          capture_output=True, text=True, timeout=600)

    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "invariant" not in proc.stdout
    meta = json.loads((tmp_path / "program" / "meta.json").read_text())
    assert meta["provenance"]["recipe"]["stress"] == [0]
