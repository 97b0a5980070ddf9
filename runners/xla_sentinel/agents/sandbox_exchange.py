"""Agent code in a container of its own: the agent pod's `sandbox` container runs
`xla-sentinel sandbox-server`, and the `runtime` container (the agent, its MCP server, the
model's key, the ServiceAccount token) hands it each command over a unix socket in an
emptyDir both mount (docs/agents.md, "The sandbox container").

Why a socket and not request files: the sandbox container runs agent code as the server's
own uid, so nothing there can be kept from agent code by file modes. A request file queued
in a shared folder could be rewritten by the code of the run before it (a reproducer's
argv replaced by `exit 0`, a forged gate outcome); a request and its answer on one
connection cannot. The server takes one connection at a time, and in its own container
(`--own-container`) kills every other process of the container before and after each run,
so no agent code outlives its run to meddle with the next (or to rebind the socket: the
server checks that the socket is still its own after each run).

The client (`Sandbox.argv` of kind "container": `python -m xla_sentinel.agents.sandbox_exchange`)
stands in for the command in the caller's process tree: it prints the command's output and
exits with its status, so `gate.run_script` and `Workbench._load_confined` treat it as the
command itself. The sandbox container sees the runtime's files only through the emptyDir:
the client copies a run's folder (and the read-only folders it names, such as a pass
plugin's) into `<exchange>/mirror/<id>/` unless it is under a path both containers share
(the image's own folders, the exchange, $XLA_SENTINEL_SANDBOX_SHARED such as the artifacts
volume, read-only on the sandbox side), rewrites the command's paths to the copies, and
copies a writable folder back after the run. The runtime's OUT (the claims ledger, the
agent's transcripts) is never visible to the sandbox.

On the sandbox side each run gets its process group killed at its time limit (or when the
client goes away: the caller's own timeout), output kept to OUTPUT_LIMIT bytes per stream.
Where the container may make namespaces (`Sandbox.detect`: bubblewrap, else unshare) the
command also runs under the local sandbox, with no network; where it may not (a pod under
the RuntimeDefault seccomp profile with no capabilities refuses unshare), the command runs
under a seccomp filter of its own that refuses every socket but a unix one (netfilter.py:
the pod's containers share one network, which the runtime needs). The server says which in
every answer (`confinement`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xla_sentinel.agents import netfilter

# Re-exported for the operator's agent pod.
from xla_sentinel.agents.sandbox import SOCKET_ENV as SOCKET_ENV

SHARED_ENV = "XLA_SENTINEL_SANDBOX_SHARED"  # ':'-separated folders both containers see alike
WAIT_ENV = "XLA_SENTINEL_SANDBOX_WAIT"  # seconds the client waits for the server to listen
OUTPUT_LIMIT = 256 * 1024  # bytes of stdout and of stderr an answer keeps (the tail)
GRACE_SECONDS = 1.0  # past a run's own limit: the caller's timeout (subprocess.run) fires first
EXIT_UNREACHABLE = 125  # the client could not get an answer (no server, connection lost)


class ExchangeError(RuntimeError):
    pass


# --- client (runtime container) -----------------------------------------------------------


def _under(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def shared_roots(exchange: Path) -> list[Path]:
    """Folders the sandbox container sees at the same path with the same content: the
    exchange, the image's own (system, interpreter, this package: one image for both
    containers) and $XLA_SENTINEL_SANDBOX_SHARED."""
    from xla_sentinel.agents.sandbox import SYSTEM, _code_paths

    extra = [Path(p) for p in os.environ.get(SHARED_ENV, "").split(":") if p]
    return [
        exchange.resolve(),
        *(Path(p) for p in SYSTEM),
        *_code_paths(),
        *(p.resolve() for p in extra),
    ]


def _copy(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
    elif source.exists():
        shutil.copy2(source, dest)


def _open_up(folder: Path) -> None:
    """A writable run folder's copy: writable by the other side's uid (the sandbox's, to
    run in it; after the run, the runtime's, to remove it). Only what this uid owns."""
    for root, _, files in os.walk(folder):
        for path in [root, *(os.path.join(root, f) for f in files)]:
            try:
                if not os.path.islink(path):
                    os.chmod(path, 0o777 if os.path.isdir(path) else 0o666)
            except OSError:
                pass


def _rewrite(value: str, mapping: dict[str, str]) -> str:
    for old in sorted(mapping, key=len, reverse=True):
        if value == old or value.startswith(old + "/") or value.startswith(old + ":"):
            return mapping[old] + value[len(old) :]
    return value


def request(
    socket_path: Path,
    argv: Sequence[str],
    work: Path,
    *,
    writable: bool = True,
    readonly: Sequence[Path] = (),
    env: dict[str, str] | None = None,
    seconds: float | None = None,
    wait: float | None = None,
) -> dict[str, Any]:
    """Run `argv` in the sandbox container (the server at `socket_path`) as Sandbox.argv
    would run it here: its answer {exit, stdout, stderr, timedOut, confinement}."""
    from xla_sentinel.agents.sandbox import ENV_KEEP

    exchange = socket_path.parent
    roots = shared_roots(exchange)
    run_id = uuid.uuid4().hex
    mirror = exchange / "mirror" / run_id
    mapping: dict[str, str] = {}
    work = work.resolve()
    for path in [work, *(Path(p).resolve() for p in readonly)]:
        if not _under(path, roots) and str(path) not in mapping:
            copy = mirror / path.relative_to(path.anchor)
            _copy(path, copy)
            mapping[str(path)] = str(copy)
    if str(work) in mapping and writable:
        _open_up(Path(mapping[str(work)]))
    environment = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    environment.update(env or {})
    message = {
        "argv": [_rewrite(a, mapping) for a in argv],
        "work": _rewrite(str(work), mapping),
        "writable": writable,
        "readonly": [_rewrite(str(Path(p).resolve()), mapping) for p in readonly],
        "env": {k: _rewrite(v, mapping) for k, v in environment.items()},
        "seconds": seconds,
    }
    try:
        answer = _exchange(socket_path, message, wait)
        if writable and str(work) in mapping:
            _copy(Path(mapping[str(work)]), work)
        return answer
    finally:
        shutil.rmtree(mirror, ignore_errors=True)


def _exchange(socket_path: Path, message: dict[str, Any], wait: float | None) -> dict[str, Any]:
    deadline = time.monotonic() + (float(os.environ.get(WAIT_ENV, "60")) if wait is None else wait)
    while True:  # the sandbox container may still be starting
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(socket_path))
            break
        except OSError as e:
            conn.close()
            if time.monotonic() >= deadline:
                raise ExchangeError(f"no sandbox server at {socket_path}: {e}") from None
            time.sleep(0.2)
    with conn, conn.makefile("rwb") as f:
        f.write(json.dumps(message).encode() + b"\n")
        f.flush()
        line = f.readline()
    if not line:
        raise ExchangeError(
            f"the sandbox server at {socket_path} closed the connection without an answer"
        )
    answer: dict[str, Any] = json.loads(line)
    return answer


