"""`xla-sentinel mcp` through the official SDK's client, over stdio and over streamable HTTP
on loopback; each tool call runs real XLA in the server's worker processes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_fixtures import (
    DIVIDE,
    DUS_INPUTS,
    DUS_SNIPPET,
    EXACT_DIVISION,
    REGRESSION,
    SERVER,
    SHIFT,
    http_server,
    tool_result,
)
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from xla_sentinel.xla.faults import fault_path

TOOLS = {"coverage_gaps", "open_signatures", "failure_reports", "run_test", "submit_test", "check_finding",
         "bisect_finding", "read_bundle", "submit_reproducer", "try_cure", "submit_fix", "draft_issue",
         "replay", "reduce_finding"}


async def test_stdio_tools_resources_and_a_crashing_snippet(tmp_path: Path) -> None:
    params = StdioServerParameters(command=SERVER[0], args=[
        *SERVER[1:], "--out", str(tmp_path), "--inject-pass", fault_path("dus_copy_elided"),
        *[a for r in REGRESSION[:1] for a in ("--regression", r)], "--min-regression", "1"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert TOOLS <= {t.name for t in (await session.list_tools()).tools}

        gaps = tool_result(await session.call_tool("coverage_gaps", {}))
        assert "no campaign.sqlite" in gaps["note"] and "dynamic_update_slice" in gaps["ops_never"]

        judged = tool_result(await session.call_tool("run_test", {"code": DUS_SNIPPET, "inputs": DUS_INPUTS}))
        assert judged["status"] == "judged"
        assert set(judged["failing"]) == {"default", "O0", "no_fusion_emitters"}, judged["verdicts"]
        assert all(v["verdict"] == "mismatch" for v in judged["verdicts"])

        # A snippet that kills its process is a verdict; the server answers the next call.
        crashed = tool_result(await session.call_tool("run_test", {
            "code": "import os\nINPUTS = [('f32', (2,))]\ndef f(x):\n    os._exit(9)\n"}))
        assert crashed["status"] == "load_crashed" and "9" in crashed["error"]
        bad = await session.call_tool("run_test", {"code": "def f(x): return x", "kind": "tensorflow"})
        assert bad.isError and "kind" in bad.content[0].text

        stablehlo = tool_result(await session.call_tool("run_test", {
            "kind": "stablehlo", "inputs": [[1.0, -2.0, 3.0]],
            "code": "func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n"
                    "  %0 = stablehlo.abs %arg0 : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n"}))
        assert stablehlo["status"] == "judged" and stablehlo["failing"] == []

        kept = tool_result(await session.call_tool("submit_test", {
            "code": DUS_SNIPPET, "inputs": DUS_INPUTS, "rationale": "state update read twice",
            "agent": "mcp-client", "model": "none"}))
        assert kept["verified"] and Path(kept["corpus_entry"]).is_file()
        provenance = json.loads(Path(kept["corpus_entry"]).with_suffix(".provenance.json").read_text())
        assert provenance["agent"] == "mcp-client" and provenance["rationale"] == "state update read twice"

        cure = tool_result(await session.call_tool("try_cure", {"reproducer": str(SHIFT), "disable_passes": ["algsimp"]}))
        assert cure["cured"] and cure["verified_fix"] and cure["regression_corpus"] == 1
        flag = await session.call_tool("try_cure", {"reproducer": str(SHIFT), "xla_flags": ["rm -rf /"]})
        assert flag.isError and "not an XLA flag" in flag.content[0].text

        missing = await session.call_tool("draft_issue", {"signature": "nope"})
        assert missing.isError and "not a signature" in missing.content[0].text
        assert tool_result(await session.call_tool("open_signatures", {})) == []

        docs = await session.read_resource("sentinel://docs/flags")
        assert "xla-shift-set-then-reshape" in docs.contents[0].text
        sigs = await session.read_resource("sentinel://signatures")
        assert json.loads(sigs.contents[0].text) == []


def _lowered(fn, *args) -> str:
    import jax

    return jax.jit(fn).lower(*args).as_text()


async def test_replay_and_a_pass_plugin_cure_over_stdio(tmp_path: Path) -> None:
    """replay: two module files through the engine's replay path under the injected fault
    dus_copy_elided, one of which it breaks; try_cure: an agent's HLO pass plugin (its
    source) curing the real bug divide_by_broadcast_reciprocal, with the regression corpus."""
    import numpy as np

    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "dus.mlir").write_text(_lowered(lambda x, v: (x.at[2].set(v[0]), x * 2),
                                              np.ones(8, np.float32), np.ones(1, np.float32)))
    (traces / "affine.mlir").write_text(_lowered(lambda x: x * 3 + 1, np.ones(4, np.float32)))
    params = StdioServerParameters(command=SERVER[0], args=[
        *SERVER[1:], "--out", str(tmp_path / "out"), "--inject-pass", fault_path("dus_copy_elided"),
        *[a for r in REGRESSION[1:2] for a in ("--regression", r)], "--min-regression", "1"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        replayed = tool_result(await session.call_tool("replay", {"paths": [str(traces)]}))
        assert {m["program"]: m["status"] for m in replayed["modules"]} == {"trace-dus": "judged",
                                                                            "trace-affine": "judged"}
        assert replayed["failing"] == ["trace-dus"]
        assert {f["verdict"] for f in replayed["findings"]} == {"mismatch"}
        assert all(Path(f["folder"], "finding.json").is_file() for f in replayed["findings"])
        missing = await session.call_tool("replay", {"paths": [str(traces / "nope.mlir")]})
        assert missing.isError and "no such file" in missing.content[0].text

        cured = tool_result(await session.call_tool("try_cure", {"reproducer": str(DIVIDE),
                                                                 "plugin_code": EXACT_DIVISION}))
        assert cured["verified_fix"], cured["reason"]
        assert cured["reproducer"] == {"affected": "bug", "under_cure": "clean"}
        assert cured["regression_corpus"] == 1 and cured["regressions"] == []
        assert cured["cure"].startswith("--inject-pass ") and cured["cure"].endswith(":transform")
        both = await session.call_tool("try_cure", {"reproducer": str(DIVIDE), "plugin_code": EXACT_DIVISION,
                                                    "plugin": "bench/nope.py"})
        assert both.isError and "give one" in both.content[0].text
        absent = await session.call_tool("try_cure", {"reproducer": str(DIVIDE), "plugin": "nope.py:transform"})
        assert absent.isError and "no such file" in absent.content[0].text
        neither = await session.call_tool("try_cure", {"reproducer": str(DIVIDE)})
        assert neither.isError and "needs xla_flags, disable_passes or a pass plugin" in neither.content[0].text


@pytest.fixture(name="http_server")
def loopback_server(tmp_path: Path) -> Iterator[str]:
    # No token: allowed on loopback only, and only when asked for (test_adversarial.py has the token).
    with http_server(tmp_path, "--insecure-loopback") as url:
        yield url


async def test_streamable_http_on_loopback(http_server: str) -> None:
    async with streamable_http_client(http_server) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        assert TOOLS <= {t.name for t in (await session.list_tools()).tools}
        judged = tool_result(await session.call_tool("run_test", {
            "code": "import jax.numpy as jnp\nINPUTS = [('f32', (4, 3))]\ndef f(x):\n    return jnp.tanh(x).sum(0)\n"}))
        assert judged["status"] == "judged" and judged["failing"] == []
        reports = tool_result(await session.call_tool("failure_reports", {}))
        assert reports == []


def test_bad_http_address_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run([*SERVER, "--out", str(tmp_path), "--http", "localhost"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "--http: 'localhost' is not HOST:PORT" in proc.stderr
    assert sys.executable
