"""`xla-sentinel report DIR`: what a campaign exercised and found, as tables and a chart.

Reads the campaign store (DIR/campaign.sqlite), so it works on a campaign that is still
running or was interrupted before summary.json was written. Prints markdown tables
(programs by status, findings by verdict, each coverage section, the generator's ops
never drawn) and writes DIR/coverage.png. No jax: the op table is read only to list the
ops never drawn, and only for campaigns of generated programs.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from . import coverage
from .program import ProgramError

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
    cov = coverage.total(coverage.stored_stats(folder / "campaign.sqlite")).to_json()
    return {"status": dict(status), "findings": dict(verdicts), "coverage": cov, "generated": generated}


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
    from .ops import OPS  # imports jax; only the report needs it

    return sorted(set(OPS) - set(cov["ops"]))


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
