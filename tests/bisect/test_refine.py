"""refine_finding's bookkeeping in the store, without a bisection: what happens to the
findings of a candidate signature whose bisections are used up."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from xla_sentinel.bisect.refine import refine_finding
from xla_sentinel.core.model import CULPRIT_FIELDS, Finding
from xla_sentinel.spec.campaign import BisectSpec
from xla_sentinel.storage.store import Store
from xla_sentinel.triage.signature import signature_of

CULPRIT = {"culprit_op": "atan2 (f32->f32)", "fusion_kind": None,
           "culprit_pass": "apply-xla-transforms", "repro": "findings/first/repro"}


def _stored(store: Store, out: Path, fid: str, verdict: str) -> Finding:
    record = Finding(id=fid, campaign="test", program=fid, target="default", verdict=verdict,
                     dtype="f32", evidence={"error": "worker exited with code -6 (SIGABRT)"},
                     dir=f"findings/{fid}", time="2026-01-01T00:00:00+00:00")
    record.signature = signature_of(record)
    (out / record.dir).mkdir(parents=True)
    (out / record.dir / "finding.json").write_text(json.dumps(record.to_json()))
    assert store.add_finding(record)
    return record


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "campaign.sqlite")
    yield s
    s.close()


def test_later_crashes_of_a_localized_candidate_take_its_signature(store: Store, tmp_path: Path) -> None:
    record = _stored(store, tmp_path, "second", "crash")
    assert store.claim_bisection(record.signature, 1)  # the first crash was bisected...
    store.set_meta(f"refined:{record.signature}", json.dumps(CULPRIT))  # ...and localized
    refined = refine_finding(store, tmp_path, record, BisectSpec(perSignature=1))
    expected = signature_of(dataclasses.replace(record, **{k: CULPRIT[k] for k in CULPRIT_FIELDS}))
    assert refined.signature == expected != record.signature
    assert [(s.id, s.culprit_op, s.count, s.repro) for s in store.signatures()] == \
        [(refined.signature, "atan2 (f32->f32)", 1, CULPRIT["repro"])]
    on_disk = json.loads((tmp_path / record.dir / "finding.json").read_text())
    assert on_disk["signature"] == refined.signature
    assert on_disk["candidate_signature"] == record.signature


def test_wrong_results_beyond_the_limit_keep_the_candidate(store: Store, tmp_path: Path) -> None:
    # A mismatch's candidate (verdict, target, dtype) covers many bugs: no inheritance.
    record = _stored(store, tmp_path, "second", "mismatch")
    assert store.claim_bisection(record.signature, 1)
    store.set_meta(f"refined:{record.signature}", json.dumps(CULPRIT))
    assert refine_finding(store, tmp_path, record, BisectSpec(perSignature=1)) == record
    assert [s.id for s in store.signatures()] == [record.signature]


def test_disabled_bisection_leaves_the_finding_alone(store: Store, tmp_path: Path) -> None:
    record = _stored(store, tmp_path, "first", "crash")
    assert refine_finding(store, tmp_path, record, BisectSpec(enabled=False)) == record
    assert store.claim_bisection(record.signature, 1)  # nothing was claimed
