"""`xla-sentinel mcp --sandbox`: agent code (a run_test snippet, a reproducer's child) with
no network and none of the caller's files. A snippet that reads /proc/1/environ and its
environment, opens a socket to a listener of this machine, reads a token file and writes
the campaign's store: unconfined it does all four; confined, none. Real processes, real
namespaces (bubblewrap or unshare, whichever is here; skipped where neither works)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_fixtures import REGRESSION, SHIFT
from xla_sentinel.agents.gate import Cure
from xla_sentinel.agents.sandbox import Sandbox
from xla_sentinel.agents.tools import Workbench

PROBE = '''\
import os
import socket

seen = []
try:
    seen.append("environ:" + ("LEAK" if b"SOME_API_KEY" in open("/proc/1/environ", "rb").read() else "clean"))
except OSError:
    seen.append("environ:denied")
seen.append("env:" + ("LEAK" if "SOME_API_KEY" in os.environ else "clean"))
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    seen.append("socket:open")
except OSError:
    seen.append("socket:refused")
try:
    open({token!r}).read()
    seen.append("token:read")
except OSError:
    seen.append("token:denied")
try:
    with open({store!r}, "ab") as f:
        f.write(b"agent was here")
    seen.append("store:opened")
except OSError:
    seen.append("store:denied")
raise RuntimeError("SEEN " + " ".join(seen))
'''


def _probe(bench: Workbench, tmp_path: Path, port: int) -> tuple[str, bytes]:
    token = tmp_path / "token"
    token.write_text("sk-agent-must-not-read")
    store = bench.out / "campaign.sqlite"
    store.write_bytes(b"SQLite format 3\0")
    result = bench.run_test(PROBE.format(port=port, token=str(token), store=str(store)))
    return str(result.get("error")), store.read_bytes()


def test_unconfined_agent_code_reaches_everything(tmp_path: Path, listener: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """What --sandbox closes: without it the snippet's loader sees the server's environment,
    the network, any file and the store."""
    monkeypatch.setenv("SOME_API_KEY", "sk-secret")
    bench = Workbench(None, tmp_path / "out")
    try:
        error, store = _probe(bench, tmp_path, listener)
    finally:
        bench.close()
    assert "env:LEAK" in error and "socket:open" in error and "token:read" in error, error
    assert store.endswith(b"agent was here")


def test_confined_agent_code_reaches_nothing(tmp_path: Path, listener: int, sandbox: Sandbox,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_API_KEY", "sk-secret")
    bench = Workbench(None, tmp_path / "out", sandbox=sandbox)
    try:
        error, store = _probe(bench, tmp_path, listener)
        assert "SEEN environ:clean env:clean socket:refused token:denied" in error, error
        assert store == b"SQLite format 3\0", "the store is untouched (the write went nowhere)"
        # Confined, a snippet is still loaded and judged as unconfined.
        judged = bench.run_test("import jax.numpy as jnp\nINPUTS = [('f32', (4, 3))]\n"
                                "def f(x):\n    return jnp.tanh(x).sum(0)\n")
        assert judged["status"] == "judged" and judged["failing"] == [], judged
    finally:
        bench.close()


def test_a_reproducer_runs_confined_and_still_tells_its_cure(tmp_path: Path, sandbox: Sandbox,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus's reproducers (and an agent's pass plugin in their child) run in the
    sandbox too, with the cure in their own environment: the fix is verified as unconfined."""
    monkeypatch.setenv("XLA_SENTINEL_OUTCOMES", str(tmp_path / "outcomes.sqlite"))  # run, not remembered
    bench = Workbench(None, tmp_path / "out", regression=[Path(REGRESSION[1])], min_regression=1,
                      sandbox=sandbox)
    try:
        tried = bench.try_cure(str(SHIFT), Cure(disable_passes=("algsimp",)))
    finally:
        bench.close()
    assert tried["verified_fix"], tried["reason"]
    assert tried["reproducer"] == {"affected": "bug", "under_cure": "clean"}


def test_a_corpus_of_links_runs_confined(tmp_path: Path, sandbox: Sandbox,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A regression corpus of links into bench/repros (as tests/k8s/data's): the sandboxed
    child sees the script's folder only, so the gate runs the file a link names, not the
    link, which dangled there and made every reproducer an error (and the corpus empty)."""
    monkeypatch.setenv("XLA_SENTINEL_OUTCOMES", str(tmp_path / "outcomes.sqlite"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    link = corpus / Path(REGRESSION[1]).name
    link.symlink_to(Path(REGRESSION[1]).resolve())
    bench = Workbench(None, tmp_path / "out", regression=[link], min_regression=1, sandbox=sandbox)
    try:
        tried = bench.try_cure(str(SHIFT), Cure(disable_passes=("algsimp",)))
    finally:
        bench.close()
    assert tried["verified_fix"], tried["reason"]



def test_a_command_named_without_its_path_is_found_on_the_sandbox_path(tmp_path: Path, sandbox: Sandbox) -> None:
    """A bare command name (`echo`) runs confined as it runs outside: looked up on the
    sandbox's PATH (unshare mode exec'd it as a file of the work folder: FileNotFoundError)."""
    import subprocess

    done = subprocess.run(sandbox.argv(["echo", "confined"], tmp_path), capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "confined"), done.stderr[-2000:]
