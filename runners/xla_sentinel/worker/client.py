"""Worker processes: each target (and the references) runs in a process that may die.

A compiler abort, segfault or hang must not take the campaign down: the coordinator
talks to each worker over a pipe, bounds every request by a timeout, and turns a dead or
silent worker into a `crash` or `hang` result before starting a fresh one. Every worker
serves every request of the protocol (protocol.py, worker/registry.py), campaign and bisection
alike.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, TypeVar, overload

from xla_sentinel.core import cpu_account
from xla_sentinel.worker.protocol import (
    Answer,
    Failed,
    Ping,
    Reply,
    Request,
    RequestFailed,
    from_wire,
    to_wire,
)

# The package a worker under another interpreter loads its code from: this one, so that
# coordinator and worker speak the same protocol whatever that environment has installed
# (docs/versions.md).
PACKAGE_DIR = Path(__file__).resolve().parent.parent
# What such a worker runs first: `xla_sentinel` bound to PACKAGE_DIR (argv[1]), then the
# server loop on the inherited socket (argv[2]), with the plugins (argv[3], JSON), the
# log (argv[4]) and the platform (argv[5], "" for the CPU) of the worker. multiprocessing's
# own spawn cannot do this: it hands the child the parent's sys.path, which would import
# this environment's jax there.
_BOOTSTRAP = """
import importlib.util, json, sys
root, fd, plugins, log, platform = sys.argv[1:6]
spec = importlib.util.spec_from_file_location(
    "xla_sentinel", root + "/__init__.py", submodule_search_locations=[root])
