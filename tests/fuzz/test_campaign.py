"""End-to-end local campaigns: real XLA compiles in worker processes, a real SQLite store."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.core.program import Program
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel.xla.faults import fault_path

# Bisection has its own tests (tests/bisect); here it would only add seconds per finding.
F32 = {"seed": 3, "generator": {"version": 1, "minOps": 3, "maxOps": 12, "dtypes": ["f32"]},
       "targets": ["default", "O0"], "references": ["f64_eager", "f64_jit", "eager"], "workers": 1,
       "bisect": {"enabled": False}}


def _spec(**over: object):
    return parse_spec({**F32, **over})


def test_injected_fault_is_found_with_evidence(tmp_path: Path) -> None:
    spec = _spec(budget={"programs": 8})
    summary = run_campaign(spec, tmp_path, inject_passes=[fault_path("fusion_bf16_rounding")])
    assert summary["programs"] == 8
    assert summary["findings"].get("mismatch", 0) >= 1
    assert summary["findings_new"] >= 1 and summary["signatures"]
    finding = next((tmp_path / "findings").iterdir())
    record = json.loads((finding / "finding.json").read_text())
    assert record["verdict"] == "mismatch"
    assert record["evidence"]["error"] > record["evidence"]["threshold"]
    assert record["evidence"]["plugins"][0].endswith("fusion_bf16_rounding.py:transform")
    program = Program.load(finding / "program")
    assert program.graph is not None and program.inputs
    for name in ("expected.npz", "actual.npz"):
        assert (finding / name).exists()
    db = sqlite3.connect(tmp_path / "campaign.sqlite")
    assert db.execute("SELECT COUNT(*) FROM findings").fetchone()[0] == sum(summary["findings"].values())


def test_a_compiler_abort_is_contained_and_the_campaign_goes_on(tmp_path: Path) -> None:
    spec = _spec(budget={"programs": 4}, targets=["default"],
                 generator={"version": 1, "minOps": 2, "maxOps": 4, "dtypes": ["f32"], "ops": ["atan2", "add"]})
    summary = run_campaign(spec, tmp_path, inject_passes=[fault_path("abort_on_pattern")])
    assert summary["programs"] == 4
    assert summary["findings"].get("crash", 0) >= 1
    crash = [json.loads(f.read_text()) for f in tmp_path.glob("findings/*/finding.json")]
    assert any("SIGABRT" in c["evidence"]["error"] for c in crash if c["verdict"] == "crash")
    # One bug, many programs: the crashes share a signature.
    assert len({c["signature"] for c in crash if c["verdict"] == "crash"}) == 1


def test_a_hanging_compile_becomes_a_hang_finding(tmp_path: Path) -> None:
    # A compiler hang on the campaign's programs, not on the module a plugin is probed with
    # before a campaign starts (a plugin that hangs there is refused as broken instead).
    plugin = tmp_path / "hang.py"
    plugin.write_text("import time\n\ndef transform(proto):\n"
                      "    if b'xla_sentinel_probe' in proto:\n        return None\n"
                      "    time.sleep(3600)\n")
    spec = _spec(budget={"programs": 2}, targets=["default"], timeouts={"programSeconds": 4})
    summary = run_campaign(spec, tmp_path / "out", inject_passes=[str(plugin)])
    assert summary["programs"] == 2
    assert summary["findings"] == {"hang": 2}
    assert summary["worker_restarts"]["restarted_after_death"] == 2


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a few hundred programs; minutes on a loaded 2-core machine
def test_clean_campaign_reports_no_false_finding(tmp_path: Path) -> None:
    """A few hundred programs on the unmodified jaxlib: anything reported must be a known,
    explained XLA bug (runners/xla_sentinel/triage/known_bugs.yaml), never noise."""
    spec = parse_spec({"seed": 2024, "generator": {"version": 1, "maxOps": 20,
                                                   "dtypes": ["f32", "bf16", "f16", "s32", "u8", "bool"]},
                       "budget": {"programs": 240}, "workers": 2})
    summary = run_campaign(spec, tmp_path)
    assert summary["programs"] == 240
    judged = summary["program_status"].get("judged", 0)
    assert judged >= 0.9 * 240, summary["program_status"]
    unexplained = [s for s in summary["signatures"] if not s["known_bug"]]
    assert not unexplained, json.dumps(unexplained, indent=1)


def test_second_run_resumes_and_a_different_spec_is_refused(tmp_path: Path) -> None:
    run_campaign(_spec(budget={"programs": 3}), tmp_path)
    db = sqlite3.connect(tmp_path / "campaign.sqlite")
    first = {r[0] for r in db.execute("SELECT idx FROM programs")}
    summary = run_campaign(_spec(budget={"programs": 5}), tmp_path)
    assert summary["programs"] == 5
    assert first < {r[0] for r in db.execute("SELECT idx FROM programs")}
    with pytest.raises(SpecError, match="different spec"):
        run_campaign(_spec(seed=4, budget={"programs": 6}), tmp_path)


def test_interrupt_loses_no_finding_and_the_run_resumes(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text(json.dumps({**F32, "budget": {"programs": 400}}))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "xla_sentinel.cli.main", "run", str(campaign), "--out",
                             str(out), "--quiet", "--inject-pass", fault_path("fusion_bf16_rounding")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            # Started with SIGINT ignored, as a background job of a shell
                            # without job control is: the campaign must still stop on it.
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 240
    found = 0
    while time.monotonic() < deadline and not found:
        time.sleep(1)
        if (out / "campaign.sqlite").exists():
            try:
                found = sqlite3.connect(out / "campaign.sqlite").execute(
                    "SELECT COUNT(*) FROM findings").fetchone()[0]
            except sqlite3.OperationalError:
                continue
    assert found, "no finding before the deadline"
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=60)
    rows = sqlite3.connect(out / "campaign.sqlite").execute("SELECT id, dir FROM findings").fetchall()
    assert len(rows) >= found
    # The signal reached the workers too (one process group): none may count as a crash.
    verdicts = sqlite3.connect(out / "campaign.sqlite").execute("SELECT verdict FROM findings").fetchall()
    assert ("crash",) not in verdicts
    for _, folder in rows:
        assert (out / folder / "finding.json").exists()
        Program.load(out / folder / "program")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["programs"] < 400
    done = summary["programs"]
    resumed = run_campaign(_spec(budget={"programs": done + 2}), out,
                           inject_passes=[fault_path("fusion_bf16_rounding")])
    assert resumed["programs"] == done + 2


def test_workers_recycled_for_memory_lose_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every worker exits after each request, as if it had grown past its memory limit.
    monkeypatch.setenv("XLA_SENTINEL_RECYCLE_RSS_BYTES", "1")
    spec = _spec(budget={"programs": 3}, targets=["default"], bisect={"enabled": False})
    summary = run_campaign(spec, tmp_path, inject_passes=[fault_path("fusion_bf16_rounding")])
    assert summary["program_status"] == {"judged": 3}
    assert "crash" not in summary["findings"] and "hang" not in summary["findings"]
    assert summary["findings"].get("mismatch", 0) >= 1
    assert summary["worker_restarts"]["recycled_for_memory"] >= 3
    assert summary["worker_restarts"]["restarted_after_death"] == 0
