"""The worker process: its loop, and the handler table it serves (worker/registry.py).

Runs inside the worker only (imports jax and every handler); the coordinator reaches it
through client.py, across a process boundary. A worker of the current jaxlib serves the
whole table; a worker under another jaxlib (client.py's bootstrap, `foreign`) imports and
serves only the handlers registered for the other release.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xla_sentinel.core import cpu_account
from xla_sentinel.worker import devices, memory, registry
from xla_sentinel.worker.protocol import (
    Answer,
    Failed,
    GraphReference,
    ModuleReference,
    NumpyReference,
    Ping,
    Pong,
    Reply,
    Request,
    Run,
)

# The handler modules of each release; importing one registers its handlers.
HANDLER_MODULES: dict[registry.Release, tuple[str, ...]] = {
    "current": ("xla_sentinel.worker.handlers", "xla_sentinel.worker.bisect_handlers",
                "xla_sentinel.worker.portable_handlers"),
    "other": ("xla_sentinel.worker.portable_handlers",),
}


@registry.handles(Ping, releases=registry.RELEASES)
def ping(req: Ping) -> Pong:
    return Pong()


def load_table(release: registry.Release) -> dict[type[Request[Any]], Callable[[Any], Reply]]:
    """Import the handler modules of `release` and return what it serves."""
    for name in HANDLER_MODULES[release]:
        importlib.import_module(name)
    return registry.table(release)


def handle(table: dict[type[Request[Any]], Callable[[Any], Reply]], request: Request[Any]) -> Reply:
    """Serve one request by its class."""
    fn = table.get(type(request))
    if fn is None:
        raise ValueError(f"this worker does not serve {type(request).__name__}")
    return fn(request)


def request_stage(request: Request[Any]) -> str:
    """The CPU account's stage of serving `request` (core/cpu_account.py): a target's run,
    each reference by its kind, else the request's name."""
    if isinstance(request, Run):
        return "target"
    if isinstance(request, GraphReference | ModuleReference):
        return f"reference:{request.kind}"
    if isinstance(request, NumpyReference):
        return "reference:f64_numpy"
    return request.cmd


# A worker that evaluates many programs op by op grows by about 20 MB a program (compiled
# primitives are never given back, not even by jax.clear_caches()); past its bound
# (worker/memory.py: a share of the container's memory limit, 1.5 GB at most) it finishes
# its request, says so, and exits, and the next request starts a fresh one.
# Virtual host devices every worker has, so that any SPMD program (campaign.MAX_DEVICES)
# runs in any worker; a one-device module still compiles for the first device alone.
HOST_DEVICES = 8


def _host_device_flags(flags: str) -> str:
    """XLA_FLAGS with HOST_DEVICES virtual CPU devices, unless it already sets a count."""
    if "--xla_force_host_platform_device_count" in flags:
        return flags
    return f"{flags} --xla_force_host_platform_device_count={HOST_DEVICES}".strip()


def _name_process() -> None:
    """Name this process after its worker (slot3-programs, owner-tpu; the kernel keeps 15
    bytes) so that ps and top in a pod, and tests/devices counting device owners, tell
    the workers apart; every forked worker is otherwise `python`."""
    import ctypes
    import multiprocessing

    name = multiprocessing.current_process().name
    if not name.startswith("xla-sentinel-"):  # a worker under another interpreter (client._BOOTSTRAP)
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(15, ctypes.c_char_p(name.removeprefix("xla-sentinel-").encode()[:15]), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):  # not Linux: the name is cosmetic
        pass


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _grown_past(bound: int) -> bool:
    """Whether this worker's own memory (memory.own_bytes) is past `bound`; smaps is read
    only when the resident size, its upper bound, is past it too."""
    rss = _rss_bytes()
    return rss > bound and memory.own_bytes(rss) > bound


def serve(conn: Any, plugins: Sequence[str], log_path: str | None, foreign: bool = False,
          platform: str | None = None, cgroup_root: Path = memory.CGROUP) -> None:
    """The worker's loop: serve requests from `conn` until it closes or sends None, each
    failure of a handler a `Failed` reply; exit after a reply once grown past its bound
    (memory.recycle_bytes of the cgroup at `cgroup_root`; the client starts a fresh worker
    for the next request)."""
    # Ctrl-C reaches the whole process group. The coordinator stops and closes its
    # workers itself; a worker dying of the signal first would be judged a crash.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cpu_account.use_process_clock()
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
    # One process per host owns each accelerator (worker/devices.py): the owner gets the
    # memory settings that let it share the device, every other worker is held to the CPU.
    # Read when jax creates a backend, which no worker has before this point (zygote.py).
    owner = devices.process_kind(platform, devices.ACCELERATORS) == "device_owner"
    os.environ.update(devices.owner_environment(str(platform)) if owner else devices.held_off_environment())
    _name_process()
    # Read here, not at import: the forkserver imports this module once for every worker.
    recycle_at = memory.recycle_bytes(os.environ, cgroup_root)
    if log_path:  # the worker's log, where a recycle loop would be looked into
        print(f"xla-sentinel worker: recycles past {recycle_at} bytes of its own memory",
              file=sys.stderr, flush=True)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # Read once, when jax initializes its CPU client: it must be set before the import.
    os.environ["XLA_FLAGS"] = _host_device_flags(os.environ.get("XLA_FLAGS", ""))
    import jax

    # jax leaves Config.update unannotated: its signature, so that calls are checked.
    set_option: Callable[[str, object], None] = jax.config.update
    set_option("jax_enable_x64", True)
    # A target on an accelerator: this process alone sees the devices (every backend this
    # machine has; engine.validate leaves the target out where its own is missing). Every
    # other worker, the references' included, stays on the CPU, even in a pod whose
    # JAX_PLATFORMS names the accelerator (xla_sentinel_operator/desired.py).
    set_option("jax_platforms", "" if platform not in (None, "cpu") else "cpu")
    # Injected transformations are not part of the persistent cache key (docs/architecture.md, "Workers").
    set_option("jax_enable_compilation_cache", False)

    # A worker under another jaxlib serves the few requests that need no more of jax than
    # compiling and running a module (portable_handlers.py); the full table imports all of it.
    handlers = load_table("other" if foreign else "current")
    from xla_sentinel.xla import plugins as plugin_mod

    if plugins:
        plugin_mod.register(plugins)
    # Everything up to here is this process's start (a forked worker's clock starts at the
    # fork; the imports its forkserver did are reported apart, once per forkserver).
    account = cpu_account.ACCOUNT
    account.clear()
    account.add(cpu_account.STARTUP, time.process_time())
    account.add_all({f"{cpu_account.ZYGOTE_PREFIX}{pid}": s for pid, s in cpu_account.ZYGOTES.items()})
    while True:
        try:
            with account.stage(cpu_account.IDLE):
                conn.poll(None)
            with account.stage(cpu_account.TRANSPORT):
                request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        started = time.perf_counter()
        reply: Reply
        with account.stage(request_stage(request)):
            try:
                reply = handle(handlers, request)
            except Exception as e:  # every failure of a request is data for the oracle
                reply = Failed(f"{type(e).__name__}: {e}", traceback.format_exc(limit=8))
            reply.busy_s = time.perf_counter() - started
            recycle = _grown_past(recycle_at)
        # The answer's own pickling is counted in the next one.
        answer = Answer(reply, recycle, account.take())
        with account.stage(cpu_account.TRANSPORT):
            conn.send(answer)
        if answer.recycle:
            return


