"""How easy the code is to change, in figures: the most complex functions (radon's cyclomatic
complexity), raw `dict[str, Any]` and `(x.get(...) or {})` counts per tree, and mypy's error
count under pyproject's [tool.mypy]. Prints a table; compares two checkouts when given a
second (e.g. a `git worktree` of an older commit).

    python bench/code_health.py [--base DIR] [--top 10] [--no-mypy]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = ("runners", "operator")
RAW_DICT = r"dict\[str, Any\]"
OR_EMPTY = r"or \{\}\)"
BIN = Path(sys.executable).parent


def worst_functions(root: Path, top: int) -> list[tuple[int, str, int]]:
    """(complexity, 'path:function', lines) of the `top` most complex functions."""
    out = subprocess.run([str(BIN / "radon"), "cc", "-j", *TREES], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    rows = [(b["complexity"], f"{path}:{b.get('classname', '') + '.' if b.get('classname') else ''}"
             f"{b['name']}", b["endline"] - b["lineno"] + 1)
            for path, blocks in json.loads(out).items() if isinstance(blocks, list)
            for b in blocks if isinstance(b, dict)]
    return sorted(rows, reverse=True)[:top]


def count(root: Path, tree: str, pattern: str) -> int:
    rx = re.compile(pattern)
    return sum(len(rx.findall(p.read_text())) for p in (root / tree).rglob("*.py"))


def mypy_errors(root: Path) -> str:
    """mypy's closing line, run with this checkout's own [tool.mypy] (or this one's, when an
    older checkout has none, so the figures are comparable)."""
    config = root / "pyproject.toml"
    if "[tool.mypy]" not in config.read_text():
        config = ROOT / "pyproject.toml"
    proc = subprocess.run([str(BIN / "mypy"), "--config-file", str(config), "--cache-dir",
                           f"/tmp/code-health-mypy-{root.name}"], cwd=root,
                          capture_output=True, text=True)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return lines[-1] if lines else f"mypy exited {proc.returncode} with no output"


def report(root: Path, top: int, with_mypy: bool) -> None:
    print(f"== {root}")
    print(f"{'CC':>4} {'lines':>5}  function")
    for cc, name, lines in worst_functions(root, top):
        print(f"{cc:>4} {lines:>5}  {name}")
    for tree in TREES:
        raw, or_empty = count(root, tree, RAW_DICT), count(root, tree, OR_EMPTY)
        print(f"{tree}: dict[str, Any] {raw}, (x.get(...) or {{}}) {or_empty}")
    if with_mypy:
        print(f"mypy: {mypy_errors(root)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="another checkout to measure first")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--no-mypy", action="store_true")
    args = ap.parse_args()
    for root in ([args.base] if args.base else []) + [ROOT]:
        report(root.resolve(), args.top, not args.no_mypy)


if __name__ == "__main__":
    main()
