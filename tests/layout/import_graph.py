"""The engine's import graph in figures: modules per folder, import edges, cycles (strongly
connected knots of modules) and the largest knot. Every import counts, those inside
functions too (grimp reads them all).

    python tests/layout/import_graph.py [PACKAGE]   # default xla_sentinel

Used by tests/layout/test_layers.py, and by hand to report the graph in a note.
"""

from __future__ import annotations

import sys
from collections import Counter

import grimp


def knots(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w) & modules))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return sorted(found, key=len, reverse=True)


def figures(package: str = "xla_sentinel") -> dict[str, object]:
    graph = grimp.build_graph(package)
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    edges = sum(len(graph.find_modules_directly_imported_by(m) & modules) for m in modules)
    found = knots(graph, modules)
    folders = Counter(m.rsplit(".", 1)[0] if m.count(".") > 1 or not graph.find_children(m) else m
                      for m in modules if not graph.find_children(m))
    return {"modules": len(modules), "edges": edges, "cycles": len(found),
            "largest_knot": max((len(k) for k in found), default=0), "knots": found,
            "modules_per_folder": dict(sorted(folders.items()))}


if __name__ == "__main__":
    f = figures(sys.argv[1] if len(sys.argv) > 1 else "xla_sentinel")
    print(f"modules {f['modules']}, import edges {f['edges']}, cycles {f['cycles']}, "
          f"largest knot {f['largest_knot']} modules")
    for k in f["knots"]:  # type: ignore[union-attr]
        print(f"  knot of {len(k)}: {', '.join(k)}")
    for folder, n in f["modules_per_folder"].items():  # type: ignore[union-attr]
        print(f"  {folder}: {n}")
