"""Each fault fires only under its own pattern: on a shared corpus of small programs it
rewrites exactly the ones its docstring says it matches and returns None for the rest."""

from __future__ import annotations

import pytest
from fault_corpus import CORPUS
from fault_harness import load_fault, run, run_with_fault
from xla_sentinel.xla.faults import FAULTS

# Corpus programs that fall inside a fault's pattern, and why.
MATCHES: dict[str, set[str]] = {
    # k // 2 on signed arrays compares k against 0 elementwise; x[i] normalizes an index
    # array with i < 0.
    "signed_compare_unsigned": {"int_arith", "gather"},
    # f32 multiplies over a minor dimension of 3 (loop body) and 5 (k * 0.5).
    "odd_tail_multiply": {"while_double", "converts"},
    # XLA expands logistic into an exponential inside the loop fusion.
    "fusion_bf16_rounding": {"sigmoid"},
    # bf16 arithmetic runs in f32 and converts back.
    "bf16_convert_truncates": {"bf16_arith"},
    # scan reads its rows with dynamic-slice; the loop counter is always in range.
    "dynamic_slice_wraps": {"scan_rows"},
    # Every loop or branch that carries f32 state (fori_int carries only integers).
    "loop_state_bf16": {"fori_affine", "cond_scale", "while_double", "scan_rows"},
}

# Matches whose inputs never reach the fault's trigger, so the output must not change.
HARMLESS_MATCHES = [("dynamic_slice_wraps", "scan_rows")]

# abort_on_pattern is in the list too: the corpus holds no atan2, so it must pass every
# program through (and would kill the test process if its pattern leaked).
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_rewrites_exactly_the_programs_in_its_pattern(
        fault: str, corpus_protos: dict[str, bytes]) -> None:
    transform = load_fault(fault).transform

    fired = {name for name, proto in corpus_protos.items() if transform(proto) is not None}

    assert fired == MATCHES.get(fault, set())
    assert len(corpus_protos) - len(fired) >= 20


@pytest.mark.parametrize(("fault", "program"), HARMLESS_MATCHES)
def test_fault_matching_without_its_trigger_keeps_outputs_bitwise(fault: str, program: str) -> None:
    f, args = CORPUS[program]

    clean = run(f, *args)
    faulty = run_with_fault(fault, f, *args)

    assert len(clean) == len(faulty)
    for a, b in zip(clean, faulty, strict=True):
        assert a.tobytes() == b.tobytes()
