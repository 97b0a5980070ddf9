"""One verdict table (core/model.py VERDICT_TABLE): every verdict has an entry, the derived
sets follow from it, and the places that cannot import it (the CRDs) list the same verdicts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from xla_sentinel.core.model import (
    BISECTABLE,
    BUFFER_VERDICTS,
    COMPILER_FAILURES,
    VERDICT_TABLE,
    StillFails,
    Verdict,
)

ROOT = Path(__file__).resolve().parents[2]
CRDS = (ROOT / "crds" / "bugsignature.yaml", ROOT / "charts" / "xla-sentinel" / "crds" / "bugsignature.yaml")


def test_every_verdict_has_an_entry_in_the_enums_order() -> None:
    assert list(VERDICT_TABLE) == list(Verdict)


def test_every_verdict_has_a_doc_line_and_a_colour_of_its_own() -> None:
    colours = [i.colour for i in VERDICT_TABLE.values()]
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colours), colours
    assert len(set(colours)) == len(colours)
    assert all(i.doc and "\n" not in i.doc for i in VERDICT_TABLE.values())


def test_the_derived_sets_are_what_bisect_and_the_worker_rely_on() -> None:
    assert COMPILER_FAILURES == {Verdict.CRASH, Verdict.HANG, Verdict.COMPILE_ERROR}
    assert BUFFER_VERDICTS == (Verdict.INPUT_CLOBBERED, Verdict.RESULT_CLOBBERED, Verdict.DONATION_MISMATCH,
                               Verdict.NONDETERMINISTIC)
    # A compile anomaly is not bisected: no stage after the check knows a log line.
    assert BISECTABLE == frozenset(Verdict) - {Verdict.PASS, Verdict.COMPILE_ANOMALY}
    assert all(VERDICT_TABLE[v].still_fails is StillFails.SAME_VERDICT for v in COMPILER_FAILURES)
    assert VERDICT_TABLE[Verdict.INVARIANT_VIOLATED].still_fails is StillFails.INVARIANT


@pytest.mark.parametrize("path", CRDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_bugsignature_crd_lists_the_tables_verdicts_in_order(path: Path) -> None:
    """The operator applies the CRD as a file: adding a verdict fails here until its enum
    (in both copies) names it too."""
    crd = yaml.safe_load(path.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["verdict"]["enum"] == [v.value for v in VERDICT_TABLE]
