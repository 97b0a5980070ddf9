"""The import graph of a package tree: modules per folder, import cycles and the largest knot.

Every import counts, module-level and inside functions (a function-level import is how a
cycle hides from Python at import time), resolved to the tree's own modules; cycles are the
strongly connected components of more than one module (Tarjan). The import-linter contracts
in pyproject are what CI keeps; this prints the figures behind them, for any tree, e.g. an
older checkout to compare with:

    python bench/import_graph.py runners/xla_sentinel xla_sentinel
    python bench/import_graph.py operator/xla_sentinel_operator xla_sentinel_operator
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path


def modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file below `root` (the package's folder)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([package, *parts])] = path
    return found


def _targets(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([base] if base else [])])
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the tree's modules it imports (a name imported from a package counts as the
    package unless it is a module itself)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(module, node, path.name == "__init__.py"):
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                # A package's own __init__ is imported by its submodules anyway: not an edge.
                if target and target != module and not module.startswith(target + "."):
                    edges[module].add(target)
    return edges


def cycles(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=len, reverse=True)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path, help="the package's folder")
    p.add_argument("package", help="its import name")
    args = p.parse_args(argv)
    mods = modules(args.root, args.package)
    found = cycles(sorted(mods), graph(mods))
    folders = Counter(str(path.parent.relative_to(args.root)) for path in mods.values())
    print(json.dumps({
        "modules": len(mods),
        "folders": dict(sorted(folders.items())),
        "cycles": len(found),
        "largest_knot": len(found[0]) if found else 0,
        "knots": [[m.removeprefix(args.package + ".") for m in c] for c in found],
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
