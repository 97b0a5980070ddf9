"""Scheduling a campaign: which program indices a shard runs (resumed ones skipped), the
budget, and one thread per slot pulling the next index until the budget or a stop ends it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

import structlog

from xla_sentinel.judge.assess import Slot, Stopped
from xla_sentinel.spec.campaign import BudgetSpec

log = structlog.get_logger("xla_sentinel.campaign.engine")


def shard_indices(shard: tuple[int, int], file_units: int, done: set[int]) -> Iterator[int]:
    """The shard's program indices not yet done: the file units first (as negative
    indices, so they never collide with generated ones), then generated programs forever."""
    for k in range(file_units):
        if k % shard[1] == shard[0] and -(k + 1) not in done:
            yield -(k + 1)
    k = 0
    while True:
        idx = shard[0] + k * shard[1]
        k += 1
        if idx not in done:
            yield idx


class Scheduler:
    """Hands indices to slot threads while the budget lasts; counts programs in flight so
    that the threads together never start more programs than the budget allows."""

    def __init__(self, budget: BudgetSpec, stop: threading.Event, lock: threading.Lock,
                 programs_done: Callable[[], int], started: Callable[[], float]) -> None:
        self.budget = budget
        self.stop = stop
        self.lock = lock
        self.programs_done = programs_done
        self.started = started
        self.in_flight = 0

    def budget_left(self) -> bool:
        b = self.budget
        if b.continuous:
            return True
        if b.programs is not None and self.programs_done() + self.in_flight >= b.programs:
            return False
        if b.seconds is not None and time.monotonic() - self.started() >= b.seconds:
            return False
        return True

    def run(self, slots: Sequence[Slot], indices: Iterator[int],
            work: Callable[[Slot, int], None], harness_error: Callable[[int], None]) -> None:
        """Run `work(slot, idx)` in one thread per slot until the budget or a stop ends it."""
        threads = [threading.Thread(target=self._slot_loop, args=(s, indices, work, harness_error),
                                    daemon=True) for s in slots]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)

    def _slot_loop(self, slot: Slot, indices: Iterator[int], work: Callable[[Slot, int], None],
                   harness_error: Callable[[int], None]) -> None:
        while not self.stop.is_set():
            with self.lock:
                if not self.budget_left():
                    return
                idx = next(indices)
                self.in_flight += 1
            try:
                work(slot, idx)
            except Stopped:
                return
            except Exception:
                log.exception("program failed in the harness", index=idx)
                harness_error(idx)
            finally:
                with self.lock:
                    self.in_flight -= 1
