"""Multi-host groups: programs that span host processes, driven in lockstep (docs/spmd.md,
"Programs that span hosts").

A campaign with `accelerator.hosts: N` (N > 1) runs its partitioned programs once more
on N host processes of D devices each (D = generator.devices / N): the same module,
partitioned over the same N x D devices, now with collectives between processes. Locally
the engine starts the N processes itself (worker/host.py) on loopback, host 0's
jax.distributed coordinator on an ephemeral port, and sends every host the same request
in the same order; the hosts compile and run together, host 0 gathers the outputs (the
coordinator's key-value store) and answers for the group.

A HostGroup has the part of a Worker's interface the campaign uses (call, start, close,
restarts, recycles): it is the worker of the layout's target (`hosts2x2`). A host lost
mid-program (killed from outside), or a run that never ends, is a WorkerHung naming the
missing host and the program's collectives: the Assessor records it as a `hang`. A host
that crashes on its own (an abort, a segfault) is a WorkerDied, a `crash`, as one process
gives for the same compiler abort. The whole group is then
killed, every process by its id, and the next request starts a fresh one.

A group's platform (Layout.platform) is `cpu` (virtual devices, gloo between the processes)
or `tpu` (a TPU slice's hosts, one per VM and pod, its chips over ICI: remote hosts only);
GroupEnv.launch composes a host process's command and environment for either.

No jax here: the coordinator imports this module (worker/host.py is the host's side).
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from xla_sentinel.worker import host_link
from xla_sentinel.worker.client import (
    STARTUP_SECONDS,
    WorkerDied,
    WorkerHung,
    add_worker_account,
    role,
)
from xla_sentinel.worker.host_link import (
    COORDINATOR_ENV,
    HOST_PLATFORMS,
    PLATFORM_ENV,
    Listener,
    RemoteHost,
    RemoteHosts,
)
from xla_sentinel.worker.protocol import Failed, Ping, Pong, Ran, Request, RequestFailed, Run

# The group a host process belongs to, in its environment (GroupEnv).
HOST_ENV = "XLA_SENTINEL_HOST"  # this host's index, 0 is the coordinator and reports
HOSTS_ENV = "XLA_SENTINEL_HOSTS"  # how many hosts
DEVICES_ENV = "XLA_SENTINEL_HOST_DEVICES"  # devices per host
HEARTBEAT_ENV = "XLA_SENTINEL_HEARTBEAT_S"
BIND_ENV = "XLA_SENTINEL_COORDINATOR_BIND"  # host 0: where its coordinator listens, if not its default
PLUGINS_ENV = "XLA_SENTINEL_HOST_PLUGINS"  # injected passes (FILE.py[:FUNC]), a JSON list

# At close, how long to wait for a remote host's supervisor to connect again (it does
# within a second of its last host process's end) to be told the campaign is done.
DONE_WAIT_S = 30.0
# jax.distributed's heartbeat timeout in a local group: a host that stops beating this
# long is declared dead by the coordinator, which then ends every other host (jax's
# "Terminating process because the JAX distributed service detected fatal errors"). Its
# default, 100 s, would hold a lost host's peers in their collective that long.
HEARTBEAT_S = 10
# After a host dies mid-program, how long past the heartbeat timeout the others get to
# answer or be ended by the coordinator before the group is judged hung: margin for the
# coordinator's error polling.
GRACE_S = 10.0
# Exits by these signals are a host's own crash (abort, segfault), not a loss from outside
# (SIGKILL: the OOM killer, an eviction, a test).
CRASH_SIGNALS = frozenset(int(s) for s in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE,
                                            signal.SIGILL, signal.SIGTRAP))
# What a host whose peer died logs when the coordination service ends it: not a crash
# of its own, a host that was waiting.
ENDED_BY_PEER = "JAX distributed service detected fatal errors"

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "collective-broadcast")
_COLLECTIVE = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*.*?\s(?P<kind>"
                         + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_EXPLICIT = re.compile(r"(?:replica_groups|source_target_pairs)=\{((?:\{[\d,\s]*\},?\s*)*)\}")
_IOTA = re.compile(r"replica_groups=\[(?P<shape>[\d,]+)\]<=\[(?P<dims>[\d,]+)\](?:T\((?P<perm>[\d,]+)\))?")
_MESH = re.compile(r"replica_groups=mesh\[(?P<axes>[^\]]*)\]"
                   r"(?:,\s*device_ids=\((?P<ids>\[[\d,]+\](?:T\([\d,]+\))?|[\d,\s]+)\))?\s*\{(?P<over>[^}]*)\}")
_IOTA_IDS = re.compile(r"\[(?P<dims>[\d,]+)\](?:T\((?P<perm>[\d,]+)\))?")


class HostMissing(RuntimeError):
    """A host did not take its part in a program (worker/host.py, host 0's gather)."""

    def __init__(self, host: int, message: str) -> None:
        self.host = host
        super().__init__(message)


@dataclass(frozen=True)
class Layout:
    """How a program's devices are spread over processes: `hosts` x `devices_per_host`,
    on `platform`'s devices (host_link.HOST_PLATFORMS: virtual CPU devices, or a TPU
    slice's chips, one process per VM)."""

    hosts: int
    devices_per_host: int
    platform: str = "cpu"

    @property
    def name(self) -> str:
        """The configuration's name, the process layout: `hosts2x2` is 2 CPU processes of 2
        devices, `slice2x4` a TPU slice's 2 hosts of 4 chips each."""
        stem = "slice" if self.platform == "tpu" else "hosts"
        return f"{stem}{self.hosts}x{self.devices_per_host}"

    @property
    def devices(self) -> int:
        return self.hosts * self.devices_per_host

    def describe(self) -> str:
        if self.platform == "tpu":
            return f"{self.hosts} TPU hosts x {self.devices_per_host} chips"
        return f"{self.hosts} processes x {self.devices_per_host} devices"

    @classmethod
    def from_name(cls, name: str) -> Layout | None:
        """The layout a target is named for (`hosts2x2`, `slice2x4`), None for any other
        target's name (a finding's target says which layout it ran on)."""
        m = _LAYOUT_NAME.fullmatch(name)
        if m is None:
            return None
        return cls(int(m["hosts"]), int(m["per_host"]), "tpu" if m["stem"] == "slice" else "cpu")


_LAYOUT_NAME = re.compile(r"(?P<stem>hosts|slice)(?P<hosts>[1-9][0-9]*)x(?P<per_host>[1-9][0-9]*)")


@dataclass(frozen=True)
class GroupEnv:
    """A host process's view of its group (what HostGroup puts in its environment)."""

    host: int
    hosts: int
    coordinator: str
    devices_per_host: int
    heartbeat_s: int = HEARTBEAT_S
    plugins: tuple[str, ...] = ()
    # Host 0's coordinator bind address ("" = jax's default, every interface on the
    # coordinator's port); a pod binds 0.0.0.0 (a pod network may have no IPv6).
    bind: str = ""
    # Where the host runs (host_link.HOST_PLATFORMS): the CPU's virtual devices, or a TPU
    # slice's chips.
    platform: str = "cpu"

    def environment(self) -> dict[str, str]:
        """The group's variables (the host's own environment: launch)."""
        env = {HOST_ENV: str(self.host), HOSTS_ENV: str(self.hosts), COORDINATOR_ENV: self.coordinator,
               DEVICES_ENV: str(self.devices_per_host), HEARTBEAT_ENV: str(self.heartbeat_s),
               PLUGINS_ENV: json.dumps(list(self.plugins)), BIND_ENV: self.bind}
        if self.platform != "cpu":
            # Absent on the CPU: a CPU group's environment stays what it was.
            env[PLATFORM_ENV] = self.platform
        return env

    def launch(self, base: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """The host process's command and whole environment, `base` under it (the driver's
        or its pod's): host_link.host_environment for this group's platform. Pure."""
        return host_link.host_command(), host_link.host_environment(
            self.platform, base, self.environment(), self.devices_per_host)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> GroupEnv:
        plugins = tuple(str(p) for p in json.loads(environ.get(PLUGINS_ENV) or "[]"))
        platform = environ.get(PLATFORM_ENV) or "cpu"
        if platform not in HOST_PLATFORMS:
            raise ValueError(f"{PLATFORM_ENV}={platform!r}: not one of {', '.join(HOST_PLATFORMS)}")
        return cls(int(environ[HOST_ENV]), int(environ[HOSTS_ENV]), environ[COORDINATOR_ENV],
                   int(environ[DEVICES_ENV]), int(environ.get(HEARTBEAT_ENV, HEARTBEAT_S)), plugins,
                   environ.get(BIND_ENV, ""), platform)


def group_devices(devices: Sequence[tuple[int, int]], hosts: int, per_host: int) -> list[int]:
    """The ids of a group's devices out of every device of the processes (`(id,
    process_index)` in jax.devices() order): each process's first `per_host`, in that
    order. A TPU host has all its VM's chips (4 or 8), a layout may use fewer of them;
    on the CPU each process has exactly `per_host` (its forced virtual count), so all.
    ValueError when the processes are not `hosts` or one has fewer than `per_host`."""
    by_process: dict[int, list[int]] = {}
    for device_id, process in devices:
        by_process.setdefault(process, []).append(device_id)
    if sorted(by_process) != list(range(hosts)):
        raise ValueError(f"the group's devices belong to processes {sorted(by_process)}, "
                         f"expected 0..{hosts - 1}")
    short = {p: len(ids) for p, ids in by_process.items() if len(ids) < per_host}
    if short:
        p = min(short)
        raise ValueError(f"process {p} has {short[p]} devices, the layout needs {per_host} per host")
    chosen = {i for ids in by_process.values() for i in ids[:per_host]}
    return [device_id for device_id, _ in devices if device_id in chosen]


def _groups(line: str, partitions: int) -> list[list[int]] | None:
    """The device groups of one collective's HLO line (partition ids), None where its
    form is not one of these (explicit, iota, mesh)."""
    m = _EXPLICIT.search(line)
    if m:
        groups = [[int(x) for x in g.split(",") if x.strip()] for g in re.findall(r"\{([\d,\s]*)\}", m.group(1))]
        return [g for g in groups if g] or [list(range(partitions))]
    m = _IOTA.search(line)
    if m:
        shape = [int(x) for x in m["shape"].split(",")]
        dims = [int(x) for x in m["dims"].split(",")]
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        if m["perm"]:
            ids = ids.transpose([int(x) for x in m["perm"].split(",")])
        return [list(map(int, g)) for g in ids.reshape(shape[0], -1)]
    m = _MESH.search(line)
    if m:
        axes = re.findall(r"'(\w+)'=(\d+)", m["axes"])
        names, sizes = [a for a, _ in axes], [int(s) for _, s in axes]
        over = re.findall(r"'(\w+)'", m["over"])
        if not names or any(o not in names for o in over):
            return None
        ids = _mesh_ids(m["ids"], int(np.prod(sizes))).reshape(sizes)
        rest = [i for i, a in enumerate(names) if a not in over]
        chosen = [names.index(o) for o in over]
        width = int(np.prod([sizes[i] for i in chosen])) if chosen else 1
        return [list(map(int, g)) for g in ids.transpose(rest + chosen).reshape(-1, width)]
    return None


def _mesh_ids(ids: str | None, n: int) -> np.ndarray:
    """The device ids of a mesh-form group in mesh order: iota `[dims]T(perm)`, an
    explicit list, or 0..n-1 where the line gives none."""
    if not ids:
        return np.arange(n)
    m = _IOTA_IDS.fullmatch(ids.strip())
    if m is None:
        return np.array([int(x) for x in ids.split(",") if x.strip()])
    dims = [int(x) for x in m["dims"].split(",")]
    grid = np.arange(int(np.prod(dims))).reshape(dims)
    if m["perm"]:
        grid = grid.transpose([int(x) for x in m["perm"].split(",")])
    return grid.reshape(-1)


def collectives(hlo: str, partition_host: Sequence[int]) -> list[dict[str, Any]]:
    """The collectives of an optimized HLO module: name, kind, and whether one of its
    groups holds partitions of two hosts (`crosses`: None where its groups' form is not
    read here, which counts as crossing for the campaign's share)."""
    found = []
    for line in hlo.splitlines():
        m = _COLLECTIVE.match(line)
        if not m:
            continue
        groups = _groups(line, len(partition_host))
        crosses = None if groups is None else any(
            len({partition_host[p] for p in g if p < len(partition_host)}) > 1 for g in groups)
        found.append({"name": m["name"], "kind": m["kind"], "crosses": crosses})
    return found


def crosses_hosts(found: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a program's collectives (collectives()) move data between hosts."""
    return any(c["crosses"] is not False for c in found)


def diverged(stages: Mapping[int, Sequence[Mapping[str, Any]]]) -> str:
    """Where the hosts compiled different collectives (a host whose module lacks one its
    peers wait in): `; host 1 compiled without all-reduce.4 (all-reduce)`; "" where they agree."""
    every = {(c["name"], c["kind"]) for found in stages.values() for c in found}
    lines = []
    for host in sorted(stages):
        mine = {(c["name"], c["kind"]) for c in stages[host]}
        if every - mine:
            lacks = ", ".join(f"{name} ({kind})" for name, kind in sorted(every - mine))
            lines.append(f"; host {host} compiled without {lacks}")
    return "".join(lines)


def _free_port() -> int:
    """An ephemeral loopback port for the coordinator (released here, bound by host 0:
    another process may take it in between, which fails the start and is retried)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Process:
    """One host of the group's current generation: a local process (popen, frames over
    its pipes, its log a file here) or a remote one (a supervisor's TCP connection in
    another pod, worker/host_link.py; its exit and log tail come in its exit frame)."""

    host: int
    popen: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    log_start: int = 0
    remote: RemoteHost | None = None

    def poll(self) -> int | None:
        if self.popen is not None:
            return self.popen.poll()
        assert self.remote is not None
        return self.remote.exitcode

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        assert self.remote is not None
        return not self.remote.ended.is_set()

    def wait(self, timeout: float) -> None:
        if self.popen is not None:
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        else:
            assert self.remote is not None
            self.remote.ended.wait(timeout)

    def write(self, data: bytes) -> None:
        if self.remote is not None:
            self.remote.send(data)
            return
        assert self.popen is not None and self.popen.stdin is not None
        try:
            self.popen.stdin.write(data)
            self.popen.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: its stdout's end says so

    def close_input(self) -> None:
        if self.popen is not None and self.popen.stdin is not None:
            try:
                self.popen.stdin.close()
            except OSError:
                pass

    def kill(self) -> None:
        if self.remote is not None:
            self.remote.kill()
        elif self.popen is not None and self.popen.poll() is None:
            self.popen.kill()

    def reap(self) -> None:
        """Wait for a killed local process and close its pipes."""
        if self.popen is None:
            return
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.popen.stdin, self.popen.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def log_text(self, last: int | None = None) -> str:
        """This generation's log (its last `last` bytes)."""
        if self.remote is not None:
            return self.remote.log_tail[-last:] if last else self.remote.log_tail
        assert self.log is not None
        try:
            with open(self.log, "rb") as f:
                end = f.seek(0, 2)
                f.seek(max(self.log_start, end - last) if last else self.log_start)
                return f.read().decode(errors="replace")
        except OSError:
            return ""


@dataclass
class HostGroup:
    """The N host processes of a layout, driven as one worker (module docstring)."""

    layout: Layout
    plugins: Sequence[str] = ()
    logs: Path | None = None
    name: str = ""
    heartbeat_s: int = HEARTBEAT_S
    # Hosts 1..N-1 in other pods (the cluster's group): None runs every host here.
    remote: RemoteHosts | None = None
    # Called when a remote host's pod is gone (its connection ended without an exit):
    # not the program's doing, the slice is restarting; the campaign stops (the program
    # in flight is redone on resume) instead of recording a hang.
    on_lost: Callable[[], None] | None = None
    restarts: int = 0
    recycles: int = 0
    # Programs run, and those whose optimized module moves data between hosts.
    programs: int = 0
    cross_host_programs: int = 0
    _procs: list[_Process] = field(default_factory=list, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _events: queue.Queue[tuple[int, int, dict[str, Any] | None]] = field(default_factory=queue.Queue, repr=False)
    _generation: int = 0
    _seq: int = 0
    _ready: bool = False
    _closed: bool = False
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)
    _listener: Listener | None = field(default=None, repr=False)
    _slice_lost: bool = False  # a remote host's pod went: the slice restarts, nobody to tell

    def __post_init__(self) -> None:
        self.name = self.name or self.layout.name
        if self.layout.platform != "cpu" and self.remote is None:
            # Its hosts are the slice's VMs, each process owning its VM's chips: they
            # cannot all run here on loopback.
            raise ValueError(f"{self.name}: a {self.layout.platform} group's hosts run in their "
                             "own pods (remote hosts), not on loopback")
        if self.remote is not None:
            self._listener = Listener(self.remote.listen, self.layout.hosts, self.remote.token)

    @property
    def listen_port(self) -> int | None:
        """The port remote hosts connect to (None without remote hosts)."""
        return self._listener.port if self._listener is not None else None

    @property
    def log_path(self) -> Path | None:
        return self._log_dir() / f"{self.name}-host0.log"

    def _log_dir(self) -> Path:
        if self.logs is not None:
            return self.logs
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="xla-sentinel-hosts-")
        return Path(self._tmp.name)

    def pids(self) -> list[int]:
        """The live group's local process ids (tests check none is left behind)."""
        return [p.popen.pid for p in self._procs if p.popen is not None]

    def start(self) -> None:
        with self._lock:
            if self._procs and all(p.alive() for p in self._procs):
                return
            gone = [p.host for p in self._procs if p.popen is None and self._pod_gone(p.host)]
            if gone and self.on_lost is not None:
                # A remote host's pod went between two programs: no group can form
                # until the slice restarts (JobSet restarts it whole); stop, not wait.
                self._kill()
                self.restarts += 1
                self._slice_lost = True
                self.on_lost()
                raise WorkerHung(f"{self.name}: host {gone[0]}'s pod is gone (its connection ended "
                                 "without an exit); the slice restarts")
            self._kill()
            self._slice_lost = False  # a new generation: its hosts came back (a test's group)
            self._generation += 1
            if self.remote is None:
                coordinator, bind = f"127.0.0.1:{_free_port()}", ""
            else:
                coordinator, bind = self.remote.coordinator, self.remote.bind
            for h in range(self.layout.hosts):
                group = GroupEnv(h, self.layout.hosts, coordinator, self.layout.devices_per_host,
                                 self.heartbeat_s, tuple(self.plugins), bind if h == 0 else "",
                                 self.layout.platform)
                if self.remote is not None and h > 0:
                    remote = RemoteHost(h)
                    self._procs.append(_Process(h, remote=remote))
                    start = {"generation": self._generation, "devices": self.layout.devices_per_host,
                             "env": group.environment()}
                    threading.Thread(target=self._read_remote, args=(self._generation, remote, start),
                                     daemon=True).start()
                    continue
                log = self._log_dir() / f"{self.name}-host{h}.log"
                argv, env = group.launch(os.environ)
                with open(log, "ab") as f:
                    begin = f.tell()
                    popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=f, env=env)
                proc = _Process(h, popen, log, begin)
                self._procs.append(proc)
                assert popen.stdout is not None
                threading.Thread(target=self._read, args=(self._generation, h, popen.stdout),
                                 daemon=True).start()
            self._ready = False

    def _read(self, generation: int, host: int, out: IO[bytes],
              remote: RemoteHost | None = None) -> None:
        """One host's frames into the event queue; None when its stream closes (it died,
        or its connection ended)."""
        try:
            while (data := host_link.read_raw(out)) is not None:
                frame = pickle.loads(data)
                if remote is not None and remote.frame(frame):
                    continue  # its exit, kept for _fail
                if "cpu" in frame:
                    # The host process's CPU by stage (host.py), in the campaign's account
                    # as a worker's (bench/throughput.py); spent even in a stale generation.
                    add_worker_account(role(self.name), frame.pop("cpu"))
                self._events.put((generation, host, frame))
        except (OSError, ValueError, pickle.UnpicklingError, EOFError):
            pass
        if remote is not None:
            remote.ended.set()
        self._events.put((generation, host, None))

    def _read_remote(self, generation: int, remote: RemoteHost, start: dict[str, Any]) -> None:
        """A remote host of this generation: its supervisor's connection taken from the
        listener (STARTUP_SECONDS at most), sent the group's start, then read as a pipe."""
        assert self._listener is not None
        conn = self._listener.take(remote.host, STARTUP_SECONDS, remote.killed)
        stream = remote.attach(conn, start) if conn is not None else None
        if stream is None:
            remote.ended.set()
            self._events.put((generation, remote.host, None))
            return
        self._read(generation, remote.host, stream, remote)

    def _send(self, frame: dict[str, Any] | None) -> None:
        data = host_link.encode(frame)
        for p in self._procs:
            p.write(data)

    def call(self, request: Request[Any], timeout: float) -> Any:
        """Ping: wait until every host has joined; Run: the program on the whole group."""
        with self._lock:
            if self._closed:
                raise WorkerDied(None, f"{self.name}: closed")
            self.start()
            started = time.perf_counter()
            if not self._ready:
                # Starting is not the program's time (as for a worker: client.STARTUP_SECONDS):
                # a fresh group after a hang imports jax and joins again, seconds under load.
                ready = {h: "ready" for h in range(self.layout.hosts)}
                try:
                    self._wait(ready, max(timeout, STARTUP_SECONDS), "start")
                except WorkerDied:
                    # Once more on a fresh port: another process may have bound the
                    # coordinator's between _free_port and host 0's bind.
                    self.start()
                    self._wait(ready, max(timeout, STARTUP_SECONDS), "start")
                self._ready = True
                started = time.perf_counter()
            if isinstance(request, Ping):
                return Pong()
            if not isinstance(request, Run):
                # A failed request, as a worker answers what it cannot do: the bisector asks
                # its target for pass lists and fusions alone, which a group does not serve.
                raise RequestFailed(Failed(f"ValueError: {self.name} serves ping and run, "
                                           f"not {type(request).__name__}", ""))
            if not isinstance(request.module, str):
                raise RequestFailed(Failed("ValueError: a multi-host run takes StableHLO text", ""))
            self._seq += 1 << 41  # room for a request's repeat (host.py)
            self._send({"seq": self._seq, "module": request.module, "inputs": list(request.inputs),
                        "options": dict(request.options), "repeat": request.repeat})
            replies = self._wait({h: "reply" for h in range(self.layout.hosts)}, timeout, "run")
            busy = time.perf_counter() - started
            failed = [replies[h] for h in sorted(replies) if "failed" in replies[h]]
            if failed:
                raise RequestFailed(Failed(failed[0]["failed"], failed[0].get("traceback", ""), busy_s=busy))
            body = replies[0]["reply"]
            self.programs += 1
            self.cross_host_programs += crosses_hosts(body["collectives"])
            # busy_s: the group's wall time on it (host 0's share of jax/XLA is not told apart).
            return Ran(outputs=body["outputs"], compile_s=body["compile_s"], run_s=body["run_s"],
                       again=body["again"], busy_s=time.perf_counter() - started)

    def _wait(self, want: dict[int, str], timeout: float, what: str) -> dict[int, dict[str, Any]]:
        """Each host's answer (a `ready` or a `reply`/`failed` frame); WorkerHung or
        WorkerDied, the group killed, when they do not all come."""
        deadline = time.monotonic() + timeout
        answers: dict[int, dict[str, Any]] = {}
        dead: dict[int, int | None] = {}
        first_death: int | None = None
        stages: dict[int, list[dict[str, Any]]] = {}
        while len(answers) + len(dead) < len(want):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                generation, host, frame = self._events.get(timeout=left)
            except queue.Empty:
                break
            if generation != self._generation or host in answers or host in dead:
                continue
            if frame is None:
                p = self._procs[host]
                p.wait(self.heartbeat_s)
                dead[host] = p.poll()
                if first_death is None:
                    first_death = host
                    # The others are waiting for it: they answer (an error), are ended by
                    # the coordinator, or are hung; not longer than the grace.
                    deadline = min(deadline, time.monotonic() + self.heartbeat_s + GRACE_S)
                continue
            if "stage" in frame:
                stages[host] = frame["collectives"]
                continue
            if want[host] == "ready" and "ready" in frame or want[host] == "reply" and (
                    "reply" in frame or "failed" in frame):
                answers[host] = frame
        if len(answers) == len(want):
            return answers
        self._fail(answers, dead, first_death, stages, timeout, what)
        raise AssertionError("unreachable")

    def _ended_by_peer(self, host: int) -> bool:
        return ENDED_BY_PEER in self._procs[host].log_text()

    def _tail(self, host: int) -> str:
        return self._procs[host].log_text(4000)

    def _say_done(self, told: set[int]) -> None:
        """Tell the remote hosts not sent the group's end (no generation was running: the
        last one failed) that the campaign is done, so their pods complete instead of
        waiting for a driver that is gone (and failing the slice's Job)."""
        assert self._listener is not None
        for h in range(1, self.layout.hosts):
            if h in told:
                continue
            conn = self._listener.take(h, DONE_WAIT_S)
            if conn is not None:
                host_link.say_done(conn)

    def _pod_gone(self, host: int) -> bool:
        """A remote host whose connection ended without its supervisor's exit frame."""
        remote = self._procs[host].remote
        return remote is not None and remote.ended.is_set() and remote.exitcode is None

    def _fail(self, answers: dict[int, dict[str, Any]], dead: dict[int, int | None], first_death: int | None,
              stages: dict[int, list[dict[str, Any]]], timeout: float, what: str) -> None:
        """Raise the group's failure, once every process is gone."""
        hosts = range(self.layout.hosts)
        # A host ended by the coordination service was waiting for a dead peer: not lost itself.
        lost = [h for h in dead if not self._ended_by_peer(h)]
        # Waiting: alive without an answer, ended by the coordinator, or failed in the
        # collective when gloo saw the peer's connection close.
        waiting = [h for h in hosts if h not in lost and "reply" not in answers.get(h, {})]
        why = {h: answers[h]["failed"].splitlines()[0][:300] for h in waiting if "failed" in answers.get(h, {})}
        tails = {h: self._tail(h) for h in hosts}
        codes = {h: self._procs[h].poll() for h in hosts}
        gone = [h for h in lost if self._pod_gone(h)]
        self._kill()
        if gone and self.on_lost is not None:
            # Before raising: the Assessor reads the stop it sets and records no finding.
            self._slice_lost = True
            self.on_lost()
        self.restarts += 1
        seen = next((stages[h] for h in sorted(stages)), [])
        named = ", ".join(f"{c['name']} ({c['kind']}{', across hosts' if c['crosses'] else ''})"
                          for c in seen) or "none compiled yet"
        named += diverged(stages)
        if lost and not waiting:
            # Every host died on its own: a crash of the program, as a worker's.
            raise WorkerDied(codes[lost[0]], f"{self.name}: every host exited ({codes}); host {lost[0]}'s log:\n"
                             + tails[lost[0]])
        crashed = [h for h in lost if (code := codes[h]) is not None and -code in CRASH_SIGNALS]
        if crashed:
            # A host that aborted on its own (XLA's CHECK, a segfault) crashed the program:
            # the same verdict one process gives, so the finding signs with it (a clean
            # 2-host run had host 0 abort in the SPMD partitioner's HandlePad while host 1
            # still compiled; a `hang` there named no collective and matched no known bug).
            h = crashed[0]
            raise WorkerDied(codes[h], f"{self.name}: host {h} crashed (exit {codes[h]}) while hosts {waiting} "
                             f"waited; the program's collectives: {named}; host {h}'s log:\n" + tails[h])
        if lost:
            exits = ", ".join(f"host {h} (exit {codes[h]})" for h in lost)
            failed = "".join(f"; host {h} failed: {line}" for h, line in why.items())
            raise WorkerHung(f"{self.name}: {exits} lost mid-{what}; hosts {waiting} waited for it "
                             f"in the program's collectives: {named}{failed}; the group is restarted")
        answered = f"hosts {sorted(answers)} answered" if answers else "none answered"
        raise WorkerHung(f"{self.name}: no answer within {timeout:.0f} s from hosts {waiting} "
                         f"(every host alive, {answered}: a collective that never completes); "
                         f"the program's collectives: {named}; the group is restarted")

    def _kill(self) -> None:
        """Every local process of the group killed by its id and waited for; every remote
        host's connection ended (its supervisor ends its process and connects again)."""
        for p in self._procs:
            p.kill()
        for p in self._procs:
            p.reap()
        self._procs = []
        self._ready = False

    def close(self) -> None:
        """Let the hosts leave jax.distributed together (a None frame), then kill what
        remains. A group in the middle of a call (closed from another thread, as a campaign
        does when it stops) is killed at once: the call sees its hosts die and ends."""
        self._closed = True
        if not self._lock.acquire(blocking=False):
            for p in list(self._procs):
                p.kill()
            if self._listener is not None:
                self._listener.close()
            return
        try:
            told: set[int] = set()
            if self._procs and all(p.alive() for p in self._procs):
                # A remote host's supervisor reads the None frame as the group's end: its
                # host leaves, and it exits 0 (its pod completes).
                self._send(None)
                for p in self._procs:
                    p.close_input()
                deadline = time.monotonic() + 5
                for p in self._procs:
                    p.wait(max(0.1, deadline - time.monotonic()))
                told = {p.host for p in self._procs if p.remote is not None}
            self._kill()
            if self._listener is not None:
                if not self._slice_lost:
                    self._say_done(told)
                self._listener.close()
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None
        finally:
            self._lock.release()