module = importlib.util.module_from_spec(spec)
sys.modules["xla_sentinel"] = module
spec.loader.exec_module(module)
from multiprocessing.connection import Connection
from xla_sentinel.worker import server
server.serve(Connection(int(fd)), json.loads(plugins), log or None, foreign=True, platform=platform or None)
"""

R = TypeVar("R", bound=Reply)
_CTX = mp.get_context("spawn")


class _Zygote:
    """Forks workers from a process that has imported jax and the handlers already
    (multiprocessing's forkserver preloading zygote.py): a spawned worker spends about 3
    CPU-seconds importing them, and a campaign starts two workers and one per target for
    every slot, more after crashes, hangs and recycling.

    A spawned worker sees the coordinator's environment as of its start; the forkserver
    has the one it was started with. So it serves only while the environment is the same,
    is restarted with the new one once no worker forked from it is alive (a forkserver
    that exits takes its children's exit codes with it), and is bypassed (spawn) while one
    is."""

    def __init__(self) -> None:
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(["xla_sentinel.worker.zygote"])
        self.env: dict[str, str] | None = None
        # Off: every worker is spawned, as before the zygote (bench/throughput.py's baseline).
        self.enabled = True
        self.lock = threading.Lock()
        self.children: weakref.WeakSet[Any] = weakref.WeakSet()

    def _live(self) -> bool:
        return any(p.is_alive() for p in list(self.children))

    def process(self, **kwargs: Any) -> Any:
        """A started worker process: forked from the forkserver when its environment is
        this one, spawned when not."""
        with self.lock:
            env = dict(os.environ)
            proc: BaseProcess
            if not self.enabled or env != self.env:
                if not self.enabled or self.env is not None and self._live():
                    proc = _CTX.Process(**kwargs)
                    proc.start()
                    return proc
                self._stop()
                self.env = env
            proc = self.ctx.Process(**kwargs)
            proc.start()
            self.children.add(proc)
            return proc

    def _stop(self) -> None:
        from multiprocessing import forkserver

        # A private method typeshed does not list; the public API has no way to stop it.
        forkserver._forkserver._stop()  # type: ignore[attr-defined]
        self.env = None

    def release(self) -> None:
        """Stop the forkserver if no worker of it is alive (the end of a campaign): its
        memory is given back, and the CPU time of the workers it forked is counted in
        this process's RUSAGE_CHILDREN only once it has exited."""
        with self.lock:
            if not self._live():
                self._stop()


_ZYGOTE = _Zygote()


def release_workers() -> None:
    """Give back what worker start-up keeps between campaigns (_Zygote.release)."""
    _ZYGOTE.release()
def role(name: str) -> str:
    """What a worker does, from its name: slot3-programs and slot0-programs are both
    `programs`, slot1-O0 is `O0` (a target's worker), validate-cpu stays itself."""
    head, _, rest = name.partition("-")
    return rest if head.startswith("slot") and head[4:].isdigit() and rest else name


def add_worker_account(worker_role: str, cpu: dict[str, float]) -> None:
    """Add a worker's answer's CPU stages to the coordinator's sum (core/cpu_account.py),
    each under `role:stage`; a forkserver's imports once, by its pid."""
    own = {}
    for name, seconds in cpu.items():
        if name.startswith(cpu_account.ZYGOTE_PREFIX):
            cpu_account.ZYGOTES[int(name.removeprefix(cpu_account.ZYGOTE_PREFIX))] = seconds
        else:
            own[name] = seconds
    cpu_account.WORKERS.add_all(own, f"{worker_role}:")


class WorkerDied(RuntimeError):
    """The worker process exited while handling a request (crash)."""

    def __init__(self, exitcode: int | None, log_tail: str) -> None:
        self.exitcode = exitcode
        self.log_tail = log_tail
        sig = ""
        if exitcode is not None and exitcode < 0:
            sig = f" ({signal.Signals(-exitcode).name})"
        super().__init__(f"worker exited with code {exitcode}{sig}")


class NoInterpreter(RuntimeError):
    """A worker's interpreter (another environment's) is not there: bad input, no verdict."""


class WorkerHung(RuntimeError):
    """The worker did not answer within the timeout (hang); it has been killed."""


def _serve_in_child(*args: Any) -> None:
    """The worker process's entry: the server loop (worker/server.py), imported there by
    name. The coordinator starts the process and never imports the server itself, which
    imports jax and every handler; the process is the boundary between the two."""
    importlib.import_module("xla_sentinel.worker.server").serve(*args)


class _Foreign:
    """A worker process under another interpreter, with the part of multiprocessing's
    Process interface the Worker uses (exitcode < 0: killed by that signal, as there)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()


def _start_foreign(python: str, plugins: Sequence[str], log: str | None,
                   platform: str | None = None) -> tuple[_Foreign, Any]:
    """Start a worker under the interpreter `python`; its process and our end of the pipe."""
    from multiprocessing.connection import Connection

    if not os.access(python, os.X_OK):
        raise NoInterpreter(f"{python}: no such interpreter (or not executable)")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # this environment's packages must not leak in
        log_file = open(log, "ab") if log else None  # noqa: SIM115
        stderr = subprocess.DEVNULL if log_file is None else log_file
        try:
            popen = subprocess.Popen(
                [python, "-c", _BOOTSTRAP, str(PACKAGE_DIR), str(theirs.fileno()),
                 json.dumps(list(plugins)), "", platform or ""],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=stderr, stderr=stderr, env=env)
        finally:
            if log_file is not None:
                log_file.close()
        return _Foreign(popen), Connection(ours.detach())


@dataclass
class Worker:
    """A restartable worker process. `plugins` are registered only in this process.
    `python`: the interpreter of another environment to run it under (another jaxlib;
    such a worker serves portable.HANDLERS only), None for this one. `platform`: the
    accelerator (gpu, tpu) a target of this worker runs on; None or cpu: the CPU only."""

    name: str
    plugins: Sequence[str] = ()
    log_path: Path | None = None
    python: str | None = None
    platform: str | None = None
    _proc: Any = field(default=None, repr=False)
    _conn: Any = field(default=None, repr=False)
    restarts: int = 0
    recycles: int = 0
    _busy: bool = field(default=False, repr=False)
    # How long a dead or killed process is waited for before the next one starts.
    exit_wait: float = 5.0

    def start(self) -> None:
        log = str(self.log_path) if self.log_path else None
        if self.python is not None:
            self._proc, self._conn = _start_foreign(self.python, self.plugins, log, self.platform)
            return
        parent, child = _CTX.Pipe()
        self._proc = _ZYGOTE.process(target=_serve_in_child, args=(child, tuple(self.plugins), log, False, self.platform),
                                     daemon=True, name=f"xla-sentinel-{self.name}")
        child.close()
        self._conn = parent

    def _log_tail(self) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4000))
            return f.read().decode(errors="replace")

    @overload
    def call(self, request: Request[R], timeout: float) -> R: ...
    @overload
    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any]: ...

    def call(self, request: Request[Any] | dict[str, Any], timeout: float) -> Any:
        """The worker's reply to `request`; raises RequestFailed when its handler raised,
        WorkerHung or WorkerDied when it did not answer. A dict request (the JSON form,
        protocol.from_wire) gets the JSON form of the reply back, failures included."""
        if isinstance(request, dict):
            try:
                return to_wire(self.call(from_wire(request), timeout))
            except RequestFailed as e:
                return to_wire(Failed(e.error, e.traceback, busy_s=e.busy_s))
        reply = self._exchange(request, timeout)
        if isinstance(reply, Failed):
            raise RequestFailed(reply)
        return reply

    def _exchange(self, request: Request[Any], timeout: float) -> Reply:
        if self._proc is None or not self._proc.is_alive():
            self.start()
        # Local references: close() from another thread may clear the attributes meanwhile.
        proc, conn = self._proc, self._conn
        self._busy = True
        account = cpu_account.ACCOUNT
        try:
            with account.stage(cpu_account.TRANSPORT):
                conn.send(request)
            with account.stage(cpu_account.IDLE):
                answered = conn.poll(timeout)
            if not answered:
                self.kill()
                self.restarts += 1
                raise WorkerHung(f"{self.name}: no answer within {timeout:.0f} s")
            with account.stage(cpu_account.TRANSPORT):
                answer: Answer = conn.recv()
            add_worker_account(role(self.name), answer.cpu)
            if answer.recycle:
                proc.join(30)
                self._proc = None
                self.recycles += 1
            return answer.reply
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            proc.join(self.exit_wait)
            tail = self._log_tail()
            self._proc = None
            self.restarts += 1
            raise WorkerDied(proc.exitcode, tail) from None
        finally:
            self._busy = False

    def kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(self.exit_wait)
            self._proc = None

    def close(self) -> None:
        # A worker in the middle of a call (closed from another thread, as a campaign does
        # when it stops) is killed: a polite None would share the pipe with a request
        # being sent, and block while the worker computes.
        if self._proc is not None and self._proc.is_alive() and not self._busy:
            try:
                self._conn.send(None)
                self._proc.join(2)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


class DeviceOwner(Worker):
    """The one worker per host that owns an accelerator platform (worker/devices.py), shared
    by every slot: a slot's request waits for the ones before it and is then served alone
    (one program at a time on the device; waiting is not part of the request's timeout).
    A crash or hang is the verdict of the request that was running, as for any worker, and
    the next request starts a fresh owner, once the dead one has exited: its device (TPU
    chips, GPU memory) is given back only then."""

    def __init__(self, name: str, plugins: Sequence[str] = (), log_path: Path | None = None,
                 python: str | None = None, platform: str | None = None) -> None:
        super().__init__(name, plugins, log_path, python, platform, exit_wait=30.0)
        self._queue = threading.RLock()  # start() runs inside _exchange too
        self._closed = False

    def start(self) -> None:
        # Several slots hand it to wait_ready: one process, started once.
        with self._queue:
            if self._proc is None or not self._proc.is_alive():
                super().start()

    def _exchange(self, request: Request[Any], timeout: float) -> Reply:
        with self._queue:
            if self._closed:
                # Closed (the campaign stops) while this request waited: starting a fresh
                # owner would leave a process nothing closes.
                raise WorkerDied(None, f"{self.name}: closed")
            return super()._exchange(request, timeout)

    def close(self) -> None:
        self._closed = True
        super().close()


def distinct(workers: Sequence[Worker]) -> list[Worker]:
    """Each worker once, in order: slots share their device owners."""
    return list({id(w): w for w in workers}.values())


# How long a new worker may take to import jax and answer: starting is not a program's
# hang, and on a loaded 2-core machine (load 10, niced) an import took over 120 s.
STARTUP_SECONDS = 600.0


class WorkerStartError(RuntimeError):
    """A worker did not start (it died or did not answer): nothing was judged yet."""


def wait_ready(workers: Sequence[Worker], timeout: float = STARTUP_SECONDS) -> None:
    """Start every worker and wait until each has imported jax (pings in parallel);
    WorkerStartError naming the worker, and its log's last lines, when one does not."""
    workers = distinct(workers)
    for w in workers:
        w.start()
    deadline = time.monotonic() + timeout
    for w in workers:
        try:
            w.call(Ping(), max(1.0, deadline - time.monotonic()))
        except (WorkerHung, WorkerDied) as e:
            tail = e.log_tail if isinstance(e, WorkerDied) else ""
            where = f" (log: {w.log_path})" if w.log_path else ""
            raise WorkerStartError(f"worker {w.name} did not start: {e}{where}"
                                   + (f"; its log ends: {tail.strip()[-300:]}" if tail.strip() else "")) from None
