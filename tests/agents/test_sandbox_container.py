"""The agent pod's sandbox container, as processes: `xla-sentinel sandbox-server` on a unix
socket, and the MCP server's Workbench handing it agent code through `Sandbox.detect()`
(kind "container", chosen by $XLA_SENTINEL_SANDBOX_SOCKET as in an agent pod).

What a process cannot show here: the container boundary itself (another uid, no token
volume, a read-only root), which the pod spec carries (tests/k8s/test_agent_sandbox_pure.py).
What it does show: the request path end to end (a snippet loaded and judged, a reproducer
telling its cure, the run folder copied across and back, the caller's OUT never handed
over); the sandbox side's own limits (a run's process group killed at its limit, or when
its caller gives up; a daemon that left its group killed after the run); and, where the
server's side may make namespaces (unshare here), the same confinement as the local
sandbox: the probe snippet of test_sandbox.py reaches nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_fixtures import REGRESSION, SHIFT
from test_sandbox import PROBE
from xla_sentinel.agents.gate import Cure
from xla_sentinel.agents.sandbox import Sandbox, SandboxError
from xla_sentinel.agents.sandbox_exchange import SOCKET_ENV
from xla_sentinel.agents.tools import Workbench

SERVER = [sys.executable, "-m", "xla_sentinel.cli.entry", "sandbox-server"]


def _pid_namespace() -> list[str]:
    """unshare's flags for a PID namespace of its own, as a container has."""
    return [
        "unshare",
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",
        *([] if os.geteuid() == 0 else ["--user", "--map-root-user"]),
    ]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    procs: list[tuple[subprocess.Popen[bytes], bool]] = []

    def start(*flags: str, prefix: list[str] | None = None) -> Path:
        sock = tmp_path / "exchange" / "sandbox.sock"
        sock.parent.mkdir(exist_ok=True)
        env = {**os.environ, "SOME_API_KEY": "sk-server-side"}  # never handed to a run
        log = open(tmp_path / "server.log", "wb")
        procs.append(
            (
                subprocess.Popen(
                    [*(prefix or []), *SERVER, "--socket", str(sock), *flags],
                    env=env,
                    stdout=log,
                    stderr=log,
                ),
                bool(prefix),
            )
        )
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert procs[-1][0].poll() is None, (tmp_path / "server.log").read_text()
            assert time.monotonic() < deadline, "the server never listened"
            time.sleep(0.1)
        return sock

    start.procs = procs  # type: ignore[attr-defined]
    yield start
    for p, unshared in procs:
        # unshare passes no SIGTERM on; killed, its --kill-child kills the server.
        p.kill() if unshared else p.terminate()
        p.wait(30)


