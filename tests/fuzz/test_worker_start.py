"""A worker that cannot start stops the campaign with one line naming it, before anything
is judged: it is neither a hang nor a crash of a program. Workers fork from a process that
has imported jax already (client._Zygote) and still see the environment of their start; the
coordinator itself never imports jax."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xla_sentinel.cli.main import main
from xla_sentinel.worker.client import Worker, WorkerStartError, wait_ready

# A plugin whose import kills the process: the worker dies while it starts.
DIES_AT_IMPORT = "import os\nos._exit(7)\n\ndef transform(proto):\n    return None\n"
# One whose import takes a minute: the worker is alive but does not answer.
SLOW_AT_IMPORT = "import time\ntime.sleep(60)\n\ndef transform(proto):\n    return None\n"
# One that writes down, when a worker imports it, what the worker's environment holds and
# whether the worker was forked from the zygote (only the forkserver imports zygote.py).
REPORTS_AT_IMPORT = ("import os, sys\n"
                     "seen = [os.environ.get('XS_PROBE', ''), str('xla_sentinel.worker.zygote' in sys.modules)]\n"
                     "open(os.environ['XS_PROBE_OUT'], 'w').write(' '.join(seen))\n\n"
                     "def transform(proto):\n    return None\n")


def test_a_worker_that_dies_while_starting_is_named(tmp_path: Path) -> None:
    plugin = tmp_path / "dies.py"
    plugin.write_text(DIES_AT_IMPORT)
    log = tmp_path / "w.log"
    worker = Worker("slot0-default", plugins=[f"{plugin}:transform"], log_path=log)
    try:
        with pytest.raises(WorkerStartError, match=r"worker slot0-default did not start: "
                           r"worker exited with code 7 \(log: .*w\.log\)"):
            wait_ready([worker], timeout=120)
    finally:
        worker.close()


def test_a_worker_that_does_not_answer_in_time_is_named(tmp_path: Path) -> None:
    plugin = tmp_path / "slow.py"
    plugin.write_text(SLOW_AT_IMPORT)
    worker = Worker("slot0-programs", plugins=[f"{plugin}:transform"], log_path=tmp_path / "w.log")
    try:
        with pytest.raises(WorkerStartError, match="worker slot0-programs did not start: .*no answer"):
            wait_ready([worker], timeout=3)
    finally:
        worker.close()


def test_run_exits_2_with_one_line_when_a_worker_cannot_start(tmp_path: Path, capsys, monkeypatch) -> None:
    import xla_sentinel.campaign.engine as engine

    def refuse(workers, timeout=0.0):
        raise WorkerStartError("worker slot0-programs did not start: no answer within 600 s")

    monkeypatch.setattr(engine, "wait_ready", refuse)
    spec = tmp_path / "c.yaml"
    spec.write_text("seed: 1\ntargets: [default]\nbudget: {programs: 1}\nworkers: 1\n")
    assert main(["run", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "xla-sentinel: error: worker slot0-programs did not start: no answer within 600 s"


def test_workers_fork_from_the_zygote_with_the_environment_of_their_start(tmp_path: Path, monkeypatch) -> None:
    plugin = tmp_path / "reports.py"
    plugin.write_text(REPORTS_AT_IMPORT)
    seen = tmp_path / "seen"
    monkeypatch.setenv("XS_PROBE_OUT", str(seen))

    def start(value: str) -> tuple[Worker, str]:
        monkeypatch.setenv("XS_PROBE", value)
        worker = Worker(f"probe-{value}", plugins=[f"{plugin}:transform"], log_path=tmp_path / "w.log")
        wait_ready([worker], timeout=300)
        return worker, seen.read_text()

    first, report = start("a")
    try:
        assert report == "a True"
        # The forkserver holds the old environment and a worker of it is alive: spawned.
        second, report = start("b")
        assert report == "b False"
        second.close()
    finally:
        first.close()
    # None alive: the forkserver starts again with the new environment.
    third, report = start("c")
    third.close()
    assert report == "c True"


def test_the_coordinator_does_not_import_jax() -> None:
    # Each worker imports it (or forks with it); a coordinator that did too would pay
    # seconds of CPU and hundreds of MB for nothing (engine.py).
    code = "import sys, xla_sentinel.cli.main, xla_sentinel.campaign.engine; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
