"""`xla-sentinel mcp`: the engine over the Model Context Protocol, for Claude Code, Gemini
CLI, Codex or any MCP client (docs/agents.md). Stdio by default, streamable HTTP with
`--http HOST:PORT` (at /mcp).

Each tool is a `tools.Workbench` method; the blocking ones run in a thread so the server
keeps answering. A bad argument comes back as a tool error that names it; agent-written
code runs only in worker processes and child processes, so what it does to itself is a
verdict in the reply, never the end of the server.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from xla_sentinel.agents.gate import MIN_REGRESSION, Cure
from xla_sentinel.agents.tools import Workbench
from xla_sentinel.core.model import UNJUDGED, VERDICT_TABLE

T = TypeVar("T")

INSTRUCTIONS = """\
xla-sentinel: continuous correctness testing of the XLA compiler. Tools judge programs under
a campaign's targets (XLA configurations) against float64 references with the campaign's
oracle. Find what to test (coverage_gaps, open_signatures, failure_reports), try programs
(run_test: a JAX snippet defining f(*args) with INPUTS, or StableHLO text; replay: trace
folders, XLA dumps, module files), reduce what fails (reduce_finding, bisect_finding), try
cures (try_cure: XLA flags, passes to disable, an HLO pass plugin, or a rewrite of a
bundle's program) and submit what you found (submit_test, submit_reproducer, submit_fix).
Nothing you submit counts until the gate has verified it: a test must compile and be
judged, a reproducer is a program the engine itself judges as the reported failure (same
target, same class of verdict) and right under its cure, a fix must cure the reproducer
without regressions in the server's corpus of known bugs' reproducers (a rewrite: equal to
the original's float64 values on fresh and special inputs, no target judging it wrong).
Your name and model are the server's: the submit tools take neither. Resources: sentinel://signatures, sentinel://findings/{id},
sentinel://docs/{verdicts,ops,flags}."""

VERDICTS_DOC = (
    "Verdicts (one per target and program, core/model.py Verdict): "
    + "; ".join(f"{v} ({i.doc})" for v, i in VERDICT_TABLE.items())
    + f"; {UNJUDGED} (the references could not agree). A target fails a test when its verdict is "
    "not pass. Statuses of a test: judged; load_error (the snippet does not load or trace: the "
    "message says where); load_crashed / load_hung (the snippet killed or hung its worker); "
    "references_disagree (no verdict: the output is ill-conditioned in float64).")


def _flags_doc() -> str:
    from xla_sentinel.campaign.coverage import PASSES
    from xla_sentinel.triage.known_bugs import entries

    lines = ["Cures are XLA flags as XLA_FLAGS takes them: --xla_disable_hlo_passes=NAME[,NAME]",
             "(disable_passes: [NAME, ...]) and any --xla_NAME=VALUE (xla_flags); an HLO pass plugin",
             "(plugin_code: Python source defining transform(proto: bytes) -> bytes | None over a",
             "serialized HloModuleProto, registered after fusion; xla_sentinel.xla.hlo_proto.rewrite_proto",
             "and xla_sentinel.xla.hlo parse and edit the module as text); or a rewrite of a repro",
             "bundle's program (rewrite: a JAX snippet or StableHLO module taking the bundle's inputs",
             "and computing its float64 reference values).",
             f"Passes the campaign watches: {', '.join(PASSES)}.", "", "Known bugs (the regression corpus):"]
    lines += [f"- {b['id']}: {b['title']} (reproducer {b.get('reproducer')})" for b in entries()]
    return "\n".join(lines)


def _ops_doc() -> str:
    from xla_sentinel.core.names import DTYPES
    from xla_sentinel.spec.campaign import OP_NAMES

    return (f"Ops of the generator's table: {', '.join(OP_NAMES)}.\nDtypes of INPUTS: {', '.join(DTYPES)}.\n"
            "A JAX snippet: INPUTS = [(\"f32\", (4, 8))]; def f(x): ...; optional SPECIAL = True draws "
            "special values (NaN, inf, signed zeros, ties, extremes).")


def build_server(bench: Workbench, host: str = "127.0.0.1", port: int = 8000) -> Any:
    """The FastMCP server over one Workbench."""
    import anyio
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError as McpToolError

    from xla_sentinel.agents.gate import GateError
    from xla_sentinel.agents.tools import ToolError
    from xla_sentinel.core.program import ProgramError
    from xla_sentinel.spec.campaign import SpecError

    server = FastMCP("xla-sentinel", instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING")

    async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        except (ToolError, GateError, ProgramError, SpecError) as e:
            raise McpToolError(str(e)) from None

    def cure(disable_passes: list[str] | None, xla_flags: list[str] | None, plugin: str | None = None,
             plugin_code: str | None = None, plugin_function: str = "transform",
             rewrite: str | None = None) -> Cure | None:
        """The compiler cure the arguments give; None for a rewrite alone (the tool says
        when there is neither, or both)."""
        if rewrite is not None and not (disable_passes or xla_flags or plugin or plugin_code):
            return None
        try:
            return bench.cure(disable_passes or (), xla_flags or (), plugin, plugin_code, plugin_function)
        except (GateError, ToolError) as e:
            raise McpToolError(str(e)) from None

    @server.tool()
    async def coverage_gaps() -> dict[str, Any]:
        """What the campaign rarely or never exercised: ops never drawn and least drawn, op
        pairs, dtypes, ranks, special values, fusion kinds, passes that never changed a module."""
        return await call(bench.coverage_gaps)

    @server.tool()
    async def open_signatures() -> list[dict[str, Any]]:
        """Distinct bugs the campaign found that are neither known bugs nor verified fixed."""
        return await call(bench.open_signatures)

    @server.tool()
    async def failure_reports() -> list[dict[str, Any]]:
        """Written failure reports waiting for a reproducer (text of each)."""
        return await call(bench.failure_reports)

    @server.tool()
    async def run_test(code: str, kind: str = "jax", inputs: list[Any] | None = None,
                       special: bool = False) -> dict[str, Any]:
        """Judge a program under the campaign's targets with the campaign's oracle.

        kind "jax": code defines f(*args) and INPUTS = [(dtype, shape), ...] (or pass inputs as
        [[dtype, shape], ...]); special=True draws special values. kind "stablehlo": module
        text; inputs (optional) one nested list of values per parameter. Returns a verdict per
        target with evidence, and `failing`: the targets judged wrong."""
        return await call(bench.run_test, code, kind, inputs, special)

    @server.tool()
    async def submit_test(code: str, rationale: str, kind: str = "jax",
                          inputs: list[Any] | None = None, special: bool = False) -> dict[str, Any]:
        """Add a test to the campaign's corpus with its provenance (the agent and model are
        the server's, not arguments). It is judged first and kept only if it compiled and
        the oracle judged it."""
        return await call(bench.submit_test, code, rationale, kind, inputs, special)

    @server.tool()
    async def check_finding(finding: str) -> dict[str, Any]:
        """Re-run a finding's program (an id under OUT/findings, or a folder) under the targets."""
        return await call(bench.check_finding, finding)

    @server.tool()
    async def bisect_finding(finding: str, timeout: float = 120.0, reduce: bool = True) -> dict[str, Any]:
        """Localize (and reduce, unless reduce=false) a finding to its culprit op, fusion and
        curing pass; writes its repro bundle (report.md, issue.md, repro.py)."""
        return await call(bench.bisect_finding, finding, timeout, reduce)

    @server.tool()
    async def reduce_finding(finding: str, timeout: float = 120.0) -> dict[str, Any]:
        """Reduce a finding to a standalone reproducer: the fewest ops that still fail, in a
        repro bundle; returns the ops before and after, and its repro.py and module.mlir."""
        return await call(bench.reduce_finding, finding, timeout)

    @server.tool()
    async def replay(paths: list[str]) -> dict[str, Any]:
        """Replay trace folders, XLA dump folders or module files (StableHLO, HLO text,
        jax.export) under the campaign's targets, as `xla-sentinel replay` does: each module's
        status, the findings (verdict, target, signature, folder) and signatures."""
        return await call(bench.replay, paths)

    @server.tool()
    async def read_bundle(path: str) -> dict[str, Any]:
        """Read a repro bundle folder: report.md, issue.md, repro.py, module.mlir."""
        return await call(bench.read_bundle, path)

    @server.tool()
    async def submit_reproducer(code: str, target: str, verdict: str, kind: str = "jax",
                                inputs: list[Any] | None = None, special: bool = False,
                                culprit_op: str | None = None, disable_passes: list[str] | None = None,
                                xla_flags: list[str] | None = None, report: str = "",
                                rationale: str = "") -> dict[str, Any]:
        """Submit a reproducer: a program (as for run_test: a JAX snippet defining f with
        INPUTS, or StableHLO text) that shows the reported failure, with its cure (passes to
        disable, XLA flags). The engine judges it: verified only if the campaign's `target`
        judges it `verdict` (mismatch and nan_mismatch are one class), its module holds
        `culprit_op` where the report names one, and under the cure (applied to the
        compiler, not visible to the program) the same target judges it pass. `report`: the
        report's name, or a signature id (whose own target, verdict and culprit op count)."""
        return await call(bench.submit_reproducer, code, cure(disable_passes, xla_flags), target, verdict,
                          kind, inputs, special, culprit_op, report, rationale)

    @server.tool()
    async def try_cure(reproducer: str, disable_passes: list[str] | None = None,
                       xla_flags: list[str] | None = None, plugin: str | None = None,
                       plugin_code: str | None = None, plugin_function: str = "transform",
                       rewrite: str | None = None, rewrite_kind: str = "jax") -> dict[str, Any]:
        """Try a cure on a reproducer (a repro.py, a bundle folder, or bench/repros/NAME.py).
        A cure of the compiler: HLO passes to disable, XLA flags, an HLO pass plugin (plugin:
        FILE.py[:FUNC], or plugin_code: its Python source with transform(proto: bytes) ->
        bytes | None), run on the reproducer and on the server's regression corpus of known
        bugs (chosen by the server; a corpus under its minimum size verifies no fix). Or a
        rewrite of a bundle's program (rewrite: a JAX snippet defining f, or StableHLO text,
        rewrite_kind "jax" or "stablehlo") that takes the bundle's inputs: it must compute the
        original module's float64 values on fresh and special inputs, not only the bundle's;
        the campaign's targets judge it too. Returns cured or not, regressions, other bugs
        it cures."""
        return await call(bench.try_cure, reproducer,
                          cure(disable_passes, xla_flags, plugin, plugin_code, plugin_function, rewrite),
                          rewrite, rewrite_kind)

    @server.tool()
    async def submit_fix(reproducer: str, disable_passes: list[str] | None = None,
                         xla_flags: list[str] | None = None, plugin: str | None = None,
                         plugin_code: str | None = None, plugin_function: str = "transform",
                         rewrite: str | None = None, rewrite_kind: str = "jax", rationale: str = "",
                         signature: str | None = None) -> dict[str, Any]:
        """Submit a fix draft (the cure as for try_cure): verified only if it cures the
        reproducer and no known bug's reproducer gets worse under it (a rewrite: no target
        judges it wrong). A verified fix of a `signature` is kept beside it in the store."""
        return await call(bench.submit_fix, reproducer,
                          cure(disable_passes, xla_flags, plugin, plugin_code, plugin_function, rewrite),
                          rationale, signature, rewrite, rewrite_kind)

    @server.tool()
    async def draft_issue(signature: str) -> dict[str, Any]:
        """The upstream issue text of a signature (its bundle's issue.md once bisected)."""
        return await call(bench.draft_issue, signature)

    @server.resource("sentinel://signatures", mime_type="application/json")
    async def signatures() -> list[dict[str, Any]]:
        """Every signature of the campaign, with its verified cure (verified_fix)."""
        return await call(bench.signatures)

    @server.resource("sentinel://findings", mime_type="application/json")
    async def findings() -> list[dict[str, Any]]:
        """Every finding of the campaign (finding.json, and its folder)."""
        return await call(bench.findings)

    @server.resource("sentinel://findings/{finding_id}", mime_type="application/json")
    async def finding(finding_id: str) -> dict[str, Any]:
        """One finding: finding.json and, once bisected, its bundle's files."""
        for f in await call(bench.findings):
            if f.get("id") == finding_id or Path(f["folder"]).name == finding_id:
                bundle = Path(f["folder"]) / "repro"
                return {**f, **({"bundle": (await call(bench.read_bundle, str(bundle)))["files"]}
                                if bundle.is_dir() else {})}
        raise McpToolError(f"no finding {finding_id!r}")

    docs = {"verdicts": lambda: VERDICTS_DOC, "ops": _ops_doc, "flags": _flags_doc}

    @server.resource("sentinel://docs/{name}", mime_type="text/markdown")
    async def doc(name: str) -> str:
        """The docs an agent needs: verdicts, ops, flags."""
        if name not in docs:
            raise McpToolError(f"no doc {name!r}; docs: {', '.join(docs)}")
        return docs[name]()

    return server


def require_sdk() -> None:
    """Raise ImportError, naming the package, where the agents extra is not installed."""
    import mcp.server.fastmcp  # noqa: F401


def parse_http(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--http: {value!r} is not HOST:PORT")
    return host, int(port)


TOKEN_ENV = "XLA_SENTINEL_MCP_TOKEN"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def http_token(host: str, token_file: Path | None, insecure_loopback: bool) -> str | None:
    """The bearer token `--http` requires: from `--token-file`, else $XLA_SENTINEL_MCP_TOKEN
    (taken out of the environment, so the workers that run agent code never see it). None
    only for a server on loopback started with --insecure-loopback; otherwise no token is
    a UserError: an HTTP server runs whatever code its callers send."""
    from xla_sentinel.core.errors import UserError

    token = os.environ.pop(TOKEN_ENV, None)
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as e:
            raise UserError(f"--token-file: {token_file}: {e.strerror or e}") from None
    if token:
        if len(token) < 16:
            raise UserError("--http: the bearer token is shorter than 16 characters")
        return token
    if insecure_loopback and host in LOOPBACK:
        return None
    raise UserError(f"--http {host}: a bearer token is required (--token-file FILE or ${TOKEN_ENV}); "
                    "without one only a loopback address with --insecure-loopback")


def bearer_auth(app: Any, token: str) -> Any:
    """An ASGI app that answers 401 to any HTTP request without `Authorization: Bearer
    TOKEN` (compared in constant time) and passes the rest, and lifespan events, to `app`."""
    import hmac

    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b'{"error": "unauthorized"}'})
                return
        await app(scope, receive, send)

    return guarded


def serve(campaign: Path | None, out: Path, http: str | None = None, inject_passes: tuple[str, ...] = (),
          regression: list[Path] | None = None, agent: str = "mcp-client", model: str = "unknown",
          min_regression: int = MIN_REGRESSION, token_file: Path | None = None,
          insecure_loopback: bool = False, sandbox: bool = False) -> int:
    """Run the server until its client leaves (stdio) or it is stopped (HTTP)."""
    import structlog

    host, port = parse_http(http) if http else ("127.0.0.1", 8000)
    token = http_token(host, token_file, insecure_loopback) if http else None
    from xla_sentinel.agents.sandbox import Sandbox

    confined = Sandbox.detect() if sandbox else None  # SandboxError (exit 2) where none works
    if not http:
        # Stdout is the protocol's: the engine's log lines and whatever a worker process
        # prints go to stderr, the messages to a copy of the original stdout.
        protocol = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = io.TextIOWrapper(os.fdopen(protocol, "wb"), encoding="utf-8", write_through=True)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    bench = Workbench(campaign, out, inject_passes, regression, agent=agent, model=model,
                      min_regression=min_regression, sandbox=confined)
    if confined is not None:
        print(f"xla-sentinel mcp: agent code runs confined by {confined.kind} ({confined.tool})", file=sys.stderr)
    try:
        server = build_server(bench, host, port)
        if not http:
            server.run("stdio")
        else:
            import anyio
            import uvicorn

            app = server.streamable_http_app()
            config = uvicorn.Config(bearer_auth(app, token) if token else app, host=host, port=port,
                                    log_level="warning")
            anyio.run(uvicorn.Server(config).serve)
    finally:
        bench.close()
    return 0