def client_main(args: list[str]) -> int:
    """`python -m xla_sentinel.agents.sandbox_exchange --socket S --work W [--readonly-work]
    [--ro P]... [--env K=V]... [--seconds N] -- ARGV...`: the command's output and exit."""
    split = args.index("--")
    opts, command = args[:split], args[split + 1 :]
    sock, work, writable, seconds = "", "", True, None
    readonly: list[Path] = []
    env: dict[str, str] = {}
    i = 0
    while i < len(opts):
        if opts[i] == "--readonly-work":
            writable, i = False, i + 1
            continue
        key, value = opts[i], opts[i + 1]
        if key == "--socket":
            sock = value
        elif key == "--work":
            work = value
        elif key == "--ro":
            readonly.append(Path(value))
        elif key == "--env":
            name, _, val = value.partition("=")
            env[name] = val
        elif key == "--seconds":
            seconds = float(value)
        i += 2
    try:
        answer = request(
            Path(sock),
            command,
            Path(work),
            writable=writable,
            readonly=readonly,
            env=env,
            seconds=seconds,
        )
    except (ExchangeError, OSError) as e:
        print(f"xla-sentinel sandbox: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    sys.stdout.write(answer.get("stdout", ""))
    sys.stderr.write(answer.get("stderr", ""))
    if answer.get("timedOut"):
        print(
            f"xla-sentinel sandbox: killed at its limit of {answer.get('seconds')} s",
            file=sys.stderr,
        )
    sys.stdout.flush()
    sys.stderr.flush()
    code = int(answer.get("exit", EXIT_UNREACHABLE))
    if code < 0:  # killed by a signal there: die of it here, as the command would have
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be handled anyway
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


# --- server (sandbox container) -----------------------------------------------------------


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - OUTPUT_LIMIT))
        data = f.read()
    return data.decode(errors="replace")


def _ancestors() -> set[int]:
    pids, pid = {os.getpid()}, os.getpid()
    while pid > 1:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            break
        pid = int(fields[1])
        pids.add(pid)
    return pids


