"""The driver <-> host link of a multi-host group: one framing for pipes and TCP, the
listener the driver accepts remote hosts on, and the host supervisor a remote host's pod
runs (docs/spmd.md, "Programs that span hosts").

Frames are `<u64 little-endian length><pickle>`, the same on a local host's pipes and on a
remote host's TCP connection, so worker/host.py serves both unchanged: a remote host's
supervisor (serve_remote) starts it with pipes and relays its frames to and from the
driver's connection. Two frames exist only on TCP:

- the hello, the first frame a supervisor sends: JSON, not pickle (it is read before the
  peer is known), `{"host": k, "token": T}`; the driver drops a connection whose token is
  not the group's (a pod of an earlier restart of the slice, anything else on the port);
- the exit frame, the supervisor's last: `{"exited": returncode, "log": tail}` once its host
  process ended. A connection that ends without one is a host whose pod is gone (killed,
  evicted, its node lost): the driver tells that apart from the host's own crash.

Pickle is accepted from the driver's port: only a slice's own pods can reach it (the
chart's NetworkPolicy admits a slice's peers, docs/operator.md), and the hello is checked
first. No jax here.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

# host:port of host 0's jax.distributed coordinator, in a host process's environment
# (worker/hosts.py's HostGroup sets it; declared here, which hosts.py imports, not the reverse)
COORDINATOR_ENV = "XLA_SENTINEL_COORDINATOR"

HEAD = struct.Struct("<Q")
# A hello larger than this is not a supervisor's; a start frame (the group's environment,
# plugin paths included) is allowed more.
HELLO_MAX = 4096
START_MAX = 1 << 20
# The driver's port on host 0's pod (beside jax.distributed's coordinator, 8482).
DRIVER_PORT = 8483
# How long a supervisor keeps trying to reach its driver (host 0's pod starting, a new
# group after a restart) before its pod gives up and fails: the slice then restarts.
CONNECT_S = 600.0
# What a supervisor keeps of its host's log for the exit frame.
TAIL_BYTES = 4000


class LinkError(RuntimeError):
    """A malformed frame or hello on a driver <-> host link."""


def encode(frame: Any) -> bytes:
    data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
    return HEAD.pack(len(data)) + data


def read_raw(stream: IO[bytes]) -> bytes | None:
    """One frame's payload, None at the end of the stream (or a stream cut mid-frame)."""
    head = stream.read(HEAD.size)
    if len(head) < HEAD.size:
        return None
    (size,) = HEAD.unpack(head)
    data = stream.read(size)
    return data if len(data) == size else None


def write_frame(stream: IO[bytes], frame: Any, lock: threading.Lock | None = None) -> None:
    data = encode(frame)
    if lock is None:
        stream.write(data)
        stream.flush()
        return
    with lock:
        stream.write(data)
        stream.flush()


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (the host may be a DNS name or [v6]); ValueError naming what is wrong."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{address!r} is not host:port")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class RemoteHosts:
    """Where a group's hosts 1..N-1 live in other pods (the cluster's multi-host group):
    the driver accepts their supervisors on `listen`; host 0 (a local process beside the
    driver) binds jax.distributed's coordinator on `bind`, and every host reaches it at
    `coordinator` (host 0's pod's DNS name and the coordinator port); `token` is the
    slice's (hello)."""

    listen: str
    coordinator: str
    bind: str
    token: str = ""

    def environment(self) -> dict[str, str]:
        return {REMOTE_ENV: json.dumps({"listen": self.listen, "coordinator": self.coordinator,
                                        "bind": self.bind, "token": self.token})}

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> RemoteHosts | None:
        text = environ.get(REMOTE_ENV)
        if not text:
            return None
        try:
            d = json.loads(text)
            remote = cls(str(d["listen"]), str(d["coordinator"]), str(d["bind"]), str(d.get("token", "")))
            for address in (remote.listen, remote.coordinator, remote.bind):
                split_address(address)
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{REMOTE_ENV}: {e}") from None
        return remote


# Set by a host 0 pod's entry (cluster/pod.py) for the engine's HostGroup.
REMOTE_ENV = "XLA_SENTINEL_REMOTE_HOSTS"


