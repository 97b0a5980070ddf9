"""Bisecting an `invariant_violated` finding (docs/bisect.md, "Invariant findings"): every
stage's "still fails" asks whether the case still breaks the invariant, not whether its
numbers differ, and the bundle's repro.py judges the same invariant. End to end on a
replayed jax softmax under the injected fault softmax_max_dropped (xla/faults/), as
tests/detection/test_invariants_replay.py replays it; nothing is mocked there. The unit
test builds the case by hand: numbers that differ from float64 far beyond the oracle's
threshold, in rows that still sum to one, do not reproduce an invariant finding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
from xla_sentinel.bisect.lab import Case, judge_invariant
from xla_sentinel.bisect.pipeline import open_context
from xla_sentinel.bisect.versions import _bundle_constants, load_subject, wrong_outputs
from xla_sentinel.core.program import load_arrays
from xla_sentinel.judge import oracle
from xla_sentinel.judge.invariants import Invariant
from xla_sentinel.xla.faults import fault_path

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / ".venv/bin/xla-sentinel")
EXIT_BUGS = 1


def _logits() -> np.ndarray:
    """Logits up to about 100: exp of the unshifted ones overflows f32 (88.7)."""
    return (np.random.default_rng(3).normal(size=(6, 32)) * 40).astype(np.float32)


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_numbers_that_differ_where_the_invariant_holds_do_not_reproduce_it() -> None:
    x = _logits().astype(np.float64) / 20
    ref = _softmax_rows(x)
    legal = ref.astype(np.float32)
    # Each row's probabilities reversed: far from float64 element by element, yet every row
    # still sums to one and lies in [0, 1].
    reordered = legal[:, ::-1].copy()
    case = Case(module="(not compiled)", inputs=[x.astype(np.float32)], expected=[ref],
                infos=[oracle.OutputInfo("f32", True)], discrete=False, outputs=["%r"])
    numbers = oracle.judge("target", {"target": [reordered], "legal": [legal]}, [ref], case.infos,
                           lambda: None, False, exact="legal")
    assert numbers.verdict == "mismatch"  # what the number comparison would have counted
    for inv in (Invariant("sum", 0, axis=-1, source="test"), Invariant("range", 0, low=0.0, high=1.0)):
        fails, evidence = judge_invariant(inv, case, [reordered], [legal])
        assert not fails and evidence["judged_by"] == "invariant" and evidence["holds"]
    # The same rows with one element doubled break the sum: that reproduces it.
    broken = reordered.copy()
    broken[2, 5] *= 2
    fails, evidence = judge_invariant(Invariant("sum", 0, axis=-1, source="test"), case, [broken], [legal])
    assert fails and evidence["invariant"] == "sum" and evidence["violations"][0]["row"] == [2]


def test_a_softmax_invariant_finding_is_bisected_by_its_invariant(tmp_path: Path) -> None:
    trace = tmp_path / "softmax"
    trace.mkdir()
    x = _logits()
    (trace / "module.mlir").write_text(jax.jit(lambda v: jax.nn.softmax(v, axis=-1)).lower(x).as_text())
    np.savez(trace / "inputs.npz", arg0=x)
    out = tmp_path / "out"
    proc = subprocess.run([CLI, "replay", str(trace), "--out", str(out), "--quiet",
                           "--inject-pass", fault_path("softmax_max_dropped")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == EXIT_BUGS, proc.stderr[-3000:]
    findings = {p.parent: json.loads(p.read_text()) for p in sorted(out.glob("findings/*/finding.json"))}
    folder, first = next((d, f) for d, f in findings.items() if f["evidence"].get("bisect"))
    ev = first["evidence"]
    assert first["verdict"] == "invariant_violated" and ev["reason"] == "invariant"
    bisect = ev["bisect"]
    assert bisect["status"] == "localized", bisect
    stages = bisect["stages"]
    # The reproduction judged the invariant, and names it.
    rep = stages["reproduce"]
    assert rep["fails"] and rep["judged_by"] == "invariant" and rep["invariant"] == ev["invariant"]
    assert rep["declared_by"].startswith("stablehlo softmax") and rep["violations"]
    # The suffix search kept the softmax's output in every probe: judged by the invariant.
    assert stages["graph"]["invariant_checks"]["invariant"] == len(stages["graph"]["probes"])
    assert stages["graph"]["invariant_checks"]["numbers"] == 0
    # The reduced case keeps the op that computes the invariant's output.
    assert stages["reduce"]["kept_for_invariant"]
    assert stages["passes"]["invariant_checks"]["invariant"] >= 1
    # The culprit is still the shift the fault zeroes.
    assert first["culprit_op"] == "broadcast_in_dim (f32->f32)", first["culprit_op"]
    # The bundle's repro.py judges the invariant: 1 with the fault, 0 without.
    assert stages["bundle"]["repro"] == {"judged_by": "invariant", "invariant": ev["invariant"]}
    bundle = folder / bisect["repro"]
    script = (bundle / "repro.py").read_text()
    assert "INVARIANT = {" in script and (bundle / "legal.npz").is_file()
    shows = subprocess.run([sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True, timeout=300)
    assert shows.returncode == 1, shows.stdout + shows.stderr
    assert f"invariant {ev['invariant']}" in shows.stdout and "broken" in shows.stdout
    fixed = subprocess.run([sys.executable, "repro.py", "--without-plugins"], cwd=bundle, capture_output=True,
                           text=True, timeout=300)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "holds" in fixed.stdout
    # Over jaxlib releases (bisect/versions.py) the bundle and the finding are judged by the
    # invariant too: the fault's outputs (actual.npz) break it, the legal result keeps it.
    subject = load_subject(bundle)
    assert [c.kind for c in subject.checks] == ["invariant"] and subject.legal is not None
    dtypes = [o["dtype"] for o in _bundle_constants(bundle / "repro.py")["OUTPUTS"]]
    actual = load_arrays(bundle / "actual.npz", dtypes)
    assert wrong_outputs(actual, subject.expected, subject.checks, subject.legal, subject.inputs)
    assert wrong_outputs(subject.legal, subject.expected, subject.checks, subject.legal, subject.inputs) == []
    finding = load_subject(folder)
    assert [(c.kind, c.invariant["kind"]) for c in finding.checks] == [("invariant", ev["invariant"])]
    # A cut that no longer returns the softmax (the culprit alone) falls back to the
    # numbers, and says so; the whole module is judged by the invariant.
    ctx = open_context(folder)
    try:
        ctx.lab.stage = "probe"
        alone = ctx.check(ctx.case([ctx.info["ops"].index(next(
            op for op in ctx.info["ops"] if op["name"] == "stablehlo.broadcast_in_dim"
            and op["results"][0]["shape"] == [6, 32]))]))
        assert alone.evidence["judged_by"] == "numbers"
        assert alone.evidence["invariant_lost"].startswith("the case does not return output 0")
        whole = ctx.check(ctx.case(list(range(len(ctx.ops))), ctx.info["returns"]))
        assert whole.fails and whole.evidence["judged_by"] == "invariant"
        assert ctx.judged_by["probe"] == {"invariant": 1, "numbers": 1,
                                          "invariant_lost": alone.evidence["invariant_lost"]}
    finally:
        ctx.lab.close()
