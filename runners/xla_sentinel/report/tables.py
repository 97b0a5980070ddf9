"""`xla-sentinel report DIR|URI`: what a campaign exercised and found, as tables and a chart,
or (`--html`) as the triage page of `html_report`.

Reads the campaign store (DIR/campaign.sqlite), so it works on a campaign that is still
running or was interrupted before summary.json was written. Prints markdown tables
(programs by status, findings by verdict, each coverage section, the process layouts
programs were drawn for and ran on, the generator's ops never drawn) and writes
DIR/coverage.png. No jax: the op table is read only to list the ops never drawn, and only
for campaigns of generated programs.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from xla_sentinel.campaign import coverage
from xla_sentinel.core.model import Signature
from xla_sentinel.core.program import ProgramError
from xla_sentinel.report.agents import RUNS, read_runs
from xla_sentinel.report.html import Event, Page, SignatureRow, render_page, versions_note
from xla_sentinel.spec.campaign import OP_NAMES
from xla_sentinel.storage import objects as storage
from xla_sentinel.storage.store import read_fixes, read_signatures

TOP = 15
SECTION_TITLES = {
    "ops": "Ops (occurrences)", "op_pairs": "Producer>consumer op pairs (occurrences)",
    "dtypes": "Dtypes (programs)", "ranks": "Ranks (programs)",
    "special": "Special-value kinds in inputs (programs)",
    "fusion_kinds": "Fusions in the first target's optimized HLO (fusions)",
    "fused": "Opcodes inside fusions, by fusion kind (programs)",
    "passes_changed": "Passes that changed the module (sampled programs)",
}


def _open(folder: Path) -> sqlite3.Connection:
    db = folder / "campaign.sqlite"
    if not db.is_file():
        raise ProgramError(f"{folder}: not a campaign folder (no campaign.sqlite)")
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        con.execute("SELECT count(*) FROM programs").fetchone()
    except sqlite3.DatabaseError as e:
        raise ProgramError(f"{db}: not a readable campaign store ({e})") from None
    return con


def collect(folder: Path) -> dict[str, Any]:
    """Status counts, findings by verdict, and coverage totals of the campaign in `folder`."""
    con = _open(folder)
    try:
        status = Counter(dict(con.execute("SELECT status, count(*) FROM programs GROUP BY status")))
        verdicts = Counter(dict(con.execute("SELECT verdict, count(*) FROM findings GROUP BY verdict")))
        # Generated programs have indices >= 0; traces and corpus files negative ones.
        generated = con.execute("SELECT count(*) FROM programs WHERE idx >= 0").fetchone()[0]
    finally:
        con.close()
    stats = coverage.stored_stats(folder / "campaign.sqlite")
    cov = coverage.total(stats).to_json()
    return {"status": dict(status), "findings": dict(verdicts), "coverage": cov, "generated": generated,
            "layouts": coverage.layout_programs(stats), "multihost": _summary(folder).get("multihost")}


def _summary(folder: Path) -> dict[str, Any]:
    """The campaign's summary.json; {} before it is written (a campaign still running)."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def layout_lines(data: dict[str, Any]) -> list[str]:
    """The process layouts section: programs per layout (coverage.layout_programs), and,
    for a campaign of several hosts, how many of those that ran on its group held a
    collective across hosts (the group's own count, summary.json `multihost`)."""
    programs = data["coverage"]["programs"]
    lines = _table("Process layouts (programs)", data.get("layouts") or {}, programs or None)
    mh = data.get("multihost")
    if mh:
        ran = int(mh.get("programs") or 0)
        crossing = int(mh.get("cross_host_programs") or 0)
        share = f" ({100 * crossing / ran:.0f}%)" if ran else ""
        lines += [f"Programs with a collective across hosts on {mh.get('layout')}: {crossing} of the "
                  f"{ran} that ran on its group{share}; group restarts: {int(mh.get('group_restarts') or 0)}.",
                  ""]
    return lines