@pytest.fixture(scope="module")
def can_confine() -> None:
    try:
        Sandbox.detect()
    except SandboxError as e:
        pytest.skip(str(e))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _dies(pid: int, within: float = 20) -> bool:
    """Whether process `pid` is gone within `within` seconds (far less than the 300 s its
    run would sleep)."""
    deadline = time.monotonic() + within
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def test_agent_code_goes_to_the_sandbox_container_and_reaches_nothing(
    tmp_path: Path,
    start_server: Callable[..., Path],
    listener: int,
    can_confine: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sock = start_server()
    monkeypatch.setenv(SOCKET_ENV, str(sock))
    monkeypatch.setenv("SOME_API_KEY", "sk-runtime-side")
    sandbox = Sandbox.detect()
    assert sandbox == Sandbox("container", str(sock))
    bench = Workbench(None, tmp_path / "out", sandbox=sandbox)
    token = tmp_path / "token"
    token.write_text("sk-agent-must-not-read")
    store = bench.out / "campaign.sqlite"
    store.write_bytes(b"SQLite format 3\0")
    try:
        result = bench.run_test(PROBE.format(port=listener, token=str(token), store=str(store)))
        assert "SEEN environ:clean env:clean socket:refused token:denied" in str(
            result.get("error")
        ), result
        assert store.read_bytes() == b"SQLite format 3\0"
        # A snippet loads (in the server's run, in a copy of its folder) and is judged here.
        judged = bench.run_test(
            "import jax.numpy as jnp\nINPUTS = [('f32', (4, 3))]\n"
            "def f(x):\n    return jnp.tanh(x).sum(0)\n"
        )
        assert judged["status"] == "judged" and judged["failing"] == [], judged
        assert (Path(judged["program"]) / "module.mlir").is_file()
    finally:
        bench.close()
    # Every copy handed over is gone after its run; OUT itself never was under the exchange.
    assert not any((sock.parent / "mirror").rglob("*.py"))


def test_a_reproducer_runs_in_the_sandbox_container_and_still_tells_its_cure(
    tmp_path: Path, start_server: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's reproducer runs (a corpus script, its cure in XLA_FLAGS) through the
    server; here without the server's own namespaces (--no-confine: a pod's case where
    the kernel refuses them), so the answer's path is the one a pod takes."""
    monkeypatch.setenv(
        "XLA_SENTINEL_OUTCOMES", str(tmp_path / "outcomes.sqlite")
    )  # run, not remembered
    monkeypatch.setenv(SOCKET_ENV, str(start_server("--no-confine")))
    bench = Workbench(
        None,
        tmp_path / "out",
        regression=[Path(REGRESSION[1])],
        min_regression=1,
        sandbox=Sandbox.detect(),
    )
    try:
        tried = bench.try_cure(str(SHIFT), Cure(disable_passes=("algsimp",)))
    finally:
        bench.close()
    assert tried["verified_fix"], tried["reason"]
    assert tried["reproducer"] == {"affected": "bug", "under_cure": "clean"}


def test_a_run_is_killed_with_its_process_group_at_its_limit_or_when_its_caller_leaves(
    tmp_path: Path, start_server: Callable[..., Path]
) -> None:
    sandbox = Sandbox("container", str(start_server("--no-confine")))
    work = tmp_path / "run"
    work.mkdir()
    hang = ["/bin/sh", "-c", "sleep 300 & echo $! > child.pid; sleep 300"]
    began = time.monotonic()
    done = subprocess.run(
        sandbox.argv(hang, work, seconds=1), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9 and "killed at its limit" in done.stderr, done
    assert time.monotonic() - began < 30
    child = int((work / "child.pid").read_text())  # copied back: the folder was writable
    # Killed with its group: SIGKILL is sent before the answer, but the process finishes
    # dying when the loaded machine schedules it (a CI run saw it still alive right after).
    assert _dies(child), "the run's background child outlived it"
    # The caller's own timeout (subprocess.run kills the client): the server notices the
    # closed connection and kills the run long before its 300 s limit.
    (work / "child.pid").unlink()
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(sandbox.argv(hang, work, seconds=300), capture_output=True, timeout=3)
    mirrors = list((Path(sandbox.tool).parent / "mirror").rglob("child.pid"))
    assert mirrors, "the run started in its copy of the folder"
    child = int(mirrors[0].read_text())
    assert _dies(child), "the run outlived its caller"


DAEMON = """\
import os, sys, time
if os.fork():
    while not os.path.exists(sys.argv[1]):  # the run ends once its daemon beats
        time.sleep(0.01)
    sys.exit(0)
os.setsid()  # out of the run's process group: killpg does not reach it
if os.fork():
    os._exit(0)
while True:
    with open(sys.argv[1], "w") as f:
        f.write(str(time.monotonic()))
    time.sleep(0.05)
"""


def test_in_its_own_container_the_server_kills_what_left_the_runs_group(
    tmp_path: Path, start_server: Callable[..., Path]
) -> None:
    """--own-container, in a PID namespace of its own as a container's: a snippet's daemon
    (double fork, setsid) is killed once its run ends, so no agent code outlives its run."""
    try:
        subprocess.run([*_pid_namespace(), "true"], check=True, capture_output=True, timeout=30)
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        pytest.skip(f"no PID namespace here: {e}")
    sandbox = Sandbox(
        "container", str(start_server("--no-confine", "--own-container", prefix=_pid_namespace()))
    )
    shared = tmp_path / "exchange" / "beat"  # under the exchange: not copied, seen as it is written
    work = tmp_path / "exchange" / "daemon"
    work.mkdir()
    (work / "daemon.py").write_text(DAEMON)
    done = subprocess.run(
        sandbox.argv([sys.executable, "daemon.py", str(shared)], work, seconds=30),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done
    time.sleep(0.5)
    first = shared.read_text()
    time.sleep(1.0)
    assert shared.read_text() == first, "the daemon still runs after its run ended"
    # As its namespace's PID 1 (as in a container) the server would ignore SIGTERM without a
    # handler, and a pod would wait out its grace period: it exits at once.
    unshare = start_server.procs[-1][0]  # type: ignore[attr-defined]
    (server,) = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read_text().split()
    os.kill(int(server), signal.SIGTERM)
    assert unshare.wait(10) == 0