class Listener:
    """The driver's side: accepts supervisors, checks their hello, and holds each host's
    newest connection until the group takes it (take)."""

    def __init__(self, address: str, hosts: int, token: str) -> None:
        host, port = split_address(address)
        self.hosts = hosts
        self.token = token
        self._sock = socket.create_server((host, port), family=socket.AF_INET, reuse_port=False)
        self._sock.settimeout(0.5)
        self.port = int(self._sock.getsockname()[1])
        self._waiting: dict[int, socket.socket] = {}
        self._cond = threading.Condition()
        self._closed = False
        self.refused: list[str] = []
        threading.Thread(target=self._accept, daemon=True, name="host-listener").start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._hello, args=(conn, peer), daemon=True).start()

    def _hello(self, conn: socket.socket, peer: Any) -> None:
        conn.settimeout(10)
        try:
            hello = _read_hello(conn)
            host = hello.get("host")
            if not isinstance(host, int) or not 0 < host < self.hosts:
                raise LinkError(f"host {host!r} is not one of 1..{self.hosts - 1}")
            if hello.get("token", "") != self.token:
                raise LinkError("the slice token differs (a pod of another slice or restart)")
        except (OSError, LinkError, ValueError) as e:
            self.refused.append(f"{peer}: {e}")
            conn.close()
            return
        conn.settimeout(None)
        with self._cond:
            older = self._waiting.pop(host, None)
            self._waiting[host] = conn
            self._cond.notify_all()
        if older is not None:
            older.close()  # its supervisor has reconnected since: the old one is stale

    def take(self, host: int, timeout: float, cancelled: threading.Event | None = None,
             ) -> socket.socket | None:
        """Host `host`'s newest connection, waiting up to `timeout`; None if none came
        (or `cancelled` was set: the generation that wanted it was killed)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while host not in self._waiting:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed or (cancelled is not None and cancelled.is_set()):
                    return None
                self._cond.wait(min(left, 0.5))
            return self._waiting.pop(host)

    def close(self) -> None:
        self._closed = True
        self._sock.close()
        with self._cond:
            for conn in self._waiting.values():
                conn.close()
            self._waiting.clear()
            self._cond.notify_all()


def _read_hello(conn: socket.socket, limit: int = HELLO_MAX) -> dict[str, Any]:
    head = _recv_exact(conn, HEAD.size)
    (size,) = HEAD.unpack(head)
    if size > limit:
        raise LinkError(f"a hello of {size} bytes")
    value = json.loads(_recv_exact(conn, size))
    if not isinstance(value, dict):
        raise LinkError("the hello is not an object")
    return value


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise LinkError("the connection closed mid-frame")
        data += chunk
    return data


def _json_frame(value: dict[str, Any]) -> bytes:
    data = json.dumps(value).encode()
    return HEAD.pack(len(data)) + data


def say_done(conn: socket.socket) -> None:
    """Tell a supervisor, instead of a start frame, that the campaign is done (it exits 0)."""
    try:
        conn.sendall(_json_frame({"done": True}))
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


class RemoteHost:
    """The driver's handle on one remote host for one generation of the group: its
    connection, the exit its supervisor reported (exitcode), and its log's tail."""

    def __init__(self, host: int) -> None:
        self.host = host
        self.conn: socket.socket | None = None
        self.exitcode: int | None = None
        self.log_tail = ""
        self.ended = threading.Event()  # the connection is over (or never came)
        self._lock = threading.Lock()
        self.killed = threading.Event()

    def attach(self, conn: socket.socket, start: dict[str, Any]) -> IO[bytes] | None:
        """Use `conn` and send it the group's start frame; the stream to read frames from,
        None if the group was killed meanwhile."""
        with self._lock:
            if self.killed.is_set():
                conn.close()
                return None
            self.conn = conn
        try:
            conn.sendall(_json_frame(start))
        except OSError:
            return None
        return conn.makefile("rb")

    def send(self, data: bytes) -> None:
        conn = self.conn
        if conn is None:
            return  # not connected yet: its start waits for `ready`, nothing is lost
        try:
            conn.sendall(data)
        except OSError:
            pass  # gone: its reader's end says so

    def frame(self, frame: Any) -> bool:
        """A frame from the connection: True when it is the exit frame (kept here)."""
        if isinstance(frame, dict) and "exited" in frame:
            code = frame["exited"]
            self.exitcode = int(code) if isinstance(code, int) else None
            self.log_tail = str(frame.get("log", ""))
            return True
        return False

    def kill(self) -> None:
        """End the connection: the supervisor ends its host process and reconnects."""
        with self._lock:
            self.killed.set()
            conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


