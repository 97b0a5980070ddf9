"""A worker told to stop (SIGTERM: eviction, preemption, maintenance, suspend) before its
shard is done must exit non-zero, so the Indexed Job runs that index again, and keep what it
found; the worker Job's podFailurePolicy gives disruptions a free retry. No API involved."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from xla_sentinel.cluster import pod as worker_main
from xla_sentinel.spec.campaign import BudgetSpec, parse_spec
from xla_sentinel_operator import desired

SPEC = {"seed": 1, "workers": 1, "targets": [{"name": "default"}, {"name": "O0"}],
        "references": ["f64_eager"], "generator": {"version": 1, "minOps": 1, "maxOps": 3, "dtypes": ["f32"]}}


def test_shard_is_done_only_when_its_budget_is_spent():
    assert worker_main.shard_done(None, {})  # a shard with no program to run
    assert worker_main.shard_done(BudgetSpec(programs=5), {"programs": 5})
    assert not worker_main.shard_done(BudgetSpec(programs=5), {"programs": 4})
    assert worker_main.shard_done(BudgetSpec(seconds=60), {"programs": 1, "elapsed_s": 60.2})
    assert not worker_main.shard_done(BudgetSpec(seconds=60), {"programs": 9, "elapsed_s": 12.0})
    assert not worker_main.shard_done(BudgetSpec(continuous=True), {"programs": 10**6})


def run_main(monkeypatch, tmp_path: Path, spec: dict[str, Any], summary: dict[str, Any]) -> int:
    """worker_main.main with the engine replaced by one returning `summary` (no jax)."""
    engine = types.ModuleType("xla_sentinel.campaign.engine")
    engine.run_campaign = lambda *a, **k: summary  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "xla_sentinel.campaign.engine", engine)
    monkeypatch.setenv("XLA_SENTINEL_SPEC", json.dumps(spec))
    return worker_main.main(["--report", "none", "--out", str(tmp_path), "--shard-index", "0"])


def test_a_stopped_continuous_worker_exits_143(monkeypatch, tmp_path):
    spec = {**SPEC, "budget": {"continuous": True}}
    assert run_main(monkeypatch, tmp_path, spec, {"programs": 40}) == worker_main.STOPPED == 143


def test_a_worker_stopped_mid_shard_exits_143_and_a_finished_one_0(monkeypatch, tmp_path):
    spec = {**SPEC, "budget": {"programs": 10}}
    assert run_main(monkeypatch, tmp_path, spec, {"programs": 3}) == 143
    assert run_main(monkeypatch, tmp_path, spec, {"programs": 10}) == 0


def test_bad_spec_exits_2_which_the_job_fails_at_once(monkeypatch, tmp_path):
    monkeypatch.setenv("XLA_SENTINEL_SPEC", "{not json")
    assert worker_main.main(["--report", "none", "--out", str(tmp_path)]) == worker_main.EXIT_BAD_INPUT


def test_worker_job_ignores_disruptions_and_fails_bad_input_at_once():
    c = desired.Campaign(name="nightly", namespace="fuzz", uid="u", spec=parse_spec({}))
    (job,) = desired.worker_jobs(c, default_image="img")
    spec = job["spec"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # podFailurePolicy needs it
    first, second = spec["podFailurePolicy"]["rules"]
    assert first == {"action": "Ignore",
                     "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert second["action"] == "FailIndex" and second["onExitCodes"]["values"] == [worker_main.EXIT_BAD_INPUT]
    assert second["onExitCodes"]["containerName"] == spec["template"]["spec"]["containers"][0]["name"]
    # A crash, an OOM kill and a bare 143 still count against backoffLimitPerIndex.
    ignored = [r for r in spec["podFailurePolicy"]["rules"] if r["action"] == "Ignore" and "onExitCodes" in r]
    assert ignored == []


@pytest.mark.timeout(180)
def test_sigterm_stops_a_real_continuous_worker_with_143_and_its_work_kept(tmp_path):
    spec = {**SPEC, "budget": {"continuous": True}}
    env = {**os.environ, "XLA_SENTINEL_SPEC": json.dumps(spec), "JOB_COMPLETION_INDEX": "0"}
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from xla_sentinel.cluster.pod import main; "
                             "sys.exit(main(sys.argv[1:]))", "--report", "none", "--out", str(tmp_path)],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        store = tmp_path / "campaign.sqlite"
        deadline = time.monotonic() + 150
        while not _programs_done(store) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        assert proc.wait(60) == 143
        assert time.monotonic() - stopped_at < 30  # within the default grace period
        assert json.loads((tmp_path / "summary.json").read_text())["programs"] >= 1
    finally:
        if proc.poll() is None:
            proc.kill()


def _programs_done(store: Path) -> bool:
    import sqlite3

    if not store.exists():
        return False
    try:
        with sqlite3.connect(store) as db:
            return db.execute("select count(*) from programs").fetchone()[0] >= 1
    except sqlite3.Error:
        return False
