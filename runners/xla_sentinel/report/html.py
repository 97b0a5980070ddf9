"""The triage page: one self-contained HTML document (inline CSS, inline SVG plots, no
script, nothing fetched) built from plain records, so the CLI (`report DIR --html`, from a
campaign folder) and the operator (a namespace's BugSignatures and campaigns) render the
same page. A pure function of its input: the standard library and core/model.py's verdict
table only, no jax, no numpy.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import datetime

from xla_sentinel.core.model import VERDICT_TABLE
from xla_sentinel.report.agents import AgentRunRow, agents_section

# What the page may load: nothing but itself (inline styles, data: images).
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
PALETTE = ("#c0392b", "#2471a3", "#b9770e", "#7d3c98", "#138d75", "#5d6d7e", "#a04000")
# Verdicts keep their colour across plots and pages (core/model.py VERDICT_TABLE); keyed by
# the plain value, as the page's records carry it.
VERDICT_COLOURS = {v.value: i.colour for v, i in VERDICT_TABLE.items()} | {"all": "#1b1f23"}
TOP = 15


@dataclass(frozen=True)
class SignatureRow:
    """One bug signature as the page shows it; `repro_href` is a link a browser can follow
    from the page (None: shown as text, e.g. a path inside a worker pod)."""

    id: str
    verdict: str
    count: int
    first_seen: str
    last_seen: str
    state: str
    target: str | None = None
    culprit_op: str | None = None
    culprit_pass: str | None = None
    fusion_kind: str | None = None
    dtype: str | None = None
    repro: str | None = None
    repro_href: str | None = None
    issue_href: str | None = None
    # Where the bug began and a fix verification (docs/versions.md): versions_note().
    versions: str | None = None
    # The configurations the bug shows in (one signature for one bug: campaign/recording.py).
    configurations: tuple[str, ...] = ()
    # A cure the agents' gate verified (docs/agents.md), kept in the store's fixes table.
    verified_fix: str | None = None


def versions_note(introduced_in: str | None, last_good: str | None, verification: str | None,
                  verification_jaxlib: str | None) -> str | None:
    """A signature's release fields as the page words them, None when it has none."""
    parts = []
    if introduced_in:
        parts.append(f"introduced in jaxlib {introduced_in}"
                     + (f", last good {last_good}" if last_good else ""))
    if verification:
        # "still_failing" (a local store) and "still-failing" (a BugSignature) alike.
        parts.append(f"{verification.replace('_', ' ').replace('-', ' ')} on jaxlib "
                     f"{verification_jaxlib or '?'}")
    return "; ".join(parts) or None


@dataclass(frozen=True)
class CampaignRow:
    name: str
    phase: str
    programs: int
    findings: int
    signatures: int
    workers: str
    started: str | None
    programs_per_s: float | None


@dataclass(frozen=True)
class Event:
    """A point of "findings over time": when, and the series it counts in (its verdict)."""

    time: str
    series: str


@dataclass
class Page:
    title: str
    source: str  # where the data came from: a folder, a namespace
    generated: str
    signatures: list[SignatureRow] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    events_label: str = "findings"  # what one event is
    campaigns: list[CampaignRow] = field(default_factory=list)
    throughput: list[tuple[str, str]] = field(default_factory=list)  # (figure, value)
    program_seconds: list[float] = field(default_factory=list)  # for the time histogram
    tables: dict[str, dict[str, int]] = field(default_factory=dict)  # title -> key -> count
    coverage: dict[str, dict[str, int]] = field(default_factory=dict)  # title -> key -> count
    lists: dict[str, list[str]] = field(default_factory=dict)  # title -> names (ops never drawn)
    # XLA:CPU kernel decisions (campaign/coverage.py KERNEL_DECISIONS): (decision, what it
    # is, programs that reached it), every decision of the table, reached or not.
    decisions: list[tuple[str, str, int]] = field(default_factory=list)
    decisions_with_hlo: int = 0
    notes: list[str] = field(default_factory=list)
    agent_runs: list[AgentRunRow] = field(default_factory=list)  # report/agents.py


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None