# The supervisor: a remote host's pod.

def _connect(driver: str, hello: dict[str, Any], until: float) -> socket.socket | None:
    host, port = split_address(driver)
    said = time.monotonic()
    while time.monotonic() < until:
        try:
            conn = socket.create_connection((host, port), timeout=5)
        except OSError as e:
            if time.monotonic() - said > 30:  # what a pod that never joins says in its log
                print(f"host {hello.get('host')}: the driver at {driver} not reached yet ({e})",
                      file=sys.stderr, flush=True)
                said = time.monotonic()
            time.sleep(0.5)  # host 0's pod not up yet, its name not resolving yet
            continue
        conn.settimeout(None)
        try:
            conn.sendall(_json_frame(hello))
            return conn
        except OSError:
            conn.close()
    return None


def _start_frame(conn: socket.socket) -> dict[str, Any] | None:
    try:
        return _read_hello(conn, START_MAX)
    except (OSError, LinkError, ValueError):
        return None


def host_flags(flags: str, devices: int) -> str:
    """XLA_FLAGS with this host's virtual device count in place of any other."""
    return " ".join([*_unforced(flags), f"--xla_force_host_platform_device_count={devices}"])


def _unforced(flags: str) -> list[str]:
    """XLA_FLAGS' flags less any virtual CPU device count."""
    return [f for f in flags.split() if not f.startswith("--xla_force_host_platform_device_count")]


# Where a group's host processes run (GroupEnv.platform): `cpu`, virtual devices and gloo
# between the processes (locally, and a CPU or GPU campaign's pods), or `tpu`, a TPU slice's
# chips, one host process per VM, collectives over ICI (libtpu's own).
HOST_PLATFORMS = ("cpu", "tpu")
# The platform in a host process's environment: absent is `cpu`, so the CPU group's
# environment is what it was before TPU hosts existed (and a host started by an older
# driver is a CPU host).
PLATFORM_ENV = "XLA_SENTINEL_HOST_PLATFORM"
# jax's environment twin of jax_cpu_collectives_implementation: a CPU setting, kept off a
# TPU host (host.py sets gloo itself on a CPU one).
CPU_COLLECTIVES_ENV = "JAX_CPU_COLLECTIVES_IMPLEMENTATION"


def host_environment(platform: str, base: Mapping[str, str], group: Mapping[str, str],
                     devices: int) -> dict[str, str]:
    """A host process's whole environment: `base` (its pod's, or the driver's), the
    group's variables (GroupEnv.environment) over it, and the platform's settings.

    `cpu`: JAX_PLATFORMS=cpu and XLA_FLAGS forcing `devices` virtual devices (the host's
    share of the layout); host.py adds gloo. `tpu`: JAX_PLATFORMS=tpu (a host that has no
    TPU fails at its start rather than running the layout on its CPU), no forced device
    count, no CPU collectives setting; libtpu reads the slice from GKE's variables
    (TPU_WORKER_ID, TPU_WORKER_HOSTNAMES) in `base`. Pure: no process is started here."""
    if platform not in HOST_PLATFORMS:
        raise ValueError(f"host platform {platform!r}: not one of {', '.join(HOST_PLATFORMS)}")
    env = {**base, **group}
    if platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
        env["XLA_FLAGS"] = host_flags(env.get("XLA_FLAGS", ""), devices)
        return env
    env["JAX_PLATFORMS"] = "tpu"
    env.pop(CPU_COLLECTIVES_ENV, None)
    flags = _unforced(env.get("XLA_FLAGS", ""))
    if flags:
        env["XLA_FLAGS"] = " ".join(flags)
    else:
        env.pop("XLA_FLAGS", None)
    return env


def host_command() -> list[str]:
    return [sys.executable, "-m", "xla_sentinel.worker.host"]


def _relay_in(conn: socket.socket, child: subprocess.Popen[bytes], bye: threading.Event) -> None:
    """Driver -> host frames; a None frame (the group closing) is remembered. At the
    connection's end the host's stdin is closed, which ends it at once (host.py)."""
    stream = conn.makefile("rb")
    assert child.stdin is not None
    none = encode(None)
    try:
        while (data := read_raw(stream)) is not None:
            frame = HEAD.pack(len(data)) + data
            if frame == none:
                bye.set()
            child.stdin.write(frame)
            child.stdin.flush()
    except (OSError, ValueError):
        pass
    try:
        child.stdin.close()
    except OSError:
        pass