def _table(title: str, counts: dict[str, int], total: int | None = None, top: int = TOP) -> list[str]:
    lines = [f"### {title}", "", "| key | count |" + (" share |" if total else ""),
             "|---|---|" + ("---|" if total else "")]
    items = list(counts.items())
    for k, v in items[:top]:
        lines.append(f"| {k} | {v} |" + (f" {100 * v / total:.0f}% |" if total else ""))
    if len(items) > top:
        lines.append(f"| ({len(items) - top} more) | {sum(v for _, v in items[top:])} |" + (" |" if total else ""))
    if not items:
        lines.append("| (none) | 0 |" + (" |" if total else ""))
    return [*lines, ""]


def never_drawn(cov: dict[str, Any]) -> list[str]:
    """Ops of the generator's table that no program of this campaign held."""
    return sorted(set(OP_NAMES) - set(cov["ops"]))


def render(data: dict[str, Any]) -> str:
    cov = data["coverage"]
    n = cov["programs"]
    lines = [f"# Campaign report: {sum(data['status'].values())} programs, {n} with coverage "
             f"({cov['programs_with_hlo']} with optimized HLO, {cov['programs_pass_sampled']} "
             "sampled for pass effects)", ""]
    lines += _table("Programs by status", data["status"])
    lines += _table("Findings by verdict", data["findings"])
    # Share of the programs that could have the key: pass effects are sampled, fusion
    # facts need the optimized HLO; occurrence counts get no share.
    totals = {"dtypes": n, "ranks": n, "special": n, "fused": cov["programs_with_hlo"],
              "passes_changed": cov["programs_pass_sampled"]}
    for section, title in SECTION_TITLES.items():
        lines += _table(title, cov[section], totals.get(section) or None)
    # Every decision of the table, reached or not (the HTML page's section, as text).
    seen = cov.get("kernel_decisions") or {}
    reached = {d: seen[d] for d in coverage.KERNEL_DECISIONS if seen.get(d)}
    lines += _table(f"Kernel decisions reached ({len(reached)} of {len(coverage.KERNEL_DECISIONS)}, programs)",
                    reached, cov["programs_with_hlo"] or None, top=len(coverage.KERNEL_DECISIONS))
    missing_decisions = [d for d in coverage.KERNEL_DECISIONS if not seen.get(d)]
    lines += [f"### Kernel decisions never reached ({len(missing_decisions)})", "",
              ", ".join(missing_decisions) or "(none)", ""]
    lines += layout_lines(data)
    least = sorted(cov["ops"].items(), key=lambda kv: (kv[1], kv[0]))[:TOP]
    lines += _table("Least exercised ops", dict(least))
    if data["generated"]:
        missing = never_drawn(cov)
        lines += [f"### Generator ops never drawn ({len(missing)})", "", ", ".join(missing) or "(none)", ""]
    return "\n".join(lines)


