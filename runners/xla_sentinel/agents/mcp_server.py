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
(run_test: a JAX snippet defining f(*args) with INPUTS, or StableHLO text; its `reached`
says which kernel decisions, fusion kinds and passes the program reached, to aim the next
one; replay: trace folders, XLA dumps, module files), reduce what fails (reduce_finding, bisect_finding), try
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

    # The tools, their parameters described (mcp_tools.py: pydantic, which comes with the extra).
    from xla_sentinel.agents.mcp_tools import register_tools

    register_tools(server, bench, call, cure)

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
    from xla_sentinel.agents.sandbox_exchange import SOCKET_ENV

    # SandboxError (exit 2) where none works. In an agent pod the operator names the pod's
    # sandbox container ($XLA_SENTINEL_SANDBOX_SOCKET): agent code always runs there.
    confined = Sandbox.detect() if sandbox or os.environ.get(SOCKET_ENV) else None
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