def _short(text: str | None) -> str:
    """An ISO time as a person reads it: date and time to the second, UTC offset dropped."""
    t = _time(text or "")
    return t.strftime("%Y-%m-%d %H:%M:%S") if t else (text or "")


# --- plots (inline SVG) -------------------------------------------------------------------

def timeline_svg(events: list[Event], label: str, width: int = 720, height: int = 240) -> str:
    """Cumulative count of `events` over time, one step line per series, with a legend."""
    points = sorted((t, e.series) for e in events if (t := _time(e.time)) is not None)
    if not points:
        return f'<p class="empty">No {_e(label)} yet.</p>'
    left, right, top, bottom = 48, 150, 12, 40
    t0, t1 = points[0][0].timestamp(), points[-1][0].timestamp()
    span = max(t1 - t0, 1.0)
    series: dict[str, list[float]] = {}
    for t, s in points:
        series.setdefault(s, []).append(t.timestamp())
    if len(series) > 1:
        # Lines of one series each overlap at the axes; their sum reads at a glance.
        series["all"] = [t.timestamp() for t, _ in points]
    ymax = max(len(v) for v in series.values())
    pw, ph = width - left - right, height - top - bottom

    def x(ts: float) -> float:
        return left + pw * (ts - t0) / span

    def y(n: int) -> float:
        return top + ph * (1 - n / ymax)

    parts = [f'<svg class="plot" role="img" aria-label="{_e(label)} over time" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>cumulative {_e(label)} over time</title>",
             f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" class="axis"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" class="axis"/>',
             f'<text x="{left - 6}" y="{top + ph}" text-anchor="end">0</text>',
             f'<text x="{left - 6}" y="{top + 10}" text-anchor="end">{ymax}</text>',
             f'<text x="{left}" y="{height - 20}">{_e(points[0][0].strftime("%Y-%m-%d %H:%M:%S"))}</text>',
             f'<text x="{left + pw}" y="{height - 20}" text-anchor="end">'
             f'{_e(points[-1][0].strftime("%Y-%m-%d %H:%M:%S"))}</text>',
             f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">time (UTC)</text>']
    for i, (name, times) in enumerate(sorted(series.items())):
        colour = VERDICT_COLOURS.get(name, PALETTE[i % len(PALETTE)])
        # A step line: the count holds until the next event.
        coords = [(x(t0), y(0))]
        for n, ts in enumerate(times, 1):
            coords += [(x(ts), y(n - 1)), (x(ts), y(n))]
        coords.append((x(t1), y(len(times))))
        pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in coords)
        parts.append(f'<polyline class="series" data-series="{_e(name)}" points="{pts}" '
                     f'fill="none" stroke="{colour}" stroke-width="2"/>')
        ly = top + 14 + 18 * i
        parts.append(f'<rect x="{left + pw + 12}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{left + pw + 26}" y="{ly}">{_e(name)} ({len(times)})</text>')
    parts.append("</svg>")
    return "".join(parts)


def bars_svg(counts: dict[str, int], label: str, top_n: int = TOP, width: int = 520) -> str:
    """A horizontal bar per key (largest first, `top_n` of them), its count at the bar's end."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top_n]
    if not items:
        return f'<p class="empty">No {_e(label)}.</p>'
    row, left = 18, 170
    height = row * len(items) + 8
    vmax = max(v for _, v in items) or 1
    parts = [f'<svg class="plot" role="img" aria-label="{_e(label)}" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{_e(label)}</title>"]
    for i, (key, v) in enumerate(items):
        w = (width - left - 60) * v / vmax
        yy = 4 + i * row
        parts.append(f'<text x="{left - 6}" y="{yy + 12}" text-anchor="end">{_e(key[:34])}</text>')
        parts.append(f'<rect class="bar" x="{left}" y="{yy + 2}" width="{w:.1f}" height="{row - 5}"'
                     f' fill="{PALETTE[1]}"><title>{_e(key)}: {v}</title></rect>')
        parts.append(f'<text x="{left + w + 4:.1f}" y="{yy + 12}">{v}</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(values: list[float], bins: int = 12) -> dict[str, int]:
    """Counts of `values` in equal-width bins, keyed by the bin's range in seconds."""
    if not values:
        return {}
    lo, hi = min(values), max(values)
    step = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / step), bins - 1)] += 1
    return {f"{lo + i * step:.2f}-{lo + (i + 1) * step:.2f} s": c for i, c in enumerate(counts) if c}


