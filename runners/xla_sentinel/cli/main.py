"""The `xla-sentinel` command line.

Exit codes: 0 ok; 1 bugs found (for commands that check); 2 bad input, with one line
naming the field or file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xla_sentinel.cli import layout, triage_view
from xla_sentinel.cli.flags import (
    add_campaign,
    add_inject_pass,
    add_out,
    add_overrides,
    add_quiet,
    apply_overrides,
)
from xla_sentinel.cli.version import VersionAction
from xla_sentinel.core.errors import EXIT_BAD_INPUT, UserError
from xla_sentinel.core.program import ProgramError
from xla_sentinel.spec.campaign import BudgetSpec, CampaignSpec, load_campaign
from xla_sentinel.storage import objects as storage
from xla_sentinel.worker.client import WorkerStartError

if TYPE_CHECKING:
    from xla_sentinel.agents.spend import Budget as SpendingBudget
    from xla_sentinel.agents.swarm import Swarm

EXIT_OK, EXIT_BUGS = 0, 1


def _cmd_run(args: argparse.Namespace) -> int:
    from xla_sentinel.campaign.engine import run_campaign
    from xla_sentinel.campaign.recording import Reporter

    campaign = load_campaign(args.campaign)
    spec = apply_overrides(campaign.spec, args)

    def run(out: Path, reporter: Reporter | None = None) -> dict[str, Any]:
        return run_campaign(spec, out, name=campaign.name, progress=not args.quiet,
                            inject_passes=args.inject_pass or (), reporter=reporter)

    stored = True
    if storage.is_uri(args.out):
        staging = Path(args.staging) if args.staging else storage.default_staging(args.out)
        print(f"xla-sentinel: staging {args.out} in {staging}", file=sys.stderr)
        summary, stored = storage.run_mirrored(args.out, staging, run, wait=args.storage_wait)
    else:
        summary = run(storage.local_path(args.out))
    print(layout.run_line(summary, storage.join(args.out, "summary.json")))
    if not stored:
        _error(layout.upload_owed(summary))
        return EXIT_BAD_INPUT
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from xla_sentinel.campaign.check import check_program
    from xla_sentinel.judge.invariants import InvariantError

    try:
        verdicts = check_program(Path(args.program), Path(args.campaign) if args.campaign else None,
                                 args.inject_pass or ())
    except InvariantError as e:  # a hand-edited program folder's meta.json `invariants`
        raise ProgramError(f"{Path(args.program) / 'meta.json'}: {e}") from None
    print(json.dumps(verdicts, indent=1))
    return EXIT_BUGS if any(v["verdict"] != "pass" for v in verdicts) else EXIT_OK


def _cmd_bisect(args: argparse.Namespace) -> int:
    from xla_sentinel.bisect import bisect_finding

    if args.versions:
        return _bisect_versions(args)
    if storage.is_uri(args.finding):
        result = _bisect_stored(args.finding, args.timeout)
    else:
        folder = storage.local_path(args.finding)
        if (folder / "finding.json").exists():
            try:
                record = json.loads((folder / "finding.json").read_text())
            except ValueError:
                record = None  # the bisector names a corrupt finding.json itself
            if record is not None:
                storage.check_format(record, str(folder / "finding.json"))
        result = bisect_finding(folder, timeout=args.timeout)
    print(json.dumps({k: v for k, v in result.items() if k != "stages"}, indent=1))
    return EXIT_BUGS if result["reproduces"] else EXIT_OK


def _bisect_versions(args: argparse.Namespace) -> int:
    """`bisect --versions A..B|V PATH`: the first release in A..B that shows the finding
    (exit 1 when one does), or whether release V still shows it (exit 1) or not (0)."""
    from xla_sentinel.bisect.versions import VersionBisectError, bisect_versions

    if storage.is_uri(args.finding):
        raise VersionBisectError(f"{args.finding}: --versions reads a local finding folder or bundle")
    result = bisect_versions(Path(args.finding), args.versions, args.timeout, args.install)
    print(json.dumps(result, indent=1))
    if result["status"] == "undecided":
        _error(result.get("error") or "no release could tell")
        return EXIT_BAD_INPUT
    return EXIT_BUGS if result["status"] in ("found", "already_in_first", "still_failing") else EXIT_OK


def _bisect_stored(uri: str, timeout: float) -> dict[str, Any]:
    """Bisect a finding folder read back from object storage; its bundle and the updated
    finding.json go back under the same keys (an explicit re-bisection replaces them)."""
    from xla_sentinel.bisect import bisect_finding

    store = storage.ObjectStore(uri)
    storage.read_finding(store, "")  # corrupt or newer: said before anything is fetched
    folder = storage.default_staging(uri)
    if folder.exists():
        shutil.rmtree(folder)
    store.download("", folder)
    result = bisect_finding(folder, timeout=timeout)
    uploads = [p for p in (folder / str(result["repro"])).rglob("*") if p.is_file()] if result["repro"] else []
    for path in [*uploads, folder / "finding.json"]:
        store.put(path, path.relative_to(folder).as_posix(), replace=True)
    if result["repro"]:
        result["repro"] = store.key_uri(str(result["repro"]))
    return result


def _cmd_replay(args: argparse.Namespace) -> int:
    from xla_sentinel.campaign.engine import run_campaign
    from xla_sentinel.programs.units import trace_units

    campaign = load_campaign(args.campaign) if args.campaign else None
    spec = campaign.spec if campaign else CampaignSpec()
    units = trace_units(args.paths, spec.mutations)
    spec = replace(spec, traces=[str(p) for p in args.paths],
                   budget=BudgetSpec(programs=len(units)), workers=min(spec.workers, len(units)))
    spec.check()
    summary = run_campaign(spec, Path(args.out), name="replay", progress=not args.quiet,
                           inject_passes=args.inject_pass or ())
    for line in layout.skipped_traces(summary):
        print(f"xla-sentinel: {line}", file=sys.stderr)
    summary_at = str(Path(args.out) / "summary.json")
    if layout.replayed(summary) == 0:
        _error(layout.nothing_replayed(summary, summary_at))
        return EXIT_BAD_INPUT
    print(layout.replay_line(summary, summary_at))
    return EXIT_BUGS if summary["findings"] else EXIT_OK


def _cmd_record(args: argparse.Namespace) -> int:
    import subprocess
    import tempfile

    from xla_sentinel.programs.record import child_environment

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise UserError("record: no command to run (xla-sentinel record --out DIR -- python train.py ...)")
    out = Path(args.out)
    before = {p.name for p in out.iterdir()} if out.is_dir() else set()
    with tempfile.TemporaryDirectory(prefix="xla-sentinel-record-") as site:
        env = child_environment(out, args.with_values, Path(site))
        try:
            rc = subprocess.call(command, env=env)
        except OSError as e:
            raise UserError(f"record: cannot run {command[0]} ({e.strerror})") from None
    traces = sorted(p for p in out.iterdir() if (p / "module.mlir").exists()) if out.is_dir() else []
    new = sum(p.name not in before for p in traces)
    if rc != 0:
        _error(f"{' '.join(command)} exited with status {rc}; {new} new traces kept in {out}")
        return EXIT_BAD_INPUT
    print(f"{new} new traces ({len(traces)} in all) in {out}")
    return EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    if args.html is not None:
        from xla_sentinel.report.tables import html_report, html_report_uri

        page = Path(args.html) if args.html else None
        # From a URI the page is written locally (a browser opens a file, not a gs:// object).
        written = (html_report_uri(args.dir, page) if storage.is_uri(args.dir)
                   else html_report(storage.local_path(args.dir), page))
        print(f"page: {written}")
        return EXIT_OK
    from xla_sentinel.report.tables import download_campaign, report

    if not storage.is_uri(args.dir):
        print(report(storage.local_path(args.dir)))
        print(f"chart: {storage.local_path(args.dir) / 'coverage.png'}")
        return EXIT_OK
    # The report reads the store (SQLite): the snapshot a run uploads at its end.
    store = storage.ObjectStore(args.dir)
    folder = storage.default_staging(args.dir) / "report"
    download_campaign(store, folder)
    print(report(folder))
    store.put(folder / "coverage.png", "coverage.png", replace=True)
    print(f"chart: {store.key_uri('coverage.png')}")
    return EXIT_OK


def _cmd_triage(args: argparse.Namespace) -> int:
    triage = triage_view.read_triage(args.dir)
    for line in triage.errors:  # an unusable finding is named and skipped; the rest is listed
        _error(line)
    print(triage_view.table(triage))
    return EXIT_OK


def _cmd_worker(args: argparse.Namespace) -> int:
    from xla_sentinel.cluster.pod import main as worker_main

    return worker_main(args.rest)


def _cmd_host(args: argparse.Namespace) -> int:
    from xla_sentinel.worker.host_link import serve_remote

    try:
        return serve_remote(args.driver, args.host, args.token, args.connect_seconds)
    except ValueError as e:
        raise UserError(f"--driver: {e}") from None


def _cmd_operator(args: argparse.Namespace) -> int:
    from xla_sentinel_operator.main import run

    return run(args.rest)


def _no_agents_extra(command: str, e: ImportError) -> UserError:
    return UserError(f"{command}: the agents extra is not installed ({e}); "
                     "pip install 'xla-sentinel[agents]'")


def _cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from xla_sentinel.agents.gate import configured_corpus, configured_minimum
        from xla_sentinel.agents.mcp_server import parse_http, require_sdk, serve

        require_sdk()
    except ImportError as e:
        raise _no_agents_extra("mcp", e) from None
    if args.http:
        try:
            parse_http(args.http)
        except ValueError as e:
            raise UserError(str(e)) from None
    campaign = Path(args.campaign) if args.campaign else None
    if campaign:
        load_campaign(campaign)  # a bad file is said before the server starts
    # The corpus and minimum: flags, else what the operator set in the pod's environment.
    corpus = [Path(r) for r in args.regression] if args.regression else configured_corpus()
    minimum = args.min_regression if args.min_regression is not None else configured_minimum()
    return serve(campaign, Path(args.out), args.http, tuple(args.inject_pass or ()), corpus,
                 agent=args.agent, model=args.agent_model, min_regression=minimum,
                 token_file=Path(args.token_file) if args.token_file else None,
                 insecure_loopback=args.insecure_loopback, sandbox=args.sandbox)


def _cmd_sandbox_server(args: argparse.Namespace) -> int:
    from xla_sentinel.agents.sandbox_exchange import Server

    if args.run_seconds <= 0:
        raise UserError(f"--run-seconds: must be > 0, got {args.run_seconds}")
    Server(Path(args.socket), max_seconds=args.run_seconds, own_container=args.own_container,
           confine=not args.no_confine).serve_forever()
    return 0


def _cmd_agent(args: argparse.Namespace) -> int:
    import asyncio

    try:
        from xla_sentinel.agents.runtime import Budget, make_model, mcp_toolset, run_agent
    except ImportError as e:
        raise _no_agents_extra("agent", e) from None
    try:
        budget = Budget(args.max_tokens, args.max_tool_calls, args.max_seconds)
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.tasks < 1:
        raise UserError(f"--tasks: must be >= 1, got {args.tasks}")
    spending = _spending(args)
    campaign, swarm, name = _agent_place(args)
    if campaign:
        load_campaign(campaign)
    records: list[dict[str, Any]] = []
    try:
        model = make_model(args.model, args.fallback_model)
        for _ in range(1 if args.task is not None else args.tasks):
            toolset = mcp_toolset(campaign, Path(args.out), args.mcp_url, args.inject_pass or (),
                                  agent=name, model=args.model)
            record = asyncio.run(run_agent(args.role, model, toolset, Path(args.out), name, budget,
                                           args.task, lease_seconds=args.lease_seconds,
                                           campaign=campaign, swarm=swarm, spending=spending,
                                           task_attempts=args.task_attempts))
            records.append(record)
            if record["status"] == "no_task" or record["exit"] != 0:
                break
    except ImportError as e:
        raise _no_agents_extra("agent", e) from None
    for record in records:
        print(json.dumps(record, indent=1, default=str))
    return int(records[-1]["exit"])


def _spending(args: argparse.Namespace) -> SpendingBudget:
    """The agent's campaign-wide budget from --campaign-max-tokens/-usd and --task-attempts,
    each checked."""
    import math

    from xla_sentinel.agents.spend import Budget

    if args.campaign_max_tokens is not None and args.campaign_max_tokens < 1:
        raise UserError(f"--campaign-max-tokens: must be >= 1, got {args.campaign_max_tokens}")
    if args.campaign_max_usd is not None and not (math.isfinite(args.campaign_max_usd) and args.campaign_max_usd > 0):
        raise UserError(f"--campaign-max-usd: must be > 0, got {args.campaign_max_usd}")
    if args.task_attempts < 1:
        raise UserError(f"--task-attempts: must be >= 1, got {args.task_attempts}")
    return Budget(args.campaign_max_tokens, args.campaign_max_usd)


def _agent_place(args: argparse.Namespace) -> tuple[Path | None, Swarm | None, str]:
    """The agent's campaign file, swarm (None outside one) and name: from the flags, or in an
    agent pod of a campaign's swarm from its environment (docs/agents.md, "Running a swarm")."""
    campaign = Path(args.campaign) if args.campaign else None
    if args.task is not None or os.environ.get("XLA_SENTINEL_TASK_QUEUE") != "kube":
        return campaign, None, args.name
    from xla_sentinel.agents.swarm import Swarm

    swarm = Swarm.from_env()
    if campaign is None and os.environ.get("XLA_SENTINEL_SPEC"):
        campaign = Path(args.out) / "campaign.json"  # JSON is YAML: load_campaign reads it
        campaign.parent.mkdir(parents=True, exist_ok=True)
        campaign.write_text(os.environ["XLA_SENTINEL_SPEC"])
    return campaign, swarm, swarm.agent


