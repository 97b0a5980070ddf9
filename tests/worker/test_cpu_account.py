"""The CPU account (core/cpu_account.py, issue 39): a stage's seconds are its own, less
the stages run inside it; each thread nests its own stages; a worker ships its stages
with every answer, and they add up to the CPU its process spent."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from xla_sentinel.core import cpu_account
from xla_sentinel.core.cpu_account import Account
from xla_sentinel.worker.client import Worker, role
from xla_sentinel.worker.protocol import Ping, Run

ADD = """
func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = stablehlo.add %a, %b : tensor<64x64xf32>
  %1 = stablehlo.dot %0, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %1 : tensor<64x64xf32>
}
"""


def test_nested_stage_is_counted_once_under_its_path() -> None:
    # The clock reads 0 when judging starts, 3 and 8 around the transport inside it, 10 at
    # its end: judging's own CPU is 5, not 10 (the transport is not counted twice).
    ticks = iter([0.0, 3.0, 8.0, 10.0])
    account = Account(clock=lambda: next(ticks))
    with account.stage("judging"), account.stage("transport"):
        pass
    assert account.snapshot() == {"judging": 5.0, "judging/transport": 5.0}


def test_a_stage_that_raises_is_still_counted() -> None:
    ticks = iter([0.0, 2.0])
    account = Account(clock=lambda: next(ticks))
    with pytest.raises(RuntimeError), account.stage("storage"):
        raise RuntimeError("disk full")
    assert account.snapshot() == {"storage": 2.0}


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_each_thread_nests_its_own_stages() -> None:
    # Two slots judging at once: with one shared stack, the second slot's stage would be
    # taken as inside the first's ("a/b"), and a process clock would count both slots'
    # CPU in each.
    account = Account()
    started = threading.Barrier(2)

    def slot(name: str) -> None:
        with account.stage(name):
            started.wait()
            _burn(0.2)

    threads = [threading.Thread(target=slot, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = account.snapshot()
    assert set(seconds) == {"a", "b"}
    # Each stage holds its own thread's 0.2 s, not the 0.4 s both threads spent.
    assert all(0.2 <= s < 0.3 for s in seconds.values()), seconds


def test_take_starts_a_fresh_account() -> None:
    account = Account()
    account.add("idle", 1.0)
    assert account.take() == {"idle": 1.0}
    assert account.snapshot() == {}


@pytest.mark.parametrize(("name", "expected"), [
    ("slot0-programs", "programs"), ("slot12-no_fusion_emitters", "no_fusion_emitters"),
    ("validate-cpu", "validate-cpu"), ("owner-tpu", "owner-tpu"), ("slot0-programs-corpus", "programs-corpus"),
])
def test_role_names_what_a_worker_does(name: str, expected: str) -> None:
    assert role(name) == expected


def _process_cpu(pid: int) -> float:
    """utime + stime of a live process, from /proc (what its own counters say)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def fresh_account() -> Iterator[None]:
    cpu_account.reset()
    yield
    cpu_account.reset()


def test_a_workers_stages_come_back_under_its_role_and_sum_to_its_cpu(fresh_account: None) -> None:
    worker = Worker("slot0-O0")
    try:
        worker.call(Ping(), 600)
        x = np.ones((64, 64), np.float32)
        for _ in range(3):
            worker.call(Run(ADD, [x, x], {"xla_backend_optimization_level": 0}), 600)
        # Idle a moment: the wait is the next answer's, as a worker between programs is.
        time.sleep(0.2)
        worker.call(Ping(), 600)
        pid = worker._proc.pid
        spent = _process_cpu(pid)
        seconds = cpu_account.WORKERS.snapshot()
    finally:
        worker.close()
    stages = {k.split(":", 1)[1] for k in seconds}
    assert all(k.startswith("O0:") for k in seconds), seconds
    assert {"startup", "idle", "transport", "target", "target/compile", "target/run",
            "target/run/buffer_checks", "ping"} <= stages, stages
    # Compiling is the bulk of a Run here; a compile counted as the run would fail this.
    assert seconds["O0:target/compile"] > seconds["O0:target/run"]
    # The stages cover the process's CPU: all but the last answer's pickling and the
    # clock's granularity (/proc counts in ticks of 10 ms).
    counted = sum(seconds.values())
    assert counted == pytest.approx(spent, abs=0.05 + 0.03 * spent), (counted, spent, seconds)
