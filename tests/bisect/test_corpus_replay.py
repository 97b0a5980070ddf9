"""The real-bug corpus replayed end to end (tests/bisect/data/corpus/, recorded with
`xla-sentinel record` from tests/bisect/corpus_workloads.py): each trace in a campaign of
its own with bisection on, its finding held to corpus.yaml, the table that says what XLA
gets wrong there (culprit op, cure, known bug), and each written bundle's repro.py run
the way its stage promised: exit 1 under the finding's options, 0 under the named cure.

Where the pipeline is known to fall short of the table, the trace's `gaps` say so, with
why; the test holds those to what the pipeline gives today, so a change that closes one
fails here until the table says so. The campaigns are shared by every test (one build)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import corpus
import pytest
from shared import once

TABLE = corpus.table()


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Any]:
    return once(tmp_path_factory, worker_id, "corpus-replay",  # type: ignore[no-any-return]
                lambda root: {name: corpus.replay(name, expected, root / name)
                              for name, expected in TABLE.items()})


def test_the_table_names_recorded_traces_of_known_bugs() -> None:
    from xla_sentinel.triage import known_bugs

    ids = {b["id"] for b in known_bugs.entries()}
    for name, expected in TABLE.items():
        folder = corpus.CORPUS / name
        # Recorded as a user records a job: the step's module, its values, its provenance.
        assert {"module.mlir", "meta.json", "stats.json", "inputs.npz"} <= {p.name for p in folder.iterdir()}, name
        assert '"source": "record"' in (folder / "meta.json").read_text(), name
        assert Path(corpus.HERE.parents[1], expected["repro"]).is_file(), name
        assert expected["known_bug"] is None or expected["known_bug"] in ids, name
        assert set(expected.get("gaps", {})) <= {"flagged", "op", "cure", "known"}, name


@pytest.mark.parametrize("name", list(TABLE))
def test_each_trace_bisects_to_its_bug(replayed: dict[str, Any], name: str) -> None:
    row, expected = replayed[name], TABLE[name]
    gaps = expected.get("gaps", {})
    got = {"flagged": row["flagged"], "op": row["op_ok"], "cure": row["cure_ok"], "known": row["known_ok"]}
    # Right where the table has no gap; still short where it has one (closing a gap must
    # update the table, which then holds the pipeline to it).
    assert got == {k: k not in gaps for k in got}, (row, gaps)
    if row["flagged"] and not gaps:
        assert row["status"] == "localized" and row["repro"], row
        # The op inside a call or region, with the path that leads there.
        assert row["culprit_path"] == expected.get("path"), row


@pytest.mark.parametrize("name", [n for n, e in TABLE.items() if not e.get("gaps")])
def test_each_bundle_fails_under_its_options_and_passes_under_its_cure(replayed: dict[str, Any],
                                                                       name: str) -> None:
    row = replayed[name]
    bundle = row["bundle"]
    assert bundle["written"] and bundle["repro_exit"] == 1, bundle
    shows = subprocess.run([sys.executable, "repro.py"], cwd=row["repro"], capture_output=True, text=True,
                           timeout=300)
    assert shows.returncode == 1, shows.stdout + shows.stderr
    if TABLE[name]["cure"] is None:
        assert "cured_with" not in bundle, bundle
        return
    option = row["culprit_pass"]  # a flag name=value; passes are named as a flag too here
    assert "=" in option, option
    cured = subprocess.run([sys.executable, "repro.py", f"--xla-option={option}"], cwd=row["repro"],
                           capture_output=True, text=True, timeout=300)
    assert cured.returncode == 0, cured.stdout + cured.stderr


def test_a_bug_found_by_fuzzing_and_by_replay_is_one_signature(replayed: dict[str, Any]) -> None:
    """The clamp-of-PRED bug as the 3,000-program clean run found it (s33-i348, a generated
    program, recorded with its known bug and no culprit) and as replaying a user's trace
    finds it (bool_mask_clamp, bisected to `clamp (bool->bool)`): one signature, the known
    bug's. Both dynamic_slice-of-dynamic_slice traces (f32 behind a call, a decoder block)
    likewise share one. Before, the signature hashed the target, culprit, dtype and cure,
    and each of these was a signature of its own."""
    import json

    from xla_sentinel.core.model import Finding
    from xla_sentinel.triage.signature import signature_of

    fuzzed = json.loads((corpus.HERE / "data" / "s33" / "s33-i348" / "finding.json").read_text())
    assert fuzzed["known_bug"] == TABLE["bool_mask_clamp"]["known_bug"] and fuzzed["culprit_op"] is None
    row = replayed["bool_mask_clamp"]
    assert row["known_ok"] and row["op_ok"], row
    assert row["signature"] == signature_of(Finding.from_json(fuzzed))
    slices = [replayed[n] for n in ("window_slice", "decoder_kv_window")]
    assert all(r["known_ok"] for r in slices) and slices[0]["signature"] == slices[1]["signature"] != row["signature"]


@pytest.mark.parametrize("name", [n for n, e in TABLE.items() if e["verdict"] == "invariant_violated"])
def test_an_invariant_finding_of_a_replayed_trace_is_bisected_by_its_invariant(replayed: dict[str, Any],
                                                                                name: str) -> None:
    """attention_probs: a recorded trace whose softmax sits in a jitted helper (func.call),
    replayed under the injected fault softmax_max_dropped (an HLO pass plugin of
    xla/faults/: no real bug of jaxlib 0.10.2 breaks an invariant of a trace). The
    invariant is recognized through the call (assess._dataflow; before, the finding was a
    nan_mismatch bisected as one), the reproduction and the bundle's repro.py judge it."""
    row = replayed[name]
    assert row["verdict"] == "invariant_violated" and row["judged_by"] == "invariant", row
    assert row["bundle"]["repro"]["judged_by"] == "invariant", row["bundle"]
