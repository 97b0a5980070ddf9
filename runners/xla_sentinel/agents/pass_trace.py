"""The per-pass HLO trace of a program (the MCP tool `pass_trace`): what each HLO pass of
one target's compile did to the module, as XLA's own dumps show it.

The program is compiled once in a child process (a crash or hang of XLA stays there, as in
the engine's workers) under the target's options plus `--xla_dump_to`,
`--xla_dump_hlo_pass_re` (which passes to dump; `.*` all) and text dumps. XLA writes a
snapshot of the module after each pass that changed it (and at each pipeline's start),
`module_NNNN.<name>.<seq>.<pipeline>.after_<pass>.before_<next>.txt`; consecutive
snapshots in `seq` order differ by what the later one's pass did. The trace lists every
pass that changed the module, in order, with a unified diff of its change (one line of
context), and is bounded by `max_chars` of JSON: the diffs are kept in pipeline order
until the budget is spent, the rest named with their size only (`truncated`).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run in the child: compile a saved Program's module with the given options. A string (as
# sandbox.LOAD): the compiler imports jax, which this package does not.
COMPILE = (
    "import json, sys; from pathlib import Path; from xla_sentinel.core.program import Program; "
    "from xla_sentinel.xla.compiler import compile_module; "
    "compile_module(Program.load(Path(sys.argv[1])).module, json.loads(sys.argv[2]), sys.argv[3])"
)
SNAPSHOT = re.compile(
    r"^module_(\d+)\..+?\.(\d{4})\.([^.]+)\.after_([^.]+?)(?:\.before_([^.]+))?\.txt$"
)
START = "pipeline-start"
MIN_CHARS, MAX_CHARS = 1000, 200_000


class TraceError(ValueError):
    pass


def snapshots(dump: Path) -> list[tuple[int, str, str, Path]]:
    """(seq, pipeline, pass after which, file) of the module with the most snapshots
    (a compile may dump helper modules too), in seq order."""
    found: dict[str, list[tuple[int, str, str, Path]]] = {}
    for f in dump.iterdir():
        m = SNAPSHOT.match(f.name)
        if m:
            found.setdefault(m.group(1), []).append((int(m.group(2)), m.group(3), m.group(4), f))
    if not found:
        return []
    most = max(found, key=lambda module: len(found[module]))
    return sorted(found[most])


def _diff(before: str, after: str) -> tuple[str, int]:
    lines = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), n=1, lineterm="")
        if not line.startswith(("---", "+++"))
    ]
    return "\n".join(lines), sum(1 for line in lines if line[:1] in "+-")


def trace(dump: Path, max_chars: int) -> dict[str, Any]:
    """The trace of one compile's dump folder (module docstring), at most `max_chars` of JSON."""
    snaps = snapshots(dump)
    if not snaps:
        raise TraceError(
            "XLA wrote no per-pass snapshot (no pass matched, or the dump flags were not honoured)"
        )
    before = next(iter(dump.glob("*before_optimizations.txt")), None)
    previous = before.read_text() if before is not None else snaps[0][3].read_text()
    changes: list[dict[str, Any]] = []
    for seq, pipeline, after, path in snaps:
        text = path.read_text()
        if text != previous:
            diff, size = _diff(previous, text)
            # A pipeline's start differs from the last snapshot where passes between the
            # dumped ones changed it (a pass the regex left out): said, not named.
            changes.append(
                {
                    "seq": seq,
                    "pipeline": pipeline,
                    "pass": after if after != START else "(passes not dumped)",
                    "changed_lines": size,
                    "diff": diff,
                }
            )
        previous = text
    passes = [{k: c[k] for k in ("seq", "pipeline", "pass", "changed_lines")} for c in changes]
    out: dict[str, Any] = {
        "snapshots": len(snaps),
        "passes": passes,
        "diffs": [],
        "truncated": False,
    }
    budget = max_chars - len(json.dumps(out))
    if budget < 0:  # even the list of passes is too long: the first ones
        keep = max(1, len(passes) * max_chars // (len(json.dumps(out)) + 1) - 1)
        out["passes"], out["truncated"] = passes[:keep], True
        budget = max_chars - len(json.dumps(out))
    for c in changes:
        entry = {"seq": c["seq"], "pass": c["pass"], "diff": c["diff"]}
        cost = len(json.dumps(entry)) + 2
        if cost > budget:
            room = budget - len(json.dumps({**entry, "diff": ""})) - 40
            if room >= 200:  # the diff's head still says what the pass did
                entry["diff"] = c["diff"][:room] + "\n... (cut)"
                out["diffs"].append(entry)
            out["truncated"] = True
            break
        out["diffs"].append(entry)
        budget -= cost
    return out


def pass_trace(
    program: Path,
    options: dict[str, Any],
    platform: str,
    passes: str,
    max_chars: int,
    timeout: float,
) -> dict[str, Any]:
    """Compile the Program folder `program` with `options` and the dump flags in a child
    process; its trace (`trace`)."""
    if not MIN_CHARS <= max_chars <= MAX_CHARS:
        raise TraceError(f"max_chars: must be between {MIN_CHARS} and {MAX_CHARS}, got {max_chars}")
    try:
        re.compile(passes)
    except re.error as e:
        raise TraceError(f"passes: {passes!r} is not a regular expression ({e})") from None
    with tempfile.TemporaryDirectory(prefix="xla-sentinel-pass-trace-") as dump:
        flags = {
            **options,
            "xla_dump_to": dump,
            "xla_dump_hlo_pass_re": passes,
            "xla_dump_hlo_as_text": True,
            "xla_dump_hlo_as_proto": False,
        }
        try:
            proc = subprocess.run(
                [sys.executable, "-c", COMPILE, str(program), json.dumps(flags), platform],
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")},
            )
        except subprocess.TimeoutExpired:
            return {"status": "compile_hung", "error": f"no answer within {timeout:.0f} s"}
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            return {"status": "compile_failed", "error": f"exit {proc.returncode}: {last[-500:]}"}
        return {"status": "traced", **trace(Path(dump), max_chars)}
