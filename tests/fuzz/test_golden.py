"""Fixed-seed campaigns give the verdicts, findings and signatures recorded before the
engine was refactored (issue 15): finding ids, candidate and refined signature ids and
the field lists of finding.json and summary.json are frozen here, so a change to the
finding model, the worker protocol or the campaign loop that changes what a campaign
reports fails this test.

The values were recorded from commit c070f25 (before the refactor) with real XLA
compiles; both campaigns bisect the first finding of each candidate signature.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.storage.store import Store
from xla_sentinel.xla.faults import fault_path

BASE = {"seed": 3, "workers": 1, "references": ["f64_eager", "f64_jit", "eager"],
        "bisect": {"enabled": True, "perSignature": 1, "reduce": False}}

# (program, target, verdict, signature, culprit_op, fusion_kind, culprit_pass, known_bug, id)
LOG = ("log (f32->f32)", "kLoop", "apply-xla-transforms")
UNBISECTED = (None, None, None)
# Issue 28 (one bug, one signature): a program's O0 finding joins its default finding's
# signature (same verdict and output), with its culprit fields and no bisection of its own;
# before, each target's findings had signatures of their own (8fab1a6a3bbdd293 and
# ef5aab7bfd3cef8a for O0).
MISMATCH_FINDINGS = {
    ("s3-i0", "O0", "mismatch", "8ca5c4407211c889", *LOG, None, "4bc71919ba2efb58"),
    ("s3-i0", "default", "mismatch", "8ca5c4407211c889", *LOG, None, "dd47f305e7851899"),
    ("s3-i1", "O0", "mismatch", "2a8a3f54080aa4a2", *UNBISECTED, None, "662ba8663aa3e8a1"),
    ("s3-i1", "default", "mismatch", "2a8a3f54080aa4a2", *UNBISECTED, None, "ccfb1d481e94b29d"),
    ("s3-i5", "O0", "mismatch", "2a8a3f54080aa4a2", *UNBISECTED, None, "8c7f3ae7bd056bea"),
    ("s3-i5", "default", "mismatch", "2a8a3f54080aa4a2", *UNBISECTED, None, "4649b9c0c43988dc"),
    ("s3-i7", "O0", "mismatch", "2a8a3f54080aa4a2", *UNBISECTED, None, "97baa5bd9a0ad578"),
    ("s3-i7", "default", "mismatch", "2a8a3f54080aa4a2", *UNBISECTED, None, "c2ae28a186ae1f94"),
}
# (id, verdict, target, count, culprit_op)
MISMATCH_SIGNATURES = {
    ("2a8a3f54080aa4a2", "mismatch", "default", 6, None),
    ("8ca5c4407211c889", "mismatch", "default", 2, "log (f32->f32)"),
}
# finding id -> the candidate signature a bisected finding was moved from
MISMATCH_CANDIDATES = {"dd47f305e7851899": "2a8a3f54080aa4a2"}

ATAN2 = ("atan2 (f32->f32)", None, "apply-xla-transforms")
CRASH_FINDINGS = {
    (f"s3-i{i}", "default", "crash", "055962d4e83c71be", *ATAN2, None, fid)
    for i, fid in enumerate(("54b004a5280577c3", "ac87f169e9c80eba", "951f7ba2c65981e9",
                             "460e653844eff80b"))
}
CRASH_SIGNATURES = {("055962d4e83c71be", "crash", "default", 4, "atan2 (f32->f32)")}
# One crash is bisected; the others take its refined signature through the alias.
CRASH_CANDIDATES = {fid: "508202ab132241e1" for *_, fid in CRASH_FINDINGS}

# format: the finding folder's layout version (issue 12, storage.FINDING_FORMAT).
FINDING_FIELDS = ["campaign", "culprit_op", "culprit_pass", "dir", "dtype", "evidence", "format",
                  "fusion_kind", "id", "known_bug", "program", "signature", "target", "time",
                  "verdict"]
# cross_checks and reference_fallbacks came with the numpy float64 reference (issue 16),
# eager_xla_ops with the own-precision one in numpy; unavailable_targets with accelerator
# targets (issue 13: a target whose platform this machine lacks is left out);
# undecided_outputs with references judged per output.
# kernel_decisions: which of coverage.KERNEL_DECISIONS the campaign reached (issue 28).
SUMMARY_FIELDS = ["campaign", "corpus_errors", "coverage", "cross_checks", "eager_xla_ops", "elapsed_s", "executions",
                  "findings", "findings_known", "findings_new", "harness_share", "injected_passes",
                  "jax_version", "jaxlib_version", "kernel_decisions", "program_status", "programs", "programs_per_s",
                  "reference_fallbacks", "references", "seed", "shard", "signatures", "signatures_known",
                  "signatures_new", "targets",
                  "trace_errors", "unavailable_targets", "undecided_outputs", "worker_restarts", "worker_seconds"]
# configurations, signatures_new and signatures_known: one bug in several configurations is
# one signature (issue 28).
SUMMARY_SIGNATURE_FIELDS = ["configurations", "count", "culprit_op", "culprit_pass", "first_seen",
                            "fusion_kind", "id", "known_bug", "last_seen", "repro", "target", "verdict"]


def _observed(out: Path) -> dict[str, Any]:
    store = Store(out / "campaign.sqlite")
    try:
        findings = {(f.program, f.target, f.verdict, f.signature, f.culprit_op, f.fusion_kind,
                     f.culprit_pass, f.known_bug, f.id) for f in store.findings()}
        signatures = {(s.id, s.verdict, s.target, s.count, s.culprit_op) for s in store.signatures()}
    finally:
        store.close()
    on_disk = {p.name: json.loads((p / "finding.json").read_text())
               for p in (out / "findings").iterdir()}
    return {"findings": findings, "signatures": signatures, "on_disk": on_disk}


def _check(out: Path, summary: dict[str, Any], findings: set, signatures: set,
           candidates: dict[str, str]) -> None:
    seen = _observed(out)
    assert seen["findings"] == findings
    assert seen["signatures"] == signatures
    assert {fid: r["candidate_signature"] for fid, r in seen["on_disk"].items()
            if "candidate_signature" in r} == candidates
    for fid, record in seen["on_disk"].items():
        extra = ["candidate_signature", "repro"] if fid in candidates else []
        assert sorted(record) == sorted(FINDING_FIELDS + extra), fid
        assert record["signature"] == next(f[3] for f in findings if f[-1] == fid)
    assert sorted(summary) == SUMMARY_FIELDS
    # The record `run` prints and returns is summary.json's: plain strings, not enum members
    # (a Verdict key printed as "<Verdict.MISMATCH: 'mismatch'>" in the run's last line).
    assert [type(k) for k in [*summary["findings"], *summary["program_status"]]] == \
        [str] * (len(summary["findings"]) + len(summary["program_status"]))
    assert all(sorted(s) == SUMMARY_SIGNATURE_FIELDS for s in summary["signatures"])
    assert {(s["id"], s["verdict"], s["target"], s["count"], s["culprit_op"])
            for s in summary["signatures"]} == signatures


def test_fixed_seed_mismatch_campaign_reports_what_it_reported_before(tmp_path: Path) -> None:
    spec = parse_spec({**BASE, "targets": ["default", "O0"],
                       "generator": {"version": 1, "minOps": 3, "maxOps": 12, "dtypes": ["f32"]},
                       "budget": {"programs": 8}})
    summary = run_campaign(spec, tmp_path, inject_passes=[fault_path("fusion_bf16_rounding")])
    assert summary["program_status"] == {"judged": 8}
    assert summary["findings"] == {"mismatch": 8}
    assert (summary["findings_new"], summary["findings_known"]) == (8, 0)
    _check(tmp_path, summary, MISMATCH_FINDINGS, MISMATCH_SIGNATURES, MISMATCH_CANDIDATES)


def test_fixed_seed_crash_campaign_reports_what_it_reported_before(tmp_path: Path) -> None:
    spec = parse_spec({**BASE, "targets": ["default"],
                       "generator": {"version": 1, "minOps": 2, "maxOps": 4, "dtypes": ["f32"], "ops": ["atan2", "add"]},
                       "budget": {"programs": 4}})
    summary = run_campaign(spec, tmp_path, inject_passes=[fault_path("abort_on_pattern")])
    assert summary["program_status"] == {"judged": 4}
    assert summary["findings"] == {"crash": 4}
    _check(tmp_path, summary, CRASH_FINDINGS, CRASH_SIGNATURES, CRASH_CANDIDATES)
