"""The per-pass HLO trace tool (Workbench.pass_trace, MCP `pass_trace`) on a real XLA:CPU
compile: a mean, whose division by the row length algsimp rewrites into a multiply by its
reciprocal, shows algsimp among the passes that changed the module, with that rewrite as its
diff; a pass regex narrows the dump; the answer stays within its character budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xla_sentinel.agents.tools import ToolError, Workbench

SNIPPET = "import jax.numpy as jnp\nINPUTS = [('f32', (4, 8))]\n\ndef f(x):\n    return jnp.mean(jnp.exp(x), axis=1)\n"
TRACE_KEYS = ("snapshots", "passes", "diffs", "truncated")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workbench, str, dict]:
    bench = Workbench(None, tmp_path_factory.mktemp("trace") / "out")
    test = bench.run_test(SNIPPET)
    assert test["status"] == "judged", test
    full = bench.pass_trace(test["test"], max_chars=200_000)
    yield bench, test["test"], full
    bench.close()


def test_the_trace_names_each_pass_that_changed_the_module_with_its_diff(traced) -> None:
    _, test, full = traced
    assert full["status"] == "traced" and full["target"] == "default" and not full["truncated"]
    names = [p["pass"] for p in full["passes"]]
    assert "algsimp" in names, names
    assert [p["seq"] for p in full["passes"]] == sorted(p["seq"] for p in full["passes"])
    diff = next(d["diff"] for d in full["diffs"] if d["pass"] == "algsimp")
    removed = [line for line in diff.splitlines() if line.startswith("-")]
    added = [line for line in diff.splitlines() if line.startswith("+")]
    assert any(" divide(" in line for line in removed), diff
    assert any("constant(0.125)" in line for line in added) and any(
        " multiply(" in line for line in added
    ), diff
    assert len(full["diffs"]) == len(full["passes"])  # nothing left out under a large budget


def test_a_pass_regex_narrows_the_dump(traced) -> None:
    bench, test, full = traced
    only = bench.pass_trace(test, passes="^algsimp$")
    assert only["status"] == "traced"
    assert {p["pass"] for p in only["passes"]} <= {"algsimp", "(passes not dumped)"}
    assert "algsimp" in {p["pass"] for p in only["passes"]}
    assert only["snapshots"] < full["snapshots"]


def test_the_answer_keeps_to_its_budget(traced) -> None:
    bench, test, full = traced
    whole = len(json.dumps({k: full[k] for k in TRACE_KEYS}))
    budget = 1500
    assert whole > budget, "the test needs a trace larger than the budget"
    small = bench.pass_trace(test, max_chars=budget)
    assert len(json.dumps({k: small[k] for k in TRACE_KEYS})) <= budget
    assert small["truncated"] is True and small["passes"][0] == full["passes"][0]


def test_bad_arguments_are_named(traced) -> None:
    bench, test, _ = traced
    with pytest.raises(ToolError, match="neither a test id"):
        bench.pass_trace("no-such-test")
    with pytest.raises(ToolError, match="target: 'tpu'"):
        bench.pass_trace(test, target="tpu")
    with pytest.raises(ToolError, match="max_chars"):
        bench.pass_trace(test, max_chars=10)
    with pytest.raises(ToolError, match="not a regular expression"):
        bench.pass_trace(test, passes="(")
    # A program folder works as well as a test id.
    assert (
        bench.pass_trace(str(Path(bench.work / "tests" / test / "program")))["status"] == "traced"
    )


async def test_the_mcp_tool_answers_with_the_trace(tmp_path: Path) -> None:
    from agent_fixtures import SERVER, tool_result
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], "--out", str(tmp_path)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        test = tool_result(await session.call_tool("run_test", {"code": SNIPPET}))
        got = tool_result(
            await session.call_tool("pass_trace", {"test": test["test"], "passes": "algsimp"})
        )
        assert got["status"] == "traced" and "algsimp" in {p["pass"] for p in got["passes"]}, got
        bad = await session.call_tool("pass_trace", {"test": test["test"], "max_chars": 5})
        assert bad.isError