def chart(data: dict[str, Any], path: Path) -> None:
    """A PNG of the coverage: ops, dtypes, fusion kinds, special kinds and pass effects."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cov = data["coverage"]
    panels = [("ops", "ops (occurrences, all)"), ("dtypes", "dtypes (programs)"),
              ("fusion_kinds", "fusion kinds (fusions)"), ("special", "special-value kinds (programs)"),
              ("passes_changed", "passes that changed the module (sampled)"), ("ranks", "ranks (programs)")]
    fig, axes = plt.subplots(2, 3, figsize=(16, 9), gridspec_kw={"width_ratios": [3, 1, 1]})
    for ax, (section, title) in zip(axes.T.flat, panels, strict=True):
        items = sorted(cov[section].items(), key=lambda kv: -kv[1])
        if section == "ops":
            ax.bar(range(len(items)), [v for _, v in items])
            ax.set_xticks(range(len(items)), [k for k, _ in items], rotation=90, fontsize=6)
        else:
            ax.barh([k for k, _ in items][::-1], [v for _, v in items][::-1])
        ax.set_title(title, fontsize=9)
    fig.suptitle(f"coverage of {cov['programs']} programs")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def report(folder: Path) -> str:
    """The markdown report of the campaign in `folder`; also writes folder/coverage.png."""
    folder = Path(folder)
    data = collect(folder)
    chart(data, folder / "coverage.png")
    return render(data)


def _href(target: Path, page_dir: Path) -> str:
    """A link from a page in `page_dir` to `target` (a file, or a folder: trailing slash)."""
    rel = Path(os.path.relpath(target, page_dir)).as_posix()
    return quote(rel) + ("/" if target.is_dir() else "")


def signature_rows(folder: Path, signatures: list[Signature], page_dir: Path,
                   store_uri: str | None = None,
                   configurations: dict[str, list[str]] | None = None,
                   fixes: dict[str, dict[str, Any]] | None = None) -> list[SignatureRow]:
    """The page's rows: a signature's repro links to its bundle (or, not yet bisected, its
    first finding's folder) when that exists on disk, and to the bundle's issue text. For a
    campaign read from `store_uri` the repro is the stored bundle's URI, a link only where a
    browser can open it (http[s]); a gs:// or s3:// URI is shown as text. `configurations`:
    per signature, the configurations its findings show in; `fixes`: the store's verified
    cures (store.read_fixes)."""
    configurations = configurations or {}
    rows = []
    for s in signatures:
        repro, href, issue_href = s.repro, None, None
        if store_uri is not None:
            if repro and not storage.is_uri(repro):
                repro = storage.join(store_uri, repro)
            href = repro if repro and repro.startswith(("https://", "http://")) else None
        elif repro:
            target = folder / repro
            href = _href(target, page_dir) if target.exists() else None
            issue = target / "issue.md"
            issue_href = _href(issue, page_dir) if issue.is_file() else None
        rows.append(SignatureRow(
            id=s.id, verdict=str(s.verdict), count=s.count, first_seen=s.first_seen,
            last_seen=s.last_seen, state=f"known: {s.known_bug}" if s.known_bug else "new",
            target=s.target, culprit_op=s.culprit_op, culprit_pass=s.culprit_pass,
            fusion_kind=s.fusion_kind, dtype=s.dtype, repro=repro, repro_href=href,
            issue_href=issue_href, versions=versions_note(s.introduced_in, s.last_good,
                                                          s.verification, s.verification_jaxlib),
            configurations=tuple(configurations.get(s.id, ())),
            verified_fix=(fixes or {}).get(s.id, {}).get("cure")))
    return rows


def _throughput(folder: Path, programs: int, executions: int, seconds: float) -> list[tuple[str, str]]:
    """Figures from summary.json when the campaign wrote one (wall time is only known
    there), else the store's sums of per-program time."""
    rows = [("programs", str(programs)), ("executions", str(executions))]
    summary = _summary(folder)
    if summary.get("elapsed_s"):
        rows = [("programs/s", f"{summary.get('programs_per_s', 0):.3g}"), *rows,
                ("wall seconds", f"{summary['elapsed_s']:.1f}"),
                ("executions/s", f"{executions / summary['elapsed_s']:.3g}")]
        if summary.get("harness_share") is not None:
            rows.append(("share of time in jax/XLA", f"{100 * summary['harness_share']:.0f}%"))
        rows += [(f"{k} version", str(summary[f"{k}_version"])) for k in ("jax", "jaxlib")
                 if summary.get(f"{k}_version")]
    elif programs:
        rows.append(("program seconds (sum over slots)", f"{seconds:.1f}"))
    return rows


def _layout_counts(data: dict[str, Any]) -> dict[str, int]:
    """The page's process layouts table: programs per layout, and the programs of a
    multi-host layout's group that held a collective across hosts."""
    counts = dict(data.get("layouts") or {})
    mh = data.get("multihost")
    if mh:
        counts[f"{mh.get('layout')}: a collective across hosts"] = int(mh.get("cross_host_programs") or 0)
    return counts


def page_data(folder: Path, page_dir: Path | None = None, store_uri: str | None = None) -> Page:
    """The triage page's records for the campaign in `folder`, links relative to `page_dir`
    (default: the folder itself, where `report --html` writes the page). `store_uri`: the
    folder holds what was downloaded from that URI, whose bundles the repro column names."""
    folder = Path(folder)
    page_dir = Path(page_dir or folder)
    data = collect(folder)
    con = _open(folder)
    try:
        sigs = read_signatures(con)  # a store of an older schema too (read-only here)
        fixes = read_fixes(con)
        events = [Event(t, v) for t, v in con.execute("SELECT time, verdict FROM findings ORDER BY time")]
        shown_in: dict[str, dict[str, None]] = {}
        for sig, target in con.execute("SELECT signature, target FROM findings ORDER BY time, rowid"):
            shown_in.setdefault(sig, {})[target] = None
        seconds = [s for (s,) in con.execute("SELECT seconds FROM programs")]
        programs, executions = con.execute(
            "SELECT COUNT(*), COALESCE(SUM(executions), 0) FROM programs").fetchone()
        name = (con.execute("SELECT value FROM meta WHERE key='name'").fetchone() or [folder.name])[0]
    finally:
        con.close()
    cov = data["coverage"]
    tables = {"Programs by status": data["status"], "Findings by verdict": data["findings"],
              "Process layouts (programs)": _layout_counts(data),
              "Least exercised ops": dict(sorted(cov["ops"].items(), key=lambda kv: (kv[1], kv[0]))[:TOP])}
    lists = {"Generator ops never drawn": never_drawn(cov)} if data["generated"] else {}
    # The campaign's agent runs: its own folder's, and in a cluster's store the campaign's
    # agents/ beside its workers' folders (agents/archive.py).
    runs, unread = read_runs([folder, folder.parent])
    return Page(
        title=f"xla-sentinel: campaign {name}", source=store_uri or str(folder.resolve()),
        generated=datetime.now(UTC).isoformat(timespec="seconds"),
        signatures=signature_rows(folder, sigs, page_dir, store_uri,
                                  {sig: list(t) for sig, t in shown_in.items()}, fixes), events=events,
        throughput=_throughput(folder, programs, executions, sum(seconds)), program_seconds=seconds,
        tables=tables, lists=lists,
        coverage={SECTION_TITLES[k]: cov[k] for k in SECTION_TITLES if cov.get(k)},
        decisions=[(d, what, cov.get("kernel_decisions", {}).get(d, 0))
                   for d, what in coverage.KERNEL_DECISIONS.items()],
        decisions_with_hlo=cov.get("programs_with_hlo", 0),
        agent_runs=runs, notes=[f"agent run not shown: {e}" for e in unread])


def html_report(folder: Path, path: Path | None = None) -> Path:
    """Write the triage page of the campaign in `folder` to `path` (default
    folder/report.html); returns where it went."""
    folder = Path(folder)
    path = Path(path) if path else folder / "report.html"
    path.write_text(render_page(page_data(folder, path.parent)))
    return path


def download_campaign(store: storage.ObjectStore, folder: Path) -> None:
    """Fetch what the report reads of a campaign stored at `store` (written by `run --out
    URI`) into `folder`: the store's snapshot, required, and the summary, which a run
    uploads at its end (wall time and versions come from it)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("campaign.sqlite", "summary.json"):
        try:
            (folder / name).write_bytes(store.read(name))
        except storage.StorageError as e:
            if name == "campaign.sqlite":
                raise storage.StorageError(f"{e} (a run uploads its store's snapshot when it ends)") from None


def download_agent_runs(uri: str, folder: Path) -> list[str]:
    """Fetch the agent runs kept at `uri` and at the campaign's store above it (a worker's
    folder's parent) into folder/agents/runs and folder/../agents/runs, as read_runs reads
    them; the stores that could not be read (named; the page is made without them)."""
    problems = []
    parent = uri.rstrip("/").rsplit("/", 1)[0]
    for where, dest in ((uri, folder), (parent, folder.parent)):
        if "://" in where and not where.split("://", 1)[1]:
            continue  # above a bucket's root there is nothing
        try:
            store = storage.ObjectStore(where)
            for key in store.find(f"{RUNS}/*.json"):
                target = dest / key
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(store.read(key))
        except storage.StorageError as e:
            problems.append(str(e))
    return problems


def html_report_uri(uri: str, path: Path | None = None) -> Path:
    """Write the triage page of the campaign stored at `uri` to `path` (default: report.html
    in the URI's staging folder); returns where it went. The snapshot is read in a folder
    removed afterwards; the page's repro column names the stored bundles."""
    store = storage.ObjectStore(uri)
    path = Path(path) if path else storage.default_staging(uri) / "report" / "report.html"
    with tempfile.TemporaryDirectory(prefix="xla-sentinel-report-") as tmp:
        campaign = Path(tmp) / "campaign"
        download_campaign(store, campaign)
        problems = download_agent_runs(store.uri, campaign)
        data = page_data(campaign, path.parent, store_uri=store.uri)
        data.notes += [f"agent runs not read: {p}" for p in problems]
        page = render_page(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
