"""The triage page's agents section: each agent run kept with the campaign (agents/archive.py
writes `agents/runs/STEM.json` locally and to the campaign's store) as a row: when, role,
agent and model, its task, how it ended, what it spent, and its claims with the gate's
decision. Pure records and HTML, the standard library only; the text of a run (a model's
words, a report's) is escaped like everything on the page.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RUNS = Path("agents") / "runs"
SHOWN = 200  # the newest runs on the page
REASON_CHARS = 160


@dataclass(frozen=True)
class ClaimCell:
    kind: str
    verified: bool
    reason: str


@dataclass(frozen=True)
class AgentRunRow:
    time: str
    role: str
    agent: str
    model: str
    task: str
    status: str
    exit: int
    tokens: int
    usd: float
    transcript: str
    claims: list[ClaimCell] = field(default_factory=list)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def run_row(data: dict[str, Any], transcript: str = "") -> AgentRunRow:
    """A row from a run's record (agents/runtime.run_agent's); missing fields are blank."""
    started = str(data.get("transcript") or "").rsplit("-", 1)[-1].removesuffix(".json")
    when = (datetime.fromtimestamp(int(started), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if started.isdigit() else "")
    spent = data.get("spent") if isinstance(data.get("spent"), dict) else {}
    assert isinstance(spent, dict)
    try:
        usd = float(spent.get("usd") or 0.0)
    except (TypeError, ValueError):
        usd = 0.0
    claims = [ClaimCell(str(c.get("kind") or ""), bool(c.get("verified")), str(c.get("reason") or "")[:REASON_CHARS])
              for c in data.get("claims") or [] if isinstance(c, dict)]
    return AgentRunRow(when, str(data.get("role") or ""), str(data.get("agent") or ""), str(data.get("model") or ""),
                       str(data.get("task") or ""), str(data.get("status") or ""), _int(data.get("exit")),
                       _int(spent.get("tokens")), usd, transcript or str(data.get("transcript") or ""), claims)


def read_runs(folders: Iterable[Path]) -> tuple[list[AgentRunRow], list[str]]:
    """The runs under each folder's agents/runs/ (newest first, each once), and the files
    that could not be read (named, not fatal)."""
    rows: dict[str, AgentRunRow] = {}
    errors: list[str] = []
    for folder in folders:
        for path in sorted((folder / RUNS).glob("*.json")) if (folder / RUNS).is_dir() else []:
            try:
                data = json.loads(path.read_text())
                if not isinstance(data, dict):
                    raise ValueError("not an object")
            except (OSError, ValueError) as e:
                errors.append(f"{path}: {e}")
                continue
            transcript = folder / "agents" / "transcripts" / f"{path.stem}.json"
            rows.setdefault(path.stem, run_row(data, str(transcript) if transcript.is_file() else ""))
    ordered = sorted(rows.values(), key=lambda r: (r.time, r.agent), reverse=True)
    return ordered[:SHOWN], errors


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def agents_section(runs: list[AgentRunRow]) -> str:
    """The section's HTML: a summary line and a table of runs."""
    tokens, usd = sum(r.tokens for r in runs), sum(r.usd for r in runs)
    verified = sum(1 for r in runs for c in r.claims if c.verified)
    claims = sum(len(r.claims) for r in runs)
    out = ['<h2 id="agents">Agents</h2>',
           f'<p class="meta">{len(runs)} runs, {claims} claims ({verified} verified by the gate), '
           f"{tokens} tokens, ${usd:.4f}</p>",
           '<table id="agent-table"><tr><th>time</th><th>role</th><th>agent</th><th>model</th><th>task</th>'
           "<th>ended</th><th>tokens</th><th>$</th><th>claims</th><th>transcript</th></tr>"]
    for r in runs:
        cells = "<br>".join(
            f'<span class="{"ok" if c.verified else "refused"}">{_e(c.kind)}: '
            f'{"verified" if c.verified else "refused"}</span> {_e(c.reason)}' for c in r.claims) or "—"
        out.append(f'<tr data-agent="{_e(r.agent)}" data-exit="{r.exit}"><td>{_e(r.time)}</td><td>{_e(r.role)}</td>'
                   f"<td>{_e(r.agent)}</td><td>{_e(r.model)}</td><td>{_e(r.task)}</td><td>{_e(r.status)}</td>"
                   f'<td class="n">{r.tokens}</td><td class="n">{r.usd:.4f}</td><td>{cells}</td>'
                   f"<td>{_e(r.transcript)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)
