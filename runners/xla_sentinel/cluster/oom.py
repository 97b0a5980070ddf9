"""A worker pod over its memory limit stops whole, whatever the node's cgroup version.

On a cgroup v2 node the kubelet sets `memory.oom.group` on every container (its default
since 1.32, `singleProcessOOMKill: false`): when the kernel's OOM killer strikes in a worker
pod, the whole container dies, exit 137, reason OOMKilled, and the worker Job's index runs
again from its seeds (reports merge by maximum, so nothing is counted twice). On cgroup v1,
or with `singleProcessOOMKill`, the kernel kills only the largest process of the container,
which in a worker is the engine's programs-and-references worker: the engine starts another,
the program in flight ends `reference_failed` (its findings lost) and the pod runs on,
starved and unseen, losing a program at every kill (tests/node/test_chart.py showed it).

`stop_on_oom_kill` gives such a node the v2 behaviour: a thread polls the container's
memory cgroup for OOM kills and, at the first, kills the pod's processes and exits 137; the
runtime reports the container OOMKilled (it saw the kernel's OOM event in its cgroup).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from xla_sentinel.worker.memory import CGROUP, memory_cgroup

EXIT_OOM_KILLED = 137  # 128 + SIGKILL, as the container would exit had the kernel killed it whole


def counter_file(root: Path = CGROUP, pid: int | None = None) -> Path | None:
    """The OOM-kill counter of the memory cgroup that holds this process (`pid`), as the
    container sees it (runc mounts the container's own cgroup there: v2 `memory.events`, v1
    `memory/memory.oom_control`), when that cgroup has a memory limit; None elsewhere (not
    in a container: the host's root cgroup counts every kill on the machine)."""
    cgroup = memory_cgroup(root, os.getpid() if pid is None else pid)
    return cgroup.oom_counter if cgroup is not None else None


def oom_kills(counter: Path) -> int | None:
    """The `oom_kill` count in `counter`; None where it cannot be read."""
    try:
        text = counter.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return None


def _stop(killed: int) -> None:
    print(f"error: the kernel OOM-killed {killed} process(es) of this worker (over its memory "
          "limit); stopping the pod whole, as memory.oom.group would, so its index runs again",
          file=sys.stderr, flush=True)
    # Every other process of this one's group (the engine's workers, their forkserver) dies
    # with it, as the container's would; this one then exits 137 itself.
    me, group = os.getpid(), os.getpgid(0)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != me:
            try:
                if os.getpgid(int(entry.name)) == group:
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:  # gone meanwhile, or not ours
                pass
    os._exit(EXIT_OOM_KILLED)


def stop_on_oom_kill(interval: float = 0.5, root: Path = CGROUP) -> threading.Thread | None:
    """Start the watcher (a daemon thread); None outside a memory-limited container."""
    counter = counter_file(root)
    start = oom_kills(counter) if counter is not None else None
    if counter is None or start is None:
        return None

    def watch() -> None:
        while True:
            time.sleep(interval)
            now = oom_kills(counter)
            if now is not None and now > start:
                _stop(now - start)

    thread = threading.Thread(target=watch, name="oom-watch", daemon=True)
    thread.start()
    return thread