def coordinator_by_address(env: dict[str, str], driver_host: str, peer_ip: str) -> dict[str, str]:
    """`env` with the coordinator named by the address this supervisor reached the driver
    at, where both name host 0's pod: its DNS name was resolved once, by the system's
    resolver (search domains included), and jax's gRPC client need not resolve it again."""
    coordinator = env.get(COORDINATOR_ENV, "")
    if not coordinator:
        return env
    host, port = split_address(coordinator)
    if host != driver_host:
        return env
    return {**env, COORDINATOR_ENV: f"[{peer_ip}]:{port}" if ":" in peer_ip else f"{peer_ip}:{port}"}


def _serve_once(conn: socket.socket, start: dict[str, Any], log: Path, driver_host: str,
                ) -> tuple[int | None, bool]:
    """One generation: the host process started with the group's environment, relayed
    until it ends; its exit code and whether the driver closed the group (bye)."""
    group = {str(k): str(v) for k, v in (start.get("env") or {}).items()}
    group = coordinator_by_address(group, driver_host, str(conn.getpeername()[0]))
    # The platform the driver chose for the group (absent: cpu); this pod's own
    # environment under it, GKE's TPU variables included.
    env = host_environment(group.get(PLATFORM_ENV, "cpu"), os.environ, group, int(start["devices"]))
    with open(log, "ab") as f:
        begin = f.tell()
        child = subprocess.Popen(host_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=f, env=env)
    bye = threading.Event()
    threading.Thread(target=_relay_in, args=(conn, child, bye), daemon=True).start()
    assert child.stdout is not None
    try:
        while chunk := os.read(child.stdout.fileno(), 1 << 16):
            conn.sendall(chunk)
    except OSError:
        pass  # the driver is gone: the relay's end closes the host's stdin
    except BaseException:
        child.kill()  # the pod is stopping (SIGTERM): no host left behind
        child.wait()
        raise
    try:
        code = child.wait(30)
    except subprocess.TimeoutExpired:
        child.kill()
        code = child.wait()
    tail = _tail(log, begin)
    sys.stderr.write(tail[-1500:])
    try:
        conn.sendall(encode({"exited": code, "log": tail}))
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()
    return code, bye.is_set()


def _tail(log: Path, begin: int) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(max(begin, f.seek(0, 2) - TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def serve_remote(driver: str, host: int, token: str = "", connect_s: float = CONNECT_S,
                 log_dir: Path | None = None) -> int:
    """A remote host's pod: connect to the driver, start a host process for each group
    generation the driver starts (a fresh one after every failure: jax.distributed
    initializes once per process), relay its frames. Returns 0 once the driver closed
    the group and the host left cleanly, 1 when the driver cannot be reached for
    `connect_s` (its pod gone for good: the slice must restart)."""
    split_address(driver)  # a bad address fails at once, not after connect_s
    if threading.current_thread() is threading.main_thread():
        # A container's PID 1 ignores SIGTERM without a handler: the pod would wait out
        # its grace period. Stopping, it ends its host process and exits 143.
        signal.signal(signal.SIGTERM, _terminated)
    folder = log_dir or Path(tempfile.gettempdir())
    log = folder / f"xla-sentinel-host{host}.log"
    while True:
        conn = _connect(driver, {"host": host, "token": token}, time.monotonic() + connect_s)
        if conn is None:
            print(f"host {host}: the driver at {driver} was not reachable for {connect_s:.0f} s",
                  file=sys.stderr, flush=True)
            return 1
        start = _start_frame(conn)
        if start is None:
            conn.close()  # refused, or a stale connection the driver closed: again
            time.sleep(0.2)
            continue
        if start.get("done"):
            conn.close()
            print(f"host {host}: the driver at {driver} is done", file=sys.stderr, flush=True)
            return 0
        print(f"host {host}: generation {start.get('generation')} of the group at {driver}",
              file=sys.stderr, flush=True)
        code, bye = _serve_once(conn, start, log, split_address(driver)[0])
        if bye and code == 0:
            return 0
