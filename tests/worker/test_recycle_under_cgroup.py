"""A real worker process (worker/server.py's loop, jax imported, over a pipe) started under
a fake container cgroup (a folder laid out as runc mounts one: the kernel's cgroup files
cannot be written here, and this machine's own cgroup has no limit) recycles at the share
of that cgroup's memory limit worker/memory.py derives, unless the variable says otherwise."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest
from xla_sentinel.worker import memory, server
from xla_sentinel.worker.protocol import Answer, Ping, Pong

MiB, GiB = 1 << 20, 1 << 30


def fake_cgroup(root: Path, v1: bool, limit: int) -> Path:
    folder = root / "memory" if v1 else root
    folder.mkdir(parents=True)
    (folder / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(f"{limit}\n")
    return root


def serve_one(root: Path, log: Path) -> tuple[Answer, bool]:
    """Start a worker under the cgroup at `root`, send it one request: (its answer, whether
    it exited after it)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=server.serve, args=(child, (), str(log)), kwargs={"cgroup_root": root},
                       daemon=True)
    proc.start()
    child.close()
    try:
        parent.send(Ping())
        assert parent.poll(120), log.read_text() if log.exists() else "no answer"
        answer: Answer = parent.recv()
        if not answer.recycle:
            parent.send(None)  # a worker that does not recycle serves on until told to stop
        proc.join(30)
        return answer, proc.exitcode == 0
    finally:
        proc.kill()


def bound_in_log(log: Path) -> int:
    (line,) = [s for s in log.read_text().splitlines() if "recycles past" in s]
    return int(line.split("recycles past ")[1].split()[0])


def test_a_worker_recycles_at_its_share_of_the_containers_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(memory.RECYCLE_ENV, raising=False)
    monkeypatch.setenv(memory.WORKERS_ENV, "4")
    # 3 GiB over 4 workers: 384 MiB each, more than a worker that has only imported jax.
    roomy = fake_cgroup(tmp_path / "v1", True, 3 * GiB)
    answer, exited = serve_one(roomy, tmp_path / "roomy.log")
    assert isinstance(answer.reply, Pong) and not answer.recycle and exited
    assert bound_in_log(tmp_path / "roomy.log") == memory.recycle_threshold(3 * GiB, 4) == 384 * MiB
    # 64 MiB over 4 workers: 8 MiB each, less than that worker holds: it recycles at once.
    tight = fake_cgroup(tmp_path / "v2", False, 64 * MiB)
    answer, exited = serve_one(tight, tmp_path / "tight.log")
    assert isinstance(answer.reply, Pong) and answer.recycle and exited
    assert bound_in_log(tmp_path / "tight.log") == 8 * MiB


def test_the_variable_wins_over_the_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(memory.WORKERS_ENV, "4")
    monkeypatch.setenv(memory.RECYCLE_ENV, str(GiB))
    answer, _ = serve_one(fake_cgroup(tmp_path / "v2", False, 64 * MiB), tmp_path / "w.log")
    assert not answer.recycle and bound_in_log(tmp_path / "w.log") == GiB
