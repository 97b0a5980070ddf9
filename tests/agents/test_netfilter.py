"""No network for agent code where the sandbox container can make no namespace
(agents/netfilter.py): the sandbox server runs each command under a seccomp filter that
refuses every socket but a unix one, inherited by whatever the command starts.

Where the namespaces come from is the one thing stood in for here: this machine's root may
unshare, an agent pod under RuntimeDefault may not (tests/node/test_agent_sandbox_node.py
shows the pod's side), so `Sandbox.detect` is made to fail as it does there. The filter,
the server and the runs are real."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from xla_sentinel.agents import netfilter, sandbox
from xla_sentinel.agents.sandbox_exchange import Server

pytestmark = pytest.mark.skipif(not netfilter.supported(), reason="seccomp filter for Linux x86_64/aarch64")

# What a run tries: the listener the test holds on loopback, every socket family it could
# reach the network by, a unix pair, a child of its own doing the same, and a jit of jax.
CODE = r"""
import json, socket, subprocess, sys
seen = {}
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=5).close()
    seen["tcp"] = "connected"
except OSError as e:
    seen["tcp"] = f"errno {e.errno}"
for name, fam, kind in (("inet6", socket.AF_INET6, socket.SOCK_DGRAM), ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
                        ("packet", socket.AF_PACKET, socket.SOCK_RAW)):
    try:
        socket.socket(fam, kind).close()
        seen[name] = "opened"
    except OSError as e:
        seen[name] = f"errno {e.errno}"
a, b = socket.socketpair()
seen["unix"] = "paired"
child = subprocess.run([sys.executable, "-c", "import socket; socket.socket()"], capture_output=True, text=True)
seen["child"] = child.stderr.strip().splitlines()[-1] if child.returncode else "opened"
import jax, jax.numpy as jnp
seen["jit"] = [float(v) for v in jax.jit(lambda x: x * 2 + 1)(jnp.arange(3.0))]
print(json.dumps(seen))
"""


@pytest.fixture
def listener() -> Iterator[int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    stop = threading.Event()

    def accept() -> None:
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                s.accept()[0].close()
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield s.getsockname()[1]
    stop.set()
    t.join()
    s.close()


def _run(server: Server, work: Path, port: int) -> dict[str, object]:
    import json

    answer = server.run({"argv": [sys.executable, "-c", CODE.replace("PORT", str(port))],
                         "work": str(work), "seconds": 120})
    assert answer["exit"] == 0, answer
    return {**json.loads(str(answer["stdout"]).strip().splitlines()[-1]), "confinement": answer["confinement"]}


def test_without_namespaces_a_run_reaches_no_network_but_still_runs_jax(tmp_path, listener, monkeypatch) -> None:
    def no_namespaces() -> sandbox.Sandbox:
        raise sandbox.SandboxError("--sandbox: unshare cannot make namespaces here (Operation not permitted)")

    monkeypatch.setattr(sandbox.Sandbox, "detect", staticmethod(no_namespaces))
    seen = _run(Server(tmp_path / "sock", confine=True), tmp_path, listener)

    assert str(seen["confinement"]).startswith(netfilter.DESCRIPTION), seen
    eperm = "errno 1"
    assert (seen["tcp"], seen["inet6"], seen["netlink"], seen["packet"]) == (eperm,) * 4, seen
    assert seen["unix"] == "paired"
    assert "PermissionError" in str(seen["child"]), seen  # inherited across fork and exec
    assert seen["jit"] == [1.0, 3.0, 5.0]


def test_unconfined_the_same_run_reaches_the_listener(tmp_path, listener) -> None:
    """--no-confine: no filter, so the probe above is one that can see the network."""
    seen = _run(Server(tmp_path / "sock", confine=False), tmp_path, listener)

    assert seen["confinement"] == "none: not asked (--no-confine)"
    assert seen["tcp"] == "connected" and seen["child"] == "opened", seen