# --- the page -----------------------------------------------------------------------------

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#1b1f23;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#586069}.cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:20px}.ok{color:#138d75}.refused{color:#c0392b}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #e1e4e8;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}td.n{text-align:right}
code{font-size:12px}.verdict{font-weight:600}.state-new,.state-regressed{color:#c0392b}
.state-fixed{color:#138d75}.empty{color:#586069;font-style:italic}
svg.plot text{font-size:11px;fill:#1b1f23}svg.plot .axis{stroke:#586069}
.grid{display:flex;flex-wrap:wrap;gap:8px 32px}
"""

SIGNATURE_COLUMNS = ("signature", "verdict", "culprit op", "pass", "dtype", "count", "first seen",
                     "last seen", "state", "repro")


def _signature_row(s: SignatureRow) -> str:
    if s.repro_href:
        repro = f'<a class="repro" href="{_e(s.repro_href)}">{_e(s.repro)}</a>'
        if s.issue_href:
            repro += f' (<a class="issue" href="{_e(s.issue_href)}">issue text</a>)'
    else:
        repro = f"<code>{_e(s.repro)}</code>" if s.repro else "—"
    shown_in = s.configurations if len(s.configurations) > 1 else ()
    detail = " ".join(filter(None, [f"configurations {', '.join(shown_in)}" if shown_in
                                    else f"target {s.target}" if s.target else "",
                                    f"fusion {s.fusion_kind}" if s.fusion_kind else "",
                                    f"({s.versions})" if s.versions else "",
                                    f"verified cure: {s.verified_fix}" if s.verified_fix else ""]))
    cells = [f'<td><code>{_e(s.id)}</code></td>',
             f'<td class="verdict" style="color:{VERDICT_COLOURS.get(s.verdict, "inherit")}">'
             f"{_e(s.verdict)}</td>",
             f'<td><code>{_e(s.culprit_op or "not localized")}</code>'
             + (f'<br><span class="meta">{_e(detail)}</span>' if detail else "") + "</td>",
             f"<td>{_e(s.culprit_pass or '—')}</td>", f"<td>{_e(s.dtype or '—')}</td>",
             f'<td class="n">{s.count}</td>', f"<td>{_e(_short(s.first_seen))}</td>",
             f"<td>{_e(_short(s.last_seen))}</td>",
             f'<td class="state-{_e(s.state.split(":")[0])}">{_e(s.state)}</td>', f"<td>{repro}</td>"]
    return f'<tr data-signature="{_e(s.id)}">{"".join(cells)}</tr>'


def _table(counts: dict[str, int], key: str = "key", top_n: int = TOP) -> str:
    items = list(counts.items())
    rows = "".join(f'<tr><td>{_e(k)}</td><td class="n">{v}</td></tr>' for k, v in items[:top_n])
    if len(items) > top_n:
        rows += (f'<tr><td class="meta">({len(items) - top_n} more)</td>'
                 f'<td class="n">{sum(v for _, v in items[top_n:])}</td></tr>')
    if not items:
        rows = '<tr><td class="empty">(none)</td><td class="n">0</td></tr>'
    return f"<table><tr><th>{_e(key)}</th><th>count</th></tr>{rows}</table>"


def _decisions(page: Page) -> str:
    """The kernel-decision table: reached ones with their program counts, the others marked."""
    reached = sum(1 for *_, n in page.decisions if n)
    rows = "".join(
        f'<tr data-decision="{_e(d)}"><td>{_e(d)}</td><td>{_e(what)}</td>'
        + (f'<td class="n">{n}</td></tr>' if n else '<td class="n empty">never</td></tr>')
        for d, what, n in page.decisions)
    return ('<h2 id="kernel-decisions">Kernel decisions</h2>'
            f'<p class="meta">{reached} of {len(page.decisions)} reached, in the first target\'s '
            f"optimized HLO of {page.decisions_with_hlo} programs</p>"
            '<table id="decision-table"><tr><th>decision</th><th>what</th><th>programs</th></tr>'
            f"{rows}</table>")


def render_page(page: Page) -> str:
    """The whole HTML document for `page`."""
    sigs = sorted(page.signatures, key=lambda s: (-s.count, s.first_seen, s.id))
    cards = [("signatures", len(sigs)), ("findings", sum(s.count for s in sigs)),
             *[(k, v) for k, v in page.throughput[:2]]]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(page.title)}</title><style>{STYLE}</style></head><body>",
           f"<h1>{_e(page.title)}</h1>",
           f'<p class="meta">{_e(page.source)} · generated {_e(_short(page.generated))} UTC</p>',
           '<div class="cards">' + "".join(f'<div class="card"><b>{_e(v)}</b>{_e(k)}</div>'
                                           for k, v in cards) + "</div>"]
    out += [f"<p>{_e(n)}</p>" for n in page.notes]
    out.append('<h2 id="signatures">Bug signatures</h2>')
    if sigs:
        head = "".join(f"<th>{c}</th>" for c in SIGNATURE_COLUMNS)
        out.append(f'<table id="signature-table"><thead><tr>{head}</tr></thead><tbody>'
                   + "".join(_signature_row(s) for s in sigs) + "</tbody></table>")
    else:
        out.append('<p class="empty">No bug signatures.</p>')
    out += [f'<h2 id="over-time">{_e(page.events_label.capitalize())} over time</h2>',
            timeline_svg(page.events, page.events_label)]
    if page.campaigns:
        out.append('<h2 id="campaigns">Campaigns</h2><table id="campaign-table"><tr><th>campaign</th>'
                   "<th>phase</th><th>programs</th><th>findings</th><th>signatures</th>"
                   "<th>workers</th><th>started</th><th>programs/s</th></tr>")
        for c in page.campaigns:
            rate = f"{c.programs_per_s:.2f}" if c.programs_per_s is not None else "—"
            out.append(f'<tr data-campaign="{_e(c.name)}"><td>{_e(c.name)}</td><td>{_e(c.phase)}</td>'
                       f'<td class="n">{c.programs}</td><td class="n">{c.findings}</td>'
                       f'<td class="n">{c.signatures}</td><td>{_e(c.workers)}</td>'
                       f'<td>{_e(_short(c.started))}</td><td class="n">{rate}</td></tr>')
        out.append("</table>")
    if page.agent_runs:
        out.append(agents_section(page.agent_runs))
    if page.throughput or page.program_seconds:
        out.append('<h2 id="throughput">Throughput</h2><div class="grid"><table>'
                   + "".join(f"<tr><th>{_e(k)}</th><td class=\"n\">{_e(v)}</td></tr>"
                             for k, v in page.throughput) + "</table>")
        if page.program_seconds:
            out.append("<div><p class=\"meta\">seconds per program (programs)</p>"
                       + bars_svg(histogram(page.program_seconds), "seconds per program", top_n=12)
                       + "</div>")
        out.append("</div>")
    if page.tables:
        out.append('<h2 id="counts">Programs and findings</h2><div class="grid">')
        out += [f"<div><h3>{_e(t)}</h3>{_table(c)}</div>" for t, c in page.tables.items()]
        out.append("</div>")
    for title, names in page.lists.items():
        out.append(f"<h3>{_e(title)} ({len(names)})</h3><p>{_e(', '.join(names) or '(none)')}</p>")
    if page.decisions:
        out.append(_decisions(page))
    if page.coverage:
        out.append('<h2 id="coverage">Coverage</h2><div class="grid">')
        out += [f"<div><h3>{_e(t)}</h3>{bars_svg(c, t, width=440)}</div>"
                for t, c in page.coverage.items()]
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out)
