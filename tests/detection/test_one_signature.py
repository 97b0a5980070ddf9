"""One bug, one signature (issue 28): the configurations a grouped signature shows in are
named wherever signatures are read — the local store's listing and the workers' reports
the operator reads (additively: a report written before the field still reads).

The end-to-end case, a real XLA bug replayed under every target, is
tests/traces/test_replay_oracle.py; these are the pieces it rests on.
"""

from __future__ import annotations

import json

import pytest
from xla_sentinel.cluster.report import LIMITS, WorkerReport, merge
from xla_sentinel.core.model import Finding
from xla_sentinel.triage.signature import configurations

TARGETS = ("default", "O0", "no_fusion_emitters", "f64_jit")


def _record(n: int, target: str, sig: str = "63a00c37c8e6ac32") -> dict[str, object]:
    return {"id": f"f{n}", "signature": sig, "verdict": "mismatch", "target": target,
            "program": "s1-i4", "culprit_op": "dynamic_slice (s32->s32)", "time": f"2026-12-03T00:00:0{n}Z"}


def test_a_report_names_each_configuration_of_a_signature_once() -> None:
    report = WorkerReport(worker="w")
    changes = [report.add_finding(_record(n, t)) for n, t in enumerate([*TARGETS, "O0"])]
    entry = report.signatures["63a00c37c8e6ac32"]
    assert entry.count == 5 and entry.configurations == list(TARGETS)
    # The fourth configuration is news past the samples' limit (3): a report write.
    assert changes[:4] == ["signature", "sample", "sample", "sample"] and changes[4] == "count"
    back = WorkerReport.from_json(report.to_json())
    assert back.signatures["63a00c37c8e6ac32"].configurations == list(TARGETS)


def test_a_report_without_configurations_still_reads_and_merges() -> None:
    old = WorkerReport(worker="w")
    old.add_finding(_record(0, "default"))
    data = json.loads(old.to_json())
    del data["signatures"]["63a00c37c8e6ac32"]["configurations"]  # written before issue 28
    read = WorkerReport.from_json(json.dumps(data))
    assert read.signatures["63a00c37c8e6ac32"].configurations == []
    new = WorkerReport(worker="w")
    for n, t in enumerate(TARGETS[1:]):
        new.add_finding(_record(n + 1, t))
    merged = merge(read, new)
    assert merged.signatures["63a00c37c8e6ac32"].configurations == list(TARGETS[1:])
    assert merge(new, new).signatures["63a00c37c8e6ac32"].configurations == list(TARGETS[1:])


def test_a_report_refuses_configurations_that_are_not_names() -> None:
    report = WorkerReport(worker="w")
    report.add_finding(_record(0, "default"))
    data = json.loads(report.to_json())
    data["signatures"]["63a00c37c8e6ac32"]["configurations"] = [1, 2]
    with pytest.raises(ValueError, match="configurations"):
        WorkerReport.from_json(json.dumps(data))


def test_the_worst_case_report_with_configurations_fits_the_cap() -> None:
    long = "x" * 10_000
    report = WorkerReport(worker="w" * 63, revision="r" * 63)
    for i in range(LIMITS.signatures + 2):
        for n in range(LIMITS.configurations + 2):
            record = {k: long for k in ("program", "culprit_op", "culprit_pass", "fusion_kind",
                                        "dtype", "dir", "known_bug", "time")}
            report.add_finding({**record, "id": f"{i}-{n}" + long, "verdict": "mismatch",
                                "signature": f"{i:016x}", "target": f"{n}" + long})
    assert all(len(e.configurations) == LIMITS.configurations for e in report.signatures.values())
    assert len(report.to_json()) < LIMITS.cap


def test_configurations_of_the_stored_findings() -> None:
    def finding(n: int, target: str, sig: str) -> Finding:
        return Finding(id=f"f{n}", campaign="c", program="p", target=target, verdict="mismatch",
                       dir=f"findings/f{n}", time="t", signature=sig)

    found = [finding(0, "default", "a"), finding(1, "O0", "a"), finding(2, "default", "b"),
             finding(3, "O0", "a")]
    assert configurations(found) == {"a": ["default", "O0"], "b": ["default"]}


def test_triage_lists_one_row_per_bug_with_its_configurations(
        tmp_path, capsys: pytest.CaptureFixture) -> None:
    from xla_sentinel.cli import main as cli
    from xla_sentinel.storage.store import Store

    store = Store(tmp_path / "campaign.sqlite")
    for n, t in enumerate([*TARGETS, "O0"]):
        store.add_finding(Finding(id=f"f{n}", campaign="c", program="s1-i4", target=t,
                                  verdict="mismatch", dir=f"findings/f{n}",
                                  time=f"2026-12-03T00:00:0{n}Z", signature="63a00c37c8e6ac32"))
    store.close()
    assert cli.main(["triage", str(tmp_path)]) == cli.EXIT_OK
    header, *rows = capsys.readouterr().out.strip().splitlines()
    assert header.split()[2] == "configurations" and len(rows) == 1
    assert rows[0].split()[2] == ",".join(TARGETS)


def test_a_known_bug_is_one_signature_however_it_was_found() -> None:
    """Issue 36: the dynamic_slice-of-dynamic_slice bug as fuzzing found it (an s32 program,
    its kLoop fusion, cured by disabling algsimp and fusion) and as a replayed trace shows
    it (f32 behind a call, cured by disabling algsimp alone) is one signature; before, each
    field took part in the hash and the two were two bugs. An unmatched finding keeps the
    signature of its fields."""
    from xla_sentinel.triage.signature import signature_id

    fuzzed = {"verdict": "mismatch", "target": "default", "culprit_op": "dynamic_slice (s32->s32)",
              "dtype": "s32", "fusion_kind": "kLoop", "culprit_pass": "algsimp,fusion",
              "known_bug": "xla-dynamic-slice-of-dynamic-slice"}
    replayed = {**fuzzed, "culprit_op": "dynamic_slice (f32,s32->f32)", "dtype": "f32", "fusion_kind": None,
                "culprit_pass": "xla_disable_hlo_passes=algsimp", "target": "O0"}
    assert signature_id(fuzzed) == signature_id(replayed)
    # Another known bug, or none: not the same signature.
    assert signature_id({**fuzzed, "known_bug": "xla-spmd-dynamic-slice-clamp"}) != signature_id(fuzzed)
    new = [{**f, "known_bug": None} for f in (fuzzed, replayed)]
    assert signature_id(new[0]) != signature_id(new[1])
    assert signature_id(new[0]) == signature_id({**new[0], "known_bug": ""}) != signature_id(fuzzed)
