"""The local sandbox's confined command under gVisor (`runsc do`), as agent code runs in an
agent pod with `agents.runtimeClassName: gvisor` (docs/agents.md, "The sandbox container"):
what gVisor adds to the sandbox's namespaces is a kernel of its own between agent code and
the machine's (every system call is served by gVisor's Sentry, so `uname` and the kernel log
are gVisor's), and, with `--network=none`, no network interface but its own loopback.

Real runsc, built by `make gvisor` (gvisor.dev/gvisor from its Go module, into
~/.cache/xla-sentinel/gvisor or $GVISOR_DIR); skipped with the reason where it is not built,
or where this process is not root (`runsc do` mounts and pivots its sandbox's root; the
rootless mode is not tried here). A real jax jit runs confined inside it. And the agent
pod's sandbox user (uid 10002, no capability) makes there the namespaces that runc's
RuntimeDefault seccomp profile refuses it."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from xla_sentinel.agents.sandbox import Sandbox


def _gvisor_dir() -> Path:
    """Where `make gvisor` puts runsc (the Makefile's GVISOR_DIR)."""
    if os.environ.get("GVISOR_DIR"):
        return Path(os.environ["GVISOR_DIR"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "xla-sentinel" / "gvisor"


# What the confined command reports from inside: the kernel it sees, the kernel log's first
# line, its PID, the network interfaces, a TCP connection to the test's listener, a jit.
PROBE = '''\
import os, socket, subprocess, sys
print("release", os.uname().release)
log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()
print("dmesg", log[0] if log else "")
print("pid", os.getpid())
print("interfaces", ",".join(sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:])))
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
    print("socket open")
except OSError as e:
    print("socket refused", type(e).__name__)
if len(sys.argv) > 2:
    import jax, jax.numpy as jnp
    print("jit", float(jax.jit(lambda x: jnp.tanh(x).sum())(jnp.arange(4.0))))
'''


@pytest.fixture(scope="module")
def runsc() -> Path:
    binary = _gvisor_dir() / "runsc"
    if not os.access(binary, os.X_OK):
        pytest.skip(f"gVisor's runsc is not built ({binary}): `make gvisor` builds it")
    if os.geteuid() != 0:
        pytest.skip("`runsc do` needs root here (it mounts and pivots its sandbox's root)")
    return binary


def _report(out: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def _under_runsc(runsc: Path, state: Path, argv: list[str], timeout: float) -> dict[str, str]:
    # --root: this test's own state folder (runsc's default, /var/run/runsc, is the machine's);
    # --ignore-cgroups: no cgroup of the machine's is made or changed for the sandbox.
    done = subprocess.run([str(runsc), "--root", str(state), "--network=none", "--ignore-cgroups",
                           "do", *argv], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"runsc do exited {done.returncode}: {done.stderr[-2000:]}"
    return _report(done.stdout)


def test_confined_jit_runs_on_gvisors_kernel(runsc: Path, sandbox: Sandbox, listener: int,
                                            tmp_path: Path) -> None:
    """The sandbox's command (its namespaces, root and cleared environment, built inside
    gVisor as in a gVisor pod) sees gVisor's kernel, not this machine's, is still PID 1 of
    its own namespace, and a jax jit compiles and runs there as it does unconfined."""
    work = tmp_path / "work"
    work.mkdir()
    script = work / "probe.py"
    script.write_text(PROBE)
    argv = sandbox.argv([sys.executable, str(script), str(listener), "jit"], work)
    seen = _under_runsc(runsc, tmp_path / "state", argv, timeout=300)
    host = os.uname().release
    assert seen["release"].endswith("gvisor") and seen["release"] != host, seen
    assert "Starting gVisor" in seen["dmesg"], seen
    assert seen["pid"] == "1", seen
    assert seen["interfaces"] == "lo", seen
    assert seen["socket"].startswith("refused"), seen
    assert math.isclose(float(seen["jit"]), sum(math.tanh(x) for x in range(4)), rel_tol=1e-6), seen


def test_gvisor_alone_has_no_network(runsc: Path, listener: int, tmp_path: Path) -> None:
    """gVisor's own boundary, without the sandbox's namespaces inside it: with
    --network=none its network stack has its loopback alone, so the listener of this
    machine's loopback is out of reach; the same probe run here, unconfined, reaches it."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    here = _report(subprocess.run([sys.executable, str(script), str(listener)], capture_output=True,
                                  text=True, timeout=60, check=True).stdout)
    assert here["socket"] == "open", here
    seen = _under_runsc(runsc, tmp_path / "state", [sys.executable, str(script), str(listener)],
                        timeout=120)
    assert seen["interfaces"] == "lo", seen
    assert seen["socket"].startswith("refused"), seen
    assert seen["release"] != os.uname().release, seen


def test_the_sandbox_containers_user_makes_namespaces_in_gvisor(runsc: Path, tmp_path: Path) -> None:
    """The agent pod's sandbox container runs as uid 10002 with no capability and
    no_new_privs; on runc the RuntimeDefault seccomp profile refuses it the user namespace
    the local sandbox needs, so the server falls back to its seccomp filter. Inside gVisor
    that user makes the namespaces of the sandbox's unshare mode (a non-root caller's flags,
    sandbox._unshare_flags): runsc loads no OCI seccomp profile unless its oci-seccomp flag
    is set, and gVisor's kernel grants the user namespace."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    as_sandbox_user = [setpriv, "--reuid", "10002", "--regid", "10002", "--clear-groups",
                       "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    unshare = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--propagation",
               "private", "--map-root-user"]
    inner = shlex.join([*unshare, "/bin/sh", "-c", "echo pid $$; echo uidmap $(cat /proc/self/uid_map)"])
    outer = f"echo uid $(id -u); echo capeff $(grep CapEff /proc/self/status | cut -f2); exec {inner}"
    seen = _under_runsc(runsc, tmp_path / "state", [*as_sandbox_user, "/bin/sh", "-c", outer], timeout=120)
    assert seen["uid"] == "10002" and seen["capeff"] == "0000000000000000", seen
    assert seen["pid"] == "1", seen
    assert seen["uidmap"] == "0 10002 1", seen
