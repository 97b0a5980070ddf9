"""Where the CPU goes: CPU seconds by stage, measured where each stage runs (issue 39).

A campaign exists to compile and run programs under the configurations it compares;
everything else is overhead, and overhead at fleet scale is programs not tested. This
module keeps the account that bench/throughput.py prints: each process adds the CPU time
of the stages it runs, from its own counters, never guessed from wall time.

Stages nest and are exclusive: a stage's seconds are its own, less those of the stages
run inside it (the coordinator's transport inside judging is transport, not judging), so
the stages of a process sum to the CPU it spent inside any of them. The clock is the
calling thread's CPU time by default (the coordinator judges programs in one thread per
slot, and a process clock would count every slot's work in each); a worker serves one
request at a time and sets the process clock (`use_process_clock`), which also counts
the threads XLA compiles and runs on.

A worker ships its account with each reply (protocol.Answer.cpu: the stages since the
previous reply) and the coordinator adds it to WORKERS under the worker's role
(client.Worker.call), so that every stage is summed in the one process that prints it.
No jax here: the coordinator imports this.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

# Stage names used in more than one module (the others are named where they run).
IDLE = "idle"  # waiting for a request or a reply: a blocked thread spends next to nothing
TRANSPORT = "transport"  # pickling and unpickling what crosses a pipe
STARTUP = "startup"  # a process's own start, up to its first request
COMPILE = "compile"  # XLA compiling a module (a target's or a reference's)
RUN = "run"  # executing a compiled module, its inputs placed and outputs read back
BUFFER_CHECKS = "buffer_checks"  # xla/buffers.py: inputs, live results, rerun, concurrent run
# A worker's first answer names the forkserver it was forked from: "zygote@<pid>".
ZYGOTE_PREFIX = "zygote@"


@dataclass
class _Frame:
    """A stage being run: its path, and the CPU seconds of the stages run inside it so far."""

    path: str
    inner: float = 0.0


class Account:
    """CPU seconds by stage; thread-safe. `clock`: what one stage's time is read from."""

    def __init__(self, clock: Callable[[], float] = time.thread_time) -> None:
        self.clock = clock
        self._seconds: dict[str, float] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    def _stack(self) -> list[_Frame]:
        stack: list[_Frame] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Count the block's CPU time under its path (the names of the stages it runs in,
        then `name`, joined by "/"), less that of the stages run inside it."""
        stack = self._stack()
        frame = _Frame(f"{stack[-1].path}/{name}" if stack else name)
        t0 = self.clock()
        stack.append(frame)
        try:
            yield
        finally:
            elapsed = self.clock() - t0
            stack.pop()
            if stack:
                stack[-1].inner += elapsed
            self.add(frame.path, elapsed - frame.inner)

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self._seconds[name] = self._seconds.get(name, 0.0) + seconds

    def add_all(self, seconds: Mapping[str, float], prefix: str = "") -> None:
        """Add another account's stages (a worker's reply), each under `prefix + name`."""
        with self._lock:
            for name, s in seconds.items():
                key = prefix + name
                self._seconds[key] = self._seconds.get(key, 0.0) + s

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._seconds)

    def take(self) -> dict[str, float]:
        """The stages so far, and a fresh start (what a worker ships with a reply)."""
        with self._lock:
            seconds, self._seconds = self._seconds, {}
            return seconds

    def clear(self) -> None:
        with self._lock:
            self._seconds.clear()


# This process's stages: the coordinator's, or in a worker the worker's own.
ACCOUNT = Account()
# The coordinator's sum of its workers' stages, keyed "role/stage" (client.role).
WORKERS = Account()
# CPU seconds each forkserver spent importing jax and the handlers before it forked any
# worker (worker/zygote.py), by its pid: every worker forked from it reports the same.
ZYGOTES: dict[int, float] = {}


def stage(name: str) -> AbstractContextManager[None]:
    """ACCOUNT.stage: the stage in this process's account."""
    return ACCOUNT.stage(name)


def use_process_clock() -> None:
    """A worker: its stages read the process's CPU time (the threads XLA runs on count)."""
    ACCOUNT.clock = time.process_time


def reset() -> None:
    """Start a new account in this process (bench/throughput.py, one per campaign)."""
    ACCOUNT.clear()
    WORKERS.clear()
    ZYGOTES.clear()