def _error(line: str) -> None:
    print(f"xla-sentinel: error: {line}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="xla-sentinel", description=__doc__.splitlines()[0])
    p.add_argument("--version", action=VersionAction)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a campaign locally")
    add_campaign(run, required=True)
    add_out(run, "output folder or gs://, s3:// URI (resumed if it holds this campaign)")
    run.add_argument("--staging", help="local folder a URI --out is staged in "
                     "(default: ~/.cache/xla-sentinel/staging/..., or $XLA_SENTINEL_STAGING)")
    run.add_argument("--storage-wait", type=float, default=120.0, metavar="S",
                     help="seconds to wait at the end for a store that is down (default 120)")
    add_overrides(run)
    add_inject_pass(run)
    add_quiet(run)
    run.set_defaults(fn=_cmd_run)

    check = sub.add_parser("check", help="re-run one program folder under a campaign's targets")
    check.add_argument("program", help="program folder (module.mlir, inputs.npz, ...)")
    add_campaign(check)
    add_inject_pass(check)
    check.set_defaults(fn=_cmd_check)

    bis = sub.add_parser("bisect", help="localize and reduce one finding; writes its repro bundle")
    bis.add_argument("finding", help="finding folder (OUT/findings/ID; OUT may be a URI), or "
                     "with --versions a repro bundle")
    bis.add_argument("--timeout", type=float, default=120.0, help="seconds per compile and run")
    bis.add_argument("--versions", metavar="A..B|V",
                     help="instead: the first jaxlib release in A..B that shows the finding (or "
                     "repro bundle), or whether release V still does (docs/versions.md)")
    bis.add_argument("--install", action="store_true",
                     help="with --versions: create missing release environments from PyPI")
    bis.set_defaults(fn=_cmd_bisect)

    replay = sub.add_parser("replay", help="replay trace folders, XLA dumps or module files")
    replay.add_argument("paths", nargs="+", help="trace folders, dump folders or module files")
    add_out(replay, "output folder")
    add_campaign(replay)
    add_inject_pass(replay)
    add_quiet(replay)
    replay.set_defaults(fn=_cmd_replay)

    rec = sub.add_parser("record", help="run a JAX program and record every computation it compiles")
    add_out(rec, "trace folder root (one folder per distinct module)")
    rec.add_argument("--with-values", action="store_true",
                     help="store argument and result values (default: statistics only)")
    rec.add_argument("cmd", nargs=argparse.REMAINDER, help="-- python train.py [args]")
    rec.set_defaults(fn=_cmd_record)

    triage = sub.add_parser("triage", help="list the signatures of a campaign output folder or URI")
    triage.add_argument("dir")
    triage.set_defaults(fn=_cmd_triage)
    rep = sub.add_parser("report", help="coverage and findings of a campaign folder: tables, DIR/coverage.png")
    rep.add_argument("dir")
    rep.add_argument("--html", nargs="?", const="", metavar="PAGE",
                     help="write the self-contained triage page instead (default DIR/report.html)")
    rep.set_defaults(fn=_cmd_report)

    mcp = sub.add_parser("mcp", help="serve the engine to agents over the Model Context Protocol "
                         "(docs/agents.md)")
    add_campaign(mcp)
    add_out(mcp, "the campaign's output folder")
    mcp.add_argument("--http", metavar="HOST:PORT", help="streamable HTTP at /mcp instead of stdio")
    add_inject_pass(mcp)
    mcp.add_argument("--regression", action="append", metavar="REPRO.py",
                     help="the regression corpus of fixes (repeatable; default: the *.py of the folder "
                     "$XLA_SENTINEL_REGRESSION_CORPUS, else the package's, bench/repros)")
    mcp.add_argument("--min-regression", type=int, metavar="N",
                     help="refuse a fix verified against fewer known bugs' reproducers "
                          "(default $XLA_SENTINEL_MIN_REGRESSION, else 8)")
    mcp.add_argument("--agent", default="mcp-client", help="the name claims are recorded under")
    mcp.add_argument("--agent-model", default="unknown", help="the model claims are recorded under")
    mcp.add_argument("--token-file", metavar="FILE", help="--http: the bearer token clients must send "
                     "(else $XLA_SENTINEL_MCP_TOKEN)")
    mcp.add_argument("--insecure-loopback", action="store_true",
                     help="--http on a loopback address without a token")
    mcp.add_argument("--sandbox", action="store_true", help="run agent code with no network and none of "
                     "this machine's files but its own folder (bubblewrap, else unshare)")
    mcp.set_defaults(fn=_cmd_mcp)

    agent = sub.add_parser("agent", help="run one agent over the MCP tools (docs/agents.md)")
    agent.add_argument("--role", required=True, choices=["stress", "reproduce", "fix"])
    agent.add_argument("--model", required=True, help="provider:model, e.g. openai:gpt-5, "
                       "anthropic:claude-sonnet-4-5, google:gemini-2.5-pro")
    agent.add_argument("--fallback-model", help="provider:model that takes over when --model fails "
                       "(an outage, a rejected request), after its rate-limit retries")
    add_campaign(agent)
    add_out(agent, "the campaign's output folder")
    agent.add_argument("--name", default="agent", help="this agent's name in claims and leases")
    agent.add_argument("--task", help="the task as text (default: take one from the queue)")
    agent.add_argument("--mcp-url", help="a running `xla-sentinel mcp --http` (default: start one over stdio)")
    add_inject_pass(agent)
    agent.add_argument("--max-tokens", type=int, default=400_000)
    agent.add_argument("--max-tool-calls", type=int, default=60)
    agent.add_argument("--max-seconds", type=float, default=1800.0)
    agent.add_argument("--tasks", type=int, default=1, help="tasks to take from the queue, one after another "
                       "(each with the budgets above); stops early when none is left or a budget stops one")
    agent.add_argument("--lease-seconds", type=float, help="how long a taken task stays this agent's "
                       "(default: --max-seconds + 60)")
    agent.add_argument("--campaign-max-tokens", type=int, help="the campaign-wide budget: tokens all "
                       "tasks of the queue may spend together (no task is taken once spent)")
    agent.add_argument("--campaign-max-usd", type=float, help="the campaign-wide budget in dollars "
                       "(priced by genai-prices' offline data)")
    agent.add_argument("--task-attempts", type=int, default=3, help="attempts at one task before it is dropped")
    agent.set_defaults(fn=_cmd_agent)

    sandbox = sub.add_parser("sandbox-server", help="run agent code handed over a unix socket: the agent "
                             "pod's sandbox container (docs/agents.md)")
    sandbox.add_argument("--socket", required=True, metavar="PATH", help="the socket to listen on (in the "
                         "folder the agent runtime's container shares; it sets $XLA_SENTINEL_SANDBOX_SOCKET)")
    # Not --max-seconds: that is an agent's whole budget (`agent`), this one run's limit.
    sandbox.add_argument("--run-seconds", type=float, default=900.0,
                         help="the longest one run may take, whatever its caller asks")
    sandbox.add_argument("--own-container", action="store_true", help="this container runs nothing else: "
                         "kill every other process of it before and after each run")
    sandbox.add_argument("--no-confine", action="store_true",
                         help="do not also run each command under the local sandbox (bwrap/unshare)")
    sandbox.set_defaults(fn=_cmd_sandbox_server)

    worker = sub.add_parser("worker", help="container entrypoint of a campaign worker",
                            add_help=False)
    worker.add_argument("rest", nargs=argparse.REMAINDER)
    worker.set_defaults(fn=_cmd_worker)

    host = sub.add_parser("host", help="serve one host (1..N-1) of a multi-host group to its driver over TCP "
                          "(docs/spmd.md; a JobSet's pods run `worker`, which does this on hosts 1..N-1)")
    host.add_argument("--driver", required=True, metavar="HOST:PORT", help="the driver's address (host 0)")
    host.add_argument("--host", type=int, required=True, help="this host's index, 1..N-1")
    host.add_argument("--token", default="", help="the group's token, as the driver was given it")
    host.add_argument("--connect-seconds", type=float, default=600.0,
                      help="give up (exit 1) when the driver is unreachable this long")
    host.set_defaults(fn=_cmd_host)

    op = sub.add_parser("operator", help="run the Kubernetes operator", add_help=False)
    op.add_argument("rest", nargs=argparse.REMAINDER)
    op.set_defaults(fn=_cmd_operator)
    return p


# Subcommands with parsers of their own: everything after the name is theirs, flags first
# included (argparse.REMAINDER would refuse `worker --api-server ...`).
PASSTHROUGH = {"worker": _cmd_worker, "operator": _cmd_operator}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PASSTHROUGH:
        return PASSTHROUGH[argv[0]](argparse.Namespace(rest=argv[1:]))
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except UserError as e:
        _error(str(e))
        return e.exit_code
    except WorkerStartError as e:
        # The machine, not the input (a worker died or did not answer before any program
        # ran); nothing was judged, so it is no "bugs found" either.
        _error(str(e))
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
