"""Known bugs matched on replay by what the bisector found (triage/known_bugs.py `replay`
rules), on the recorded modules of the corpus (tests/bisect/data/corpus/): a replayed
module has no generator graph, so the entry's generator-side `program` rule cannot name
its ops; the culprit op, the verdict and the cure can. No jax here: the modules are read
as text."""

from __future__ import annotations

from typing import Any

import corpus
from xla_sentinel.core.model import Finding
from xla_sentinel.triage import known_bugs


def _finding(**fields: Any) -> Finding:
    base = {"id": "f", "campaign": "c", "program": "trace-x", "target": "default", "verdict": "mismatch",
            "evidence": {"output": 0}, "dir": "findings/f", "time": "t", "signature": ""}
    return Finding.from_json({**base, **fields})


def _module(name: str) -> str:
    return (corpus.CORPUS / name / "module.mlir").read_text()


def test_a_replayed_shift_is_matched_by_its_culprit_and_cure() -> None:
    shift = _module("shift_history")
    bisected = _finding(culprit_op="scatter (s32->s32)", culprit_pass="xla_disable_hlo_passes=fusion")
    assert known_bugs.match(bisected, module=shift) == "xla-shift-set-then-reshape"
    # Before bisection (no culprit) or with a cure the entry does not name, it is not it.
    assert known_bugs.match(_finding(), module=shift) is None
    assert known_bugs.match(_finding(culprit_op="scatter (s32->s32)", culprit_pass="xla_cpu_use_fusion_emitters=False"),
                            module=shift) is None
    # The same culprit and cure in a module where no reshape reads the scatter: another bug.
    assert known_bugs.match(bisected, module=_module("int8_mask")) is None


def test_a_replayed_division_needs_the_divide_and_the_algsimp_cure() -> None:
    rows = _module("max_scaled_rows")
    divide = _finding(culprit_op="divide (f32->f32)", culprit_pass="xla_disable_hlo_passes=algsimp")
    assert known_bugs.match(divide, module=rows) == "xla-cpu-divide-by-broadcast-reciprocal"
    assert known_bugs.match(_finding(culprit_op="broadcast_in_dim (f32->f32)",
                                     culprit_pass="xla_disable_hlo_passes=algsimp"), module=rows) is None
    assert known_bugs.match(_finding(culprit_op="divide (f32->f32)"), module=rows) is None


def test_a_replayed_nested_slice_behind_a_call_is_matched_by_its_culprit() -> None:
    # The outer slice reads the func.call's result: the StableHLO has no slice of a slice.
    window = _module("window_slice")
    assert known_bugs.match(_finding(), module=window) is None
    found = _finding(culprit_op="dynamic_slice (f32,s32->f32)", culprit_pass="xla_disable_hlo_passes=algsimp")
    assert known_bugs.match(found, module=window) == "xla-dynamic-slice-of-dynamic-slice"
