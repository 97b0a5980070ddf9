"""The machine's one real node (controlplane/node.py's NodeLock) between processes: a waiter
says whom it waits for and gives up past its own deadline, naming the holder; the node is
free again once the holder gives it back. The real node's tests take it this way before
their first test's timeout starts (tests/node/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane.node import NodeBusy, NodeLock

TESTS = Path(__file__).resolve().parents[1]
HOLDER = ("import sys; from controlplane.node import NodeLock; "
          "lock = NodeLock(__import__('pathlib').Path(sys.argv[1])); lock.acquire(); "
          "print('held', flush=True); sys.stdin.read(); lock.release()")


@pytest.fixture
def held_elsewhere(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """The lock file, held by another process until its stdin closes."""
    path = tmp_path / "node.lock"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), "other-session"],
                            cwd=TESTS, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    yield path, proc
    proc.communicate(timeout=30)


def test_a_waiter_reports_the_holder_and_gives_up_past_its_deadline(
        held_elsewhere: tuple[Path, subprocess.Popen[str]]) -> None:
    path, holder = held_elsewhere
    said: list[str] = []
    with pytest.raises(NodeBusy, match=rf"held by pid {holder.pid} \(.*other-session"):
        NodeLock(path).acquire(timeout=1.5, progress=said.append, every=0.5)
    assert len(said) >= 2 and all(f"pid {holder.pid}" in line for line in said), said


def test_the_node_is_free_once_its_holder_gives_it_back(
        held_elsewhere: tuple[Path, subprocess.Popen[str]]) -> None:
    path, holder = held_elsewhere
    mine = NodeLock(path)
    with pytest.raises(NodeBusy):
        mine.acquire(timeout=0)
    holder.communicate(timeout=30)
    mine.acquire(timeout=10)
    assert mine.held and f"pid {holder.pid}" not in mine.holder()
    mine.release()
    assert not mine.held and mine.holder() == ""


def test_taking_it_again_in_the_same_process_is_a_no_op(tmp_path: Path) -> None:
    lock = NodeLock(tmp_path / "node.lock")
    lock.acquire(timeout=0)
    lock.acquire(timeout=0)  # RealNode.start after the session took it: must not block
    other = NodeLock(lock.path)
    with pytest.raises(NodeBusy):
        other.acquire(timeout=0)
    lock.release()
    other.acquire(timeout=0)
    other.release()
