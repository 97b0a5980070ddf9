"""Invariants end to end (docs/detection.md, "Invariants"): a replayed StableHLO softmax
gets its invariants from its own dataflow, and the injected fault softmax_max_dropped
(xla/faults/) that drops its max shift is an `invariant_violated` finding, one signature
over the configurations that show it, bisected to a culprit op. A trace may declare an
invariant in meta.json, and one that every configuration misses alike (so the oracle,
which compares configurations, passes it) is still a finding. Nothing is mocked: jax
lowers the modules, `xla-sentinel replay` runs them through the real XLA:CPU targets,
references and bisector."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from xla_sentinel.xla.faults import fault_path

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / ".venv/bin/xla-sentinel")
EXIT_BUGS = 1


def _trace(folder: Path, fn: Any, *args: np.ndarray, meta: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "module.mlir").write_text(jax.jit(fn).lower(*args).as_text())
    np.savez(folder / "inputs.npz", **{f"arg{k}": a for k, a in enumerate(args)})
    if meta is not None:
        (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def _replay(trace: Path, out: Path, *extra: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    proc = subprocess.run([CLI, "replay", str(trace), "--out", str(out), "--quiet", *extra],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, EXIT_BUGS), proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    findings = [json.loads(p.read_text()) for p in sorted(out.glob("findings/*/finding.json"))]
    return proc.returncode, summary, findings


def _logits() -> np.ndarray:
    """Logits up to about 100: a stable softmax is exact to rounding on them, exp of the
    unshifted ones overflows f32 (88.7)."""
    return (np.random.default_rng(3).normal(size=(6, 32)) * 40).astype(np.float32)


def _softmax(x: jax.Array) -> jax.Array:
    return jax.nn.softmax(x, axis=-1)


def test_replayed_softmax_with_its_max_shift_dropped_is_an_invariant_finding(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "softmax", _softmax, _logits())

    code, summary, findings = _replay(trace, tmp_path / "clean")
    assert code == 0 and findings == [] and summary["findings"] == {}

    code, summary, findings = _replay(trace, tmp_path / "fault", "--inject-pass",
                                      fault_path("softmax_max_dropped"))
    assert code == EXIT_BUGS
    assert {f["target"] for f in findings} >= {"default", "O0", "no_fusion_emitters"}
    assert all(f["verdict"] == "invariant_violated" for f in findings), [f["verdict"] for f in findings]
    first = next(f for f in findings if "grouped_with" not in f["evidence"])
    ev = first["evidence"]
    # Recognized from the module's dataflow, and named with the row, value and bound.
    assert ev["reason"] == "invariant" and ev["declared_by"].startswith("stablehlo softmax")
    assert ev["invariant"] in ("sum", "finite", "range") and ev["count"] >= 1 and ev["dtype"] == "f32"
    missed = {ev["invariant"], *(m["invariant"] for m in ev["also_missed"])}
    assert "finite" in missed, missed  # NaN out of finite logits
    worst = ev["violations"][0]
    assert {"value", "want", "bound"} <= set(worst) and ("row" in worst or "index" in worst)
    # One bug, one signature, told apart from a miscompile by its verdict; bisected to an op.
    assert len(summary["signatures"]) == 1
    sig = summary["signatures"][0]
    assert sig["verdict"] == "invariant_violated" and sig["count"] == len(findings)
    assert ev["bisect"]["status"] == "localized", ev["bisect"]
    assert first["culprit_op"], first
    assert summary["findings"] == {"invariant_violated": len(findings)}
    # The triage page's verdict column names it.
    subprocess.run([CLI, "report", str(tmp_path / "fault"), "--html"], check=True, capture_output=True,
                   timeout=300)
    assert 'class="verdict"' in (page := (tmp_path / "fault" / "report.html").read_text())
    assert ">invariant_violated</td>" in page


def _layer_norm(x: jax.Array) -> jax.Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)


def test_replayed_layer_norm_with_its_variance_in_one_pass_is_an_invariant_finding(tmp_path: Path) -> None:
    """The issue's third fault class: a reordered reduction (variance_one_pass turns
    sum((x - mean)^2) into sum(x^2) - n mean^2) breaks the layer norm's declared-by-pattern
    invariant. Rows centred on 3000 with a spread of 1 in f32: without the fault every
    configuration misses `normalized` by the rounding of the mean (4e-4, ten times the
    bound the outputs alone give), which the literal evaluation misses by too, so the clean
    replay has no finding (it had four, one per configuration, before the literal evaluation
    widened the bounds)."""
    x = (np.random.default_rng(3).normal(size=(6, 32)) + 3000).astype(np.float32)
    trace = _trace(tmp_path / "layer_norm", _layer_norm, x)

    code, summary, findings = _replay(trace, tmp_path / "clean")
    assert code == 0 and findings == [] and summary["findings"] == {}

    code, summary, findings = _replay(trace, tmp_path / "fault", "--inject-pass",
                                      fault_path("variance_one_pass"))
    assert code == EXIT_BUGS
    assert {f["target"] for f in findings} == {"default", "O0", "no_fusion_emitters"}
    assert all(f["verdict"] == "invariant_violated" for f in findings), [f["verdict"] for f in findings]
    first = next(f for f in findings if "grouped_with" not in f["evidence"])
    ev = first["evidence"]
    assert ev["declared_by"].startswith("stablehlo layer_norm") and ev["invariant"] == "normalized"
    assert len(summary["signatures"]) == 1 and summary["signatures"][0]["verdict"] == "invariant_violated"
    assert ev["bisect"]["status"] == "localized", ev["bisect"]


def test_an_invariant_declared_in_meta_json_judges_a_module_no_pattern_matches(tmp_path: Path) -> None:
    """A softmax written so that no pattern matches it (its sum plus 0 in the denominator)
    declares its invariants in meta.json; the same fault breaks them. An invariant that
    float64 itself misses is the program's meaning, not damage: the float64 reference's own
    miss is part of the bound (test_invariants.py)."""
    def softmax_plus_zero(x: jax.Array) -> jax.Array:
        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
        return e / (jnp.sum(e, axis=-1, keepdims=True) + 0.0)

    declared = [{"kind": "finite", "output": 0}, {"kind": "sum", "output": 0, "axis": 1}]
    trace = _trace(tmp_path / "declared", softmax_plus_zero, _logits(), meta={"invariants": declared})

    code, summary, findings = _replay(trace, tmp_path / "out", "--inject-pass",
                                      fault_path("softmax_max_dropped"))

    assert code == EXIT_BUGS
    assert findings and all(f["verdict"] == "invariant_violated" for f in findings)
    ev = next(f for f in findings if f["target"] == "default")["evidence"]
    assert ev["declared_by"] == "meta.json" and ev["invariant"] == "finite"
    assert ev["violations"][0]["value"] == "nan" and ev["violations"][0]["bound"] == 0.0