def reap_container() -> list[int]:
    """Kill every process of this container but the server and its ancestors (its PID
    namespace is the container's: what else lives is agent code that left its process
    group, a daemon started by a snippet). The pids killed."""
    keep, killed = _ancestors(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in keep:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    # As the container's PID 1 the server inherits what it killed: collect them (called
    # only while no run of its own is in flight, so no run's status is taken here).
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if not any(_alive_child(p) for p in killed):
                break
            time.sleep(0.01)
    return killed


def _alive_child(pid: int) -> bool:
    """Whether `pid` still exists and is not yet collected (a zombie counts: not collected)."""
    return Path(f"/proc/{pid}").exists()


class Server:
    """One run at a time, each in a process group of its own killed at its limit."""

    def __init__(
        self,
        socket_path: Path,
        *,
        max_seconds: float = 900.0,
        own_container: bool = False,
        confine: bool = True,
    ) -> None:
        from xla_sentinel.agents.sandbox import Sandbox, SandboxError

        # Its own confinement is the local one: never a hand-over to itself.
        os.environ.pop(SOCKET_ENV, None)
        self.socket_path = socket_path
        self.max_seconds = max_seconds
        self.own_container = own_container
        self.local: Sandbox | None = None
        self.netfilter = False
        self.confinement = "none: not asked (--no-confine)"
        if confine:
            try:
                self.local = Sandbox.detect()
                self.confinement = self.local.kind
            except SandboxError as e:
                self.confinement = f"none: {e}"
                if netfilter.supported():
                    # No namespace here, and the pod's network is the runtime's too: each
                    # run narrows itself to unix sockets instead (agents/netfilter.py).
                    self.netfilter = True
                    self.confinement = f"{netfilter.DESCRIPTION} (no namespaces: {e})"
        self.scratch = Path(tempfile.mkdtemp(prefix="sandbox-server-"))
        self.listener: socket.socket | None = None
        self.inode = 0

    def bind(self) -> None:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        # The runtime's uid is another than ours: it may connect, and remove mirrors' files.
        os.chmod(self.socket_path, 0o777)
        listener.listen(16)
        self.listener, self.inode = listener, os.stat(self.socket_path).st_ino

    def still_ours(self) -> bool:
        try:
            st = os.stat(self.socket_path)
        except OSError:
            return False
        return stat.S_ISSOCK(st.st_mode) and st.st_ino == self.inode

    def serve_forever(self, stop: Any = None) -> None:
        # The kubelet stops the sidecar with SIGTERM once the runtime is done, and a
        # container's PID 1 (this process: the image's entrypoint is the CLI itself) ignores
        # it without a handler: the pod would wait out its grace period.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        self.bind()
        assert self.listener is not None
        print(
            f"xla-sentinel sandbox-server: listening on {self.socket_path}; confinement: {self.confinement}",
            file=sys.stderr,
            flush=True,
        )
        while stop is None or not stop.is_set():
            ready, _, _ = select.select([self.listener], [], [], 0.5)
            if not ready:
                continue
            conn, _ = self.listener.accept()
            with conn:
                self.handle(conn)
            if not self.still_ours():  # agent code replaced the socket: take it back
                self.listener.close()
                self.bind()

    def handle(self, conn: socket.socket) -> None:
        f = conn.makefile("rb")
        line = f.readline()
        if not line:
            return
        try:
            answer = self.run(json.loads(line), conn)
        except (ValueError, KeyError, TypeError, OSError) as e:
            answer = {
                "exit": EXIT_UNREACHABLE,
                "stdout": "",
                "stderr": f"sandbox-server: bad request: {e}\n",
                "timedOut": False,
                "confinement": self.confinement,
            }
        try:
            conn.sendall(json.dumps(answer).encode() + b"\n")
        except OSError:
            pass  # the client is gone (its caller's timeout)

    def run(self, req: dict[str, Any], conn: socket.socket | None = None) -> dict[str, Any]:
        from xla_sentinel.agents.sandbox import _env

        argv = [str(a) for a in req["argv"]]
        work = Path(req["work"])
        requested = req.get("seconds")
        seconds = (
            min(self.max_seconds, float(requested) + GRACE_SECONDS)
            if requested
            else self.max_seconds
        )
        env = {str(k): str(v) for k, v in (req.get("env") or {}).items()}
        if self.local is not None:
            argv = self.local.argv(
                argv,
                work,
                writable=bool(req.get("writable", True)),
                readonly=[Path(p) for p in req.get("readonly") or []],
                env=env,
            )
        environment = _env(env, work)  # a cleared environment, as the local sandbox gives
        if self.own_container:
            reap_container()
        out, err = self.scratch / "stdout", self.scratch / "stderr"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen(
                argv,
                cwd=work,
                env=environment,
                stdout=o,
                stderr=e,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=netfilter.deny_network if self.netfilter else None,
            )
        timed_out = self._wait(proc, seconds, conn)
        try:  # the group's other members, whether or not its leader is gone
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.own_container:
            reap_container()
        if req.get("writable", True):
            _open_up(work)  # what the run made there: the runtime (another uid) removes it after
        return {
            "exit": proc.returncode,
            "stdout": _tail(out),
            "stderr": _tail(err),
            "timedOut": timed_out,
            "seconds": seconds,
            "confinement": self.confinement,
        }

    @staticmethod
    def _wait(proc: subprocess.Popen[bytes], seconds: float, conn: socket.socket | None) -> bool:
        """Wait for the run; True when it was killed at its limit or its client left."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                proc.wait(timeout=0.05)
                return False
            except subprocess.TimeoutExpired:
                pass
            gone = False
            if conn is not None:
                readable, _, _ = select.select([conn], [], [], 0)
                gone = bool(readable) and not conn.recv(1, socket.MSG_PEEK)
            if gone or time.monotonic() >= deadline:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                return True


if __name__ == "__main__":
    sys.exit(client_main(sys.argv[1:]))
