"""How large a worker process may grow before it recycles: a share of its container's
memory limit.

A worker that evaluates programs op by op only grows (worker/server.py), and past its bound
it exits after a reply so that the next request starts a fresh one. A fixed bound (1.5 GB)
outgrew any pod limited below it: the kernel OOM-killed the pod first. So the bound follows
the memory limit of the container's cgroup, shared out over the pod's engine worker
processes. No jax here: the pod's entrypoint (cluster/pod.py) and cluster/oom.py read the
same cgroup.

What a worker is measured by is its own memory: its resident pages that no other process
shares (`Private_Clean + Private_Dirty`, /proc/self/smaps_rollup). Workers fork from a
forkserver that imported jax (worker/zygote.py), and the pages they share with it are
charged to the container once, not once per worker: a fresh worker holds ~190 MB resident
but ~35-55 MB of its own (measured, docs/deploy.md "Memory sizing"), so an RSS bound split
over the workers would recycle them after every request in a pod the engine fits in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xla_sentinel.worker import devices

if TYPE_CHECKING:
    from xla_sentinel.spec.campaign import CampaignSpec

CGROUP = Path("/sys/fs/cgroup")
UNLIMITED = 1 << 62  # cgroup v1 writes "no limit" as a number near 2^63
# The bound without a limit, and the most a limit can raise it to.
RECYCLE_CAP = 1_500_000_000
# The part of the container's limit the engine's worker processes may fill together. The
# rest is for the pod's coordinator (~80 MB resident), the forkserver with jax imported
# (~180 MB, shared by the workers' pages), and the request each worker has in flight
# past its bound (it recycles only after replying).
RECYCLE_SHARE = 0.5
# A worker's own memory just after it started serving (measured 35-55 MB): a bound below
# this recycles the worker after every request, so the limit is too small for the campaign.
FRESH_WORKER_BYTES = 64 << 20
# The bound itself (bytes), over everything derived here.
RECYCLE_ENV = "XLA_SENTINEL_RECYCLE_RSS_BYTES"
# How many engine worker processes share the container's limit (engine_workers; set by
# the campaign engine, or before it by the pod's entrypoint, cluster/pod.py).
WORKERS_ENV = "XLA_SENTINEL_ENGINE_WORKERS"


@dataclass(frozen=True)
class MemoryCgroup:
    """A memory cgroup with a limit: its folder, the limit in bytes, and the file where
    the kernel counts its OOM kills (v2 `memory.events`, v1 `memory.oom_control`)."""

    folder: Path
    limit: int
    oom_counter: Path


def memory_cgroup(root: Path = CGROUP, pid: int | None = None) -> MemoryCgroup | None:
    """The memory cgroup at `root` as a container sees it (runc mounts the container's own
    cgroup there: v2 `memory.max`, v1 `memory/memory.limit_in_bytes`) when it has a limit;
    None without one ("max", or v1's number near 2^63: a host's root cgroup). With `pid`,
    only a cgroup whose `cgroup.procs` lists that process."""
    for folder, limit, counter in ((root, "memory.max", "memory.events"),
                                   (root / "memory", "memory.limit_in_bytes", "memory.oom_control")):
        try:
            cap = (folder / limit).read_text().strip()
            procs = (folder / "cgroup.procs").read_text().split() if pid is not None else []
        except OSError:
            continue
        if pid is not None and str(pid) not in procs:
            continue
        if cap != "max" and cap.isdigit() and int(cap) < UNLIMITED:
            return MemoryCgroup(folder, int(cap), folder / counter)
    return None


def engine_workers(spec: CampaignSpec) -> int:
    """The engine worker processes a run of `spec` keeps alive at once (judge/assess.py's
    Slot): per slot (`spec.workers`) a program worker (generation and references), the
    interpreter's when it is a reference, and one per CPU target; one per accelerator
    platform, shared by the slots (worker/devices.py). They share the container's memory
    limit ($XLA_SENTINEL_ENGINE_WORKERS)."""
    exclusive = devices.exclusive_platforms()
    kinds = [devices.process_kind(t.platform, exclusive) for t in spec.targets]
    per_slot = 1 + ("interpreter" in spec.references) + kinds.count("per_slot")
    owners = {t.platform for t, kind in zip(spec.targets, kinds, strict=True) if kind == "device_owner"}
    return spec.workers * per_slot + len(owners)


def recycle_threshold(limit: int | None, workers: int) -> int:
    """The bound on a worker's own memory: RECYCLE_SHARE of the container's memory limit
    divided over its `workers` engine worker processes, never above RECYCLE_CAP (nor 0);
    RECYCLE_CAP without a limit."""
    if limit is None:
        return RECYCLE_CAP
    return max(1, min(RECYCLE_CAP, int(limit * RECYCLE_SHARE) // max(1, workers)))


def recycle_bytes(environ: Mapping[str, str] | None = None, root: Path = CGROUP) -> int:
    """This worker's bound: $XLA_SENTINEL_RECYCLE_RSS_BYTES when set, else
    recycle_threshold of the cgroup at `root` over $XLA_SENTINEL_ENGINE_WORKERS (1 unset)."""
    env = os.environ if environ is None else environ
    if env.get(RECYCLE_ENV):
        return int(env[RECYCLE_ENV])
    cgroup = memory_cgroup(root)
    return recycle_threshold(cgroup.limit if cgroup else None, int(env.get(WORKERS_ENV) or 1))


def own_bytes(rss: int) -> int:
    """This process's own memory (resident, shared with no other process); `rss` itself
    where /proc/self/smaps_rollup cannot be read (before Linux 4.14): never less."""
    try:
        text = Path("/proc/self/smaps_rollup").read_text()
    except OSError:
        return rss
    own = 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("Private_Clean", "Private_Dirty"):
            own += int(value.split()[0]) * 1024
    return own
