"""XLA's own words for a compile that went wrong inside it: the log lines that flag a compiler
anomaly (docs/detection.md, "Compile anomalies"), one table.

The target's worker matches them in what XLA wrote to fd 2 during the compile
(xla/compiler.py) and returns the matches in its Run reply; the judge turns them into a
`compile_anomaly` verdict and its evidence (judge/assess.py). The bottom layer, no jax: both
sides, and a worker under another jaxlib, import it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict


@dataclass(frozen=True)
class AnomalyPattern:
    name: str
    regex: re.Pattern[str]
    # XLA's message without its numbers and names: what tells one anomaly from another in the
    # signature (the evidence's `error`), the same from program to program.
    canonical: str
    where: str  # the XLA source that logs it, for a reader who wants the context


# Only what says the compiler went wrong, not that the program is large: XLA logs many other
# warnings about the user's program (a donated buffer left unused, an unsupported sharding).
# XLA's time alarms ("Very slow compile?" past two minutes, "Constant folding an instruction
# is taking >" one second) are left out: they fire on a loaded machine as well, and a
# finding must not depend on what else the machine runs.
ANOMALY_PATTERNS: tuple[AnomalyPattern, ...] = (
    # A rewrite and its inverse applied in turn until the per-computation cap (50 runs).
    AnomalyPattern("circular_simplification",
                   re.compile(r"Algebraic simplifier is likely stuck in a circular simplification loop"),
                   "Algebraic simplifier is likely stuck in a circular simplification loop",
                   "xla/hlo/transforms/simplifiers/algebraic_simplifier.cc"),
    # A fixed-point pass that never settles. Today's XLA logs it at VLOG(1) only; older
    # releases (targets of another jaxlib, docs/versions.md) log it as an error.
    AnomalyPattern("pass_fixed_point",
                   re.compile(r"Unexpectedly high number of iterations in HLO passes?"),
                   "Unexpectedly high number of iterations in HLO passes",
                   "xla/hlo/pass/hlo_pass_fix.h"),
)
PATTERNS = {p.name: p for p in ANOMALY_PATTERNS}

# How much of XLA's log one compile's evidence keeps: a module stuck in a loop can log the
# same line for every computation.
MAX_LINES = 8
LINE_CHARS = 400


class AnomalyLine(TypedDict):
    """One line of XLA's log that matched a pattern: a plain dict, so that it crosses the
    worker pipe and the protocol's JSON form as it is."""

    anomaly: str  # AnomalyPattern.name
    line: str


def find_anomalies(log: str) -> list[AnomalyLine]:
    """The lines of `log` that flag an anomaly, each under the first pattern it matches; at
    most MAX_LINES, each cut to LINE_CHARS."""
    found: list[AnomalyLine] = []
    for line in log.splitlines():
        pattern = next((p for p in ANOMALY_PATTERNS if p.regex.search(line)), None)
        if pattern is not None:
            found.append(AnomalyLine(anomaly=pattern.name, line=line.strip()[:LINE_CHARS]))
            if len(found) == MAX_LINES:
                break
    return found


def anomaly_evidence(found: Sequence[AnomalyLine]) -> dict[str, Any]:
    """A compile_anomaly verdict's evidence: the first anomaly's pattern, every matched line,
    and its canonical message as `error`, the text the signature reads (triage/signature.py)."""
    first = PATTERNS[found[0]["anomaly"]]
    return {"anomaly": first.name, "log": [a["line"] for a in found], "error": first.canonical}
