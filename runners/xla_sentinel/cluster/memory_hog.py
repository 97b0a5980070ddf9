"""Injected resource fault, not a miscompilation: a compile that needs more memory than its
container has.

It exists to test what happens when the kernel OOM-kills a worker pod (tests/node): since
the engine's workers recycle under a share of the pod's memory limit (worker/memory.py), a
campaign no longer outgrows its limit by itself, but one compile (or one reference
evaluation) of a large enough program still can. It is an HLO pass plugin like the
miscompilations of xla/faults, loaded by path (`injectPasses`), but not one of them: it
changes no program and leaves the oracle nothing to catch. It lives here, beside the pod's
OOM handling (cluster/oom.py), because it reads the pod's memory cgroup (worker/memory.py).

Fires when: the process runs in a memory-limited cgroup and its container has already
compiled COMPILES_BEFORE modules (counted in a file under $TMPDIR, which the pod's workers
share, so a recycled worker does not start over). It then writes to more memory than the
whole limit and the kernel kills it. Outside a limited cgroup (a developer's machine, the
test suite's own processes) it never fires.
"""

import os
from pathlib import Path

from xla_sentinel.worker import memory

NAME = "compile_memory_hog"
FIRES_ON = "the container's compile number COMPILES_BEFORE + 1 and later, under a memory limit"

# Compiles first, so that the pod finds and reports something before it is killed.
COMPILES_BEFORE = 24
PAGE = 4096


def transform(proto: bytes) -> bytes | None:
    cgroup = memory.memory_cgroup()
    if cgroup is None:
        return None
    counter = Path(os.environ.get("TMPDIR", "/tmp")) / "xla-sentinel-memory-hog.count"
    with counter.open("ab") as f:  # one byte per compile: appends from workers do not race
        f.write(b".")
    if counter.stat().st_size <= COMPILES_BEFORE:
        return None
    # Untouched pages of a fresh allocation are not charged to the cgroup: write one byte
    # on each of them.
    hog = bytearray(cgroup.limit + (64 << 20))
    for i in range(0, len(hog), PAGE):
        hog[i] = 1
    return None
