"""The bug lifecycle without the API: version-aware regressions, where a signature was
seen, what a bisection reports and refines to, and the alert fields it adds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from xla_sentinel.cluster import pod as worker_main
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.triage.signature import signature_id
from xla_sentinel_operator import desired, signatures

FIXED = {"state": "fixed", "fixedIn": "0.10.3"}


def test_a_hit_on_the_fixing_version_or_later_regresses_an_older_one_does_not():
    assert not signatures.regressed(FIXED, {}, {"jaxlib": "0.10.2"})
    assert signatures.regressed(FIXED, {}, {"jaxlib": "0.10.3"})
    assert signatures.regressed(FIXED, {}, {"jaxlib": "0.11.0.dev20261201"})
    assert not signatures.regressed(FIXED, {}, {"jaxlib": "0.10.3rc1"})  # before the release
    # Without a fixing version, or a version nobody can read, a hit is a regression.
    assert signatures.regressed({"state": "fixed"}, {}, {"jaxlib": "0.4.30"})
    assert signatures.regressed(FIXED, {}, {"jaxlib": "unknown"})
    assert signatures.regressed(FIXED, {}, None)
    for state in ("new", "triaged"):
        assert not signatures.regressed({**FIXED, "state": state}, {}, {"jaxlib": "0.11.0"})
    # Regressed already: only a regression whose status write was lost is still to record.
    assert not signatures.regressed({**FIXED, "state": "regressed"}, {}, {"jaxlib": "0.11.0"})
    assert signatures.regressed({**FIXED, "state": "regressed"}, {"fixedAt": "t"}, {"jaxlib": "0.11.0"})


def test_seen_on_keeps_the_most_recent_version_combinations():
    v2 = {"jax": "0.10.2", "jaxlib": "0.10.2", "image": "runner:1"}
    seen = signatures.seen_on(None, v2, "2026-12-01T00:00:00Z")
    assert seen == [{**v2, "firstSeen": "2026-12-01T00:00:00Z", "lastSeen": "2026-12-01T00:00:00Z"}]
    assert signatures.seen_on(seen, v2, "2026-12-01T00:00:00Z") is None  # nothing new
    later = signatures.seen_on(seen, v2, "2026-12-02T00:00:00Z")
    assert len(later) == 1 and later[0]["lastSeen"] == "2026-12-02T00:00:00Z"
    many = later
    for i in range(30):
        many = signatures.seen_on(many, {"jaxlib": f"0.{i}.0"}, f"2026-12-03T00:00:{i:02d}Z")
    assert len(many) == signatures.SEEN_ON_MAX and many[-1]["jaxlib"] == "0.29.0"


def record(**kw) -> dict:
    return {"id": "f1", "verdict": "mismatch", "target": "default", "dtype": "f32",
            "signature": "c" * 16, "evidence": {}, **kw}


def test_a_localized_bisection_refines_the_signature_as_local_refinement_does(tmp_path: Path):
    culprit = {"culprit_op": "reduce", "fusion_kind": "kLoop", "culprit_pass": "algsimp"}
    result = {"status": "localized", **culprit, "repro": "repro",
              "stages": {"reduce": {"ops_before": 20, "ops_after": 3}}}
    out = worker_main.bisection_result(record(**culprit), result, tmp_path / "f1", "c" * 16)
    assert out["signature"] == signature_id({**record(), **culprit}) != "c" * 16
    assert (out["reduced_ops"], out["original_ops"]) == (3, 20)
    assert out["repro"] == str(tmp_path / "f1" / "repro")
    failed = worker_main.bisection_result(record(), {"status": "no_culprit"}, tmp_path, "c" * 16)
    assert failed["signature"] == "c" * 16 and failed["repro"] is None
    assert [worker_main.verify_outcome(c) for c in (0, 1, -1)] == ["verified", "still-failing", "error"]


def test_the_refined_signature_and_the_alert_carry_the_bisection():
    candidate = {"metadata": {"name": "sig-" + "c" * 16, "namespace": "ns", "labels": {}},
                 "spec": {"signature": "c" * 16, "verdict": "mismatch", "state": "triaged",
                          "fixedIn": "0.1", "teams": ["xla-cpu"]}}
    result = {"signature": "d" * 16, "culprit_op": "reduce", "fusion_kind": "kLoop",
              "culprit_pass": "algsimp", "repro": "/artifacts/x/repro", "reduced_ops": 3,
              "status": "localized"}
    sig = signatures.refined_signature(candidate, result)
    assert sig["metadata"]["name"] == "sig-" + "d" * 16
    assert sig["spec"]["state"] == "new" and "fixedIn" not in sig["spec"]
    assert (sig["spec"]["culpritPass"], sig["spec"]["repro"]) == ("algsimp", "/artifacts/x/repro")
    sig["status"] = {"bisection": signatures.bisection_status(result, "job-1"),
                     "seenOn": [{"jaxlib": "0.10.2"}]}
    (alert,) = signatures.alerts(sig, "new", now=datetime(2026, 12, 1, tzinfo=UTC))
    notes = alert["annotations"]
    assert (notes["culprit_pass"], notes["fusion_kind"], notes["reduced_ops"]) == ("algsimp", "kLoop", "3")
    assert notes["repro"] == "/artifacts/x/repro" and notes["seen_on"] == "0.10.2"


def test_a_verification_job_per_image_and_fixing_version():
    c = desired.Campaign(name="nightly", namespace="ns", uid="u", spec=parse_spec({"image": "runner:2"}))
    job = desired.verify_job(c, "d" * 16, "/artifacts/x/repro", "0.10.3", default_image="img")
    runner = job["spec"]["template"]["spec"]["containers"][0]
    assert runner["image"] == "runner:2"
    assert runner["args"] == ["worker", "--verify", "/artifacts/x/repro", "--signature", "d" * 16,
                              "--fixed-in", "0.10.3"]
    again = desired.verify_job(c, "d" * 16, "/artifacts/x/repro", "0.10.3", default_image="img")
    other = desired.verify_job(c, "d" * 16, "/artifacts/x/repro", "0.10.4", default_image="img")
    assert job["metadata"]["name"] == again["metadata"]["name"] != other["metadata"]["name"]


def test_verify_runs_the_bundle_and_reports_its_outcome(tmp_path: Path, monkeypatch):
    """`worker --verify`: the repro bundle's own repro.py decides (exit 1 while the bug
    shows); the outcome and its output go back as a result object."""
    from xla_sentinel.cluster.report import result_from_object

    from .test_report_bounded_pure import FakeReports

    api = FakeReports()
    monkeypatch.setattr(worker_main, "_custom_api", lambda args: api)
    bundle = tmp_path / "findings" / "f1" / "repro"
    bundle.mkdir(parents=True)
    (bundle / "repro.py").write_text("import sys\nprint('max rel error 0.5')\nsys.exit(1)\n")
    argv = ["--verify", str(tmp_path / "findings" / "f1"), "--signature", "d" * 16,
            "--fixed-in", "0.10.3", "--campaign", "nightly", "--namespace", "ns", "--image", "runner:2"]
    assert worker_main.main(argv) == 0
    (obj,) = api.objects.values()
    result = result_from_object(obj)
    assert result["type"] == "verification" and result["result"] == "still-failing"
    assert result["exitCode"] == 1 and "max rel error 0.5" in result["evidence"]
    assert result["versions"]["image"] == "runner:2" and obj["spec"]["worker"] == "verification"
    (bundle / "repro.py").write_text("print('ok')\n")  # the fix is in: exit 0
    assert worker_main.main(argv) == 0
    assert result_from_object(next(iter(api.objects.values())))["result"] == "verified"


def test_verify_runs_the_bundle_on_the_fixing_release_the_image_holds(tmp_path: Path, monkeypatch):
    """`worker --verify --fixed-in V` on an image with V's environment runs the bundle on V
    (`bisect --versions V`), and says which release it ran on; without one, on its own."""
    from versions.conftest import fake_release
    from xla_sentinel.cluster.report import result_from_object
    from xla_sentinel.core import versions

    from .test_report_bounded_pure import FakeReports
    from .test_version_bisection import bundle_folder

    api = FakeReports()
    monkeypatch.setattr(worker_main, "_custom_api", lambda args: api)
    envs = tmp_path / "envs"
    fake_release(envs, "0.92.0")
    fake_release(envs, "0.96.0", fault="odd_tail_multiply.py")  # the bug is still there
    monkeypatch.setenv(versions.ENVS_VARIABLE, str(envs))
    bundle = tmp_path / "findings" / "f1" / "repro"
    bundle.mkdir(parents=True)
    bundle_folder(bundle)

    def verify(fixed_in: str) -> dict:
        assert worker_main.main(["--verify", str(bundle.parent), "--signature", "d" * 16,
                                 "--fixed-in", fixed_in, "--campaign", "nightly",
                                 "--namespace", "ns", "--image", "runner:2"]) == 0
        (obj,) = [o for o in api.objects.values() if o["spec"]["worker"] == "verification"
                  and json.loads(o["spec"]["result"])["fixedIn"] == fixed_in]
        return result_from_object(obj)

    fixed = verify("0.92.0")
    assert (fixed["result"], fixed["jaxlib"], fixed["exitCode"]) == ("verified", "0.92.0", 0)
    failing = verify("0.96.0")
    assert (failing["result"], failing["jaxlib"], failing["exitCode"]) == ("still-failing", "0.96.0", 1)
    assert "normwise error" in failing["evidence"]
    # No environment for 0.10.3 in the image: its own jaxlib runs repro.py (no fault there).
    own = verify("0.10.3")
    assert (own["result"], own["jaxlib"]) == ("verified", versions.current_jaxlib())


def test_bisect_without_a_finding_is_bad_input(tmp_path: Path, capsys):
    assert worker_main.main(["--bisect", str(tmp_path), "--report", "none"]) == 2
    assert "finding.json: cannot read finding" in capsys.readouterr().err


def test_a_resumed_store_gives_the_counts_a_restarted_reporter_starts_from(tmp_path: Path):
    from xla_sentinel.core.model import Finding, ProgramStatus
    from xla_sentinel.storage.store import Store

    assert worker_main.resumed_report(tmp_path / "campaign.sqlite", "main-0") is None  # fresh
    store = Store(tmp_path / "campaign.sqlite")
    for i in range(5):
        store.record_program(i, f"p{i}", 3, ProgramStatus.JUDGED, 4, 0.1, {})
        store.add_finding(Finding(id=f"f{i}", campaign="c", program=f"p{i}", target="default",
                                  verdict="mismatch", dir=f"findings/f{i}", signature="aa" if i < 3 else "bb",
                                  time=f"2026-12-01T00:00:0{i}Z"))
    store.close()
    report = worker_main.resumed_report(tmp_path / "campaign.sqlite", "main-0")
    assert (report.programs, report.executions) == (5, 20)
    assert {s: e.count for s, e in report.signatures.items()} == {"aa": 3, "bb": 2}
    assert report.signatures["aa"].first_seen == "2026-12-01T00:00:00Z"


def test_bisect_reports_the_refined_signature_back(tmp_path: Path, monkeypatch):
    """`worker --bisect`: the pipeline's result (here a stand-in for the jax-heavy stages)
    and the finding become a `bisection` result object."""
    import json

    from xla_sentinel.bisect import pipeline
    from xla_sentinel.cluster.report import result_from_object

    from .test_report_bounded_pure import FakeReports

    api = FakeReports()
    monkeypatch.setattr(worker_main, "_custom_api", lambda args: api)
    folder = tmp_path / "findings" / "f1"
    folder.mkdir(parents=True)
    (folder / "finding.json").write_text(json.dumps(record()))
    culprit = {"culprit_op": "reduce", "fusion_kind": "kLoop", "culprit_pass": "algsimp"}

    def bisect_finding(path: Path, **_) -> dict:
        (path / "finding.json").write_text(json.dumps(record(**culprit)))
        return {"status": "localized", **culprit, "repro": "repro",
                "stages": {"reduce": {"ops_before": 9, "ops_after": 2}}}

    monkeypatch.setattr(pipeline, "bisect_finding", bisect_finding)
    argv = ["--bisect", str(folder), "--signature", "c" * 16, "--campaign", "nightly", "--namespace", "ns"]
    assert worker_main.main(argv) == 0
    result = result_from_object(next(iter(api.objects.values())))
    assert result["type"] == "bisection" and result["candidate"] == "c" * 16
    assert result["signature"] == signature_id({**record(), **culprit})
    assert (result["culprit_pass"], result["reduced_ops"]) == ("algsimp", 2)
    assert result["repro"] == str(folder / "repro") and result["versions"]["jaxlib"]


def test_the_operator_page_shows_where_a_bug_began_and_its_verification():
    from xla_sentinel.report.html import Page, render_page
    from xla_sentinel_operator.dashboard import signature_row

    sig = {"metadata": {"name": "sig-" + "d" * 16},
           "spec": {"signature": "d" * 16, "verdict": "nan_mismatch", "state": "fixed"},
           "status": {"count": 2, "bisection": {"introducedIn": "0.10.2", "lastGood": "0.10.1"},
                      "verification": {"result": "still-failing", "jaxlib": "0.10.3"}}}
    row = signature_row(sig)
    assert row.versions == "introduced in jaxlib 0.10.2, last good 0.10.1; still failing on jaxlib 0.10.3"
    assert row.versions in render_page(Page(title="t", source="ns", generated="g", signatures=[row]))
    assert signature_row({**sig, "status": {"count": 2}}).versions is None
