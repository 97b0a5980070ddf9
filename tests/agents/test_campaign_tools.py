"""The tools over a real campaign's output: a one-program campaign whose corpus snippet
reaches the injected fault dus_copy_elided, so its store holds a finding, a signature and
the finding's repro bundle (the campaign bisects it), all made by the engine. Then, through
the SDK's client over stdio: gaps, signatures, the finding's check, bisection and
reduction, its bundle, cures tried on the bundle's repro.py (flags, a rewrite of its
program), a verified fix recorded beside its signature, the issue draft, the resources."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agent_fixtures import DUS_REWRITE, DUS_SNIPPET, REGRESSION, SERVER, tool_result
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from xla_sentinel.agents.tools import Workbench
from xla_sentinel.xla.faults import fault_path

FAULT = fault_path("dus_copy_elided")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("campaign")
    (root / "corpus").mkdir()
    (root / "corpus" / "dus.py").write_text('INPUTS = [("f32", (8,)), ("f32", (1,))]\n' + DUS_SNIPPET)
    (root / "campaign.yaml").write_text(
        f"seed: 1\ncorpus: [{root / 'corpus'}]\ntargets: [default]\nbudget:\n  programs: 1\nworkers: 1\n")
    out = root / "out"
    proc = subprocess.run([*SERVER[:-1], "run", str(root / "campaign.yaml"), "--out", str(out),
                           "--inject-pass", FAULT, "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {"campaign": root / "campaign.yaml", "out": out}


async def test_tools_over_a_campaign_with_a_finding(campaign: dict[str, Path]) -> None:
    out = campaign["out"]
    params = StdioServerParameters(command=SERVER[0], args=[
        *SERVER[1:], "--campaign", str(campaign["campaign"]), "--out", str(out), "--inject-pass", FAULT,
        "--regression", REGRESSION[2], "--min-regression", "1"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def call(tool: str, **args: Any) -> Any:
            return tool_result(await session.call_tool(tool, args))

        gaps = await call("coverage_gaps")
        assert gaps["programs"] == 1 and "note" not in gaps
        assert "scatter" not in gaps["ops_never"] and "tanh" in gaps["ops_never"]

        [sig] = await call("open_signatures")
        assert sig["verdict"] == "mismatch" and sig["repro"].endswith("/repro")
        finding = Path(sig["repro"]).parent.name

        checked = await call("check_finding", finding=finding)
        assert checked["reproduces"] and checked["verdicts"][0]["verdict"] == "mismatch"

        bundle = await call("read_bundle", path=sig["repro"])
        assert {"report.md", "issue.md", "repro.py", "module.mlir"} <= set(bundle["files"])

        issue = await call("draft_issue", signature=sig["id"])
        assert issue["source"].endswith("issue.md") and "Do not file upstream" in issue["text"]

        # The cure the bisector named, tried on the bundle's own repro.py and the server's
        # regression corpus (one reproducer here): an agent's `regression: []` is not taken.
        cured = await call("try_cure", reproducer=sig["repro"], disable_passes=["algsimp", "copy-insertion"],
                           regression=[])
        assert cured["reproducer"] == {"affected": "bug", "under_cure": "clean"} and cured["verified_fix"]
        assert cured["regression_corpus"] == 1
        not_cured = await call("try_cure", reproducer=sig["repro"], disable_passes=["cse"])
        assert not not_cured["cured"]

        bisected = await call("bisect_finding", finding=finding)
        assert bisected["reproduces"] and bisected["repro"]

        res = await session.read_resource(f"sentinel://findings/{finding}")
        record = json.loads(res.contents[0].text)
        assert record["signature"] == sig["id"] and "repro.py" in record["bundle"]
        missing = await session.call_tool("check_finding", {"finding": "nope"})
        assert missing.isError and "no finding.json" in missing.content[0].text


async def test_a_rewrite_of_the_bundle_s_program_verified_and_recorded_for_its_signature(
        campaign: dict[str, Path], tmp_path: Path) -> None:
    """A rewrite cures the finding's bundle (the same inputs, the same float64 values, no
    in-place update for the fault to break) and, submitted for the signature, is kept in the
    store: the signatures resource, `xla-sentinel triage` and the HTML report show it. A
    rewrite that computes something else is refused. reduce_finding gives the standalone
    reproducer."""
    out = tmp_path / "out"
    shutil.copytree(campaign["out"], out)  # the fix changes the store: the module's campaign stays as it was
    params = StdioServerParameters(command=SERVER[0], args=[
        *SERVER[1:], "--campaign", str(campaign["campaign"]), "--out", str(out), "--inject-pass", FAULT])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def call(tool: str, **args: Any) -> Any:
            return tool_result(await session.call_tool(tool, args))

        [sig] = await call("open_signatures")
        finding = Path(sig["repro"]).parent.name
        reduced = await call("reduce_finding", finding=finding)
        assert reduced["reproduces"] and reduced["ops_after"] <= reduced["ops_before"]
        assert "stablehlo.scatter" in reduced["files"]["module.mlir"] and "def main" in reduced["files"]["repro.py"]

        cured = await call("try_cure", reproducer=sig["repro"], rewrite=DUS_REWRITE)
        assert cured["verified_fix"], cured["reason"]
        assert cured["reproducer"] == {"affected": "bug", "under_cure": "clean"}
        # Judged on the bundle's inputs, on two sets drawn afresh and on special values.
        assert {(v["inputs"], v["verdict"]) for v in cured["rewrite_verdicts"]} == {
            ("bundle", "pass"), ("fresh-0", "pass"), ("fresh-1", "pass"), ("special", "pass")}
        assert [e["same"] for e in cured["equivalence"]] == [True, True, True]
        # A rewrite that answers the bundle's stored inputs with its stored float64 values:
        # the bundle's repro.py passes on it, the fresh inputs tell it from the program.
        expected = np.load(out / sig["repro"] / "expected.npz")
        stored = [expected[k] for k in expected.files]
        # (Each input is read, times 0, so that it stays a parameter of the rewrite.)
        constants = ("import jax.numpy as jnp\n\n\ndef f(x, i, v, c):\n"
                     "    zero = 0 * (x.sum() + i.sum().astype(jnp.float32) + v.sum() + c.sum())\n    return "
                     + ", ".join(f"jnp.asarray({a.tolist()!r}, jnp.float32) + zero" for a in stored) + "\n")
        canned = await call("try_cure", reproducer=sig["repro"], rewrite=constants)
        assert canned["reproducer"] == {"affected": "bug", "under_cure": "clean"}, canned
        assert not canned["verified_fix"] and "does not compute the original module's float64 values" \
            in canned["reason"]
        assert [e["same"] for e in canned["equivalence"]] == [False, False, False]
        wrong = await call("try_cure", reproducer=sig["repro"], rewrite="def f(x, i, v, c):\n    return x, x * c\n")
        assert not wrong["verified_fix"] and wrong["reproducer"]["under_cure"] == "bug"
        other = await session.call_tool("try_cure", {"reproducer": sig["repro"], "rewrite": "def f(x, i, v, c):\n"
                                                     "    return x\n"})
        assert other.isError and "computes the same values from the same inputs" in other.content[0].text
        both = await session.call_tool("try_cure", {"reproducer": sig["repro"], "rewrite": DUS_REWRITE,
                                                    "disable_passes": ["algsimp"]})
        assert both.isError and "one of the two" in both.content[0].text

        fix = await call("submit_fix", reproducer=sig["repro"], rewrite=DUS_REWRITE,
                         signature=sig["id"], rationale="a select, not an in-place update")
        assert fix["verified"] and fix["recorded_for"] == sig["id"]
        [stored] = json.loads((await session.read_resource("sentinel://signatures")).contents[0].text)
        assert stored["verified_fix"]["cure"] == cured["cure"] and stored["verified_fix"]["kind"] == "rewrite"
        assert stored["verified_fix"]["claim"] == fix["claim"] and not stored["open"]
        assert await call("open_signatures") == []
        issue = await call("draft_issue", signature=sig["id"])
        assert issue["source"].endswith("issue.md")

    triage = subprocess.run([*SERVER[:-1], "triage", str(out)], capture_output=True, text=True, timeout=120)
    header, row = triage.stdout.splitlines()
    assert header.split()[-1] == "verified_fix" and row.endswith(cured["cure"])
    subprocess.run([*SERVER[:-1], "report", str(out), "--html", str(tmp_path / "page.html")], check=True,
                   capture_output=True, timeout=120)
    assert f"verified cure: {cured['cure']}" in (tmp_path / "page.html").read_text()


def test_the_campaign_s_work_is_queued_once_per_role(campaign: dict[str, Path]) -> None:
    bench = Workbench(campaign["campaign"], campaign["out"])
    try:
        first = bench.seed_tasks()
        assert first["fix"] == 1 and first["stress"] >= 15 and first["reproduce"] == 0
        assert bench.seed_tasks() == {"stress": 0, "reproduce": 0, "fix": 0}
        [fix] = bench.queue.tasks("fix")
        assert fix["key"] == f"signature:{bench.open_signatures()[0]['id']}"
    finally:
        bench.close()
