"""The program units a campaign's `traces:` and `corpus:` paths name: which files, in a
stable order (the unit's index is its program index), before anything is loaded. The
coordinator lists units here and a worker loads each one (traces.py, corpus.py); no jax.
"""

from __future__ import annotations

from pathlib import Path

from xla_sentinel.core.program import ProgramError
from xla_sentinel.spec.campaign import MutationSpec

# Files `replay` and `traces:` take as modules, beside trace folders and XLA dump folders.
MODULE_SUFFIXES = (".mlir", ".mlirbc", ".hlo", ".txt", ".jaxexport", ".bin")
# Files a corpus folder holds: JAX snippets and StableHLO modules.
SNIPPET_SUFFIX = ".py"
CORPUS_MODULE_SUFFIXES = (".mlir", ".mlirbc")


def trace_units(paths: list[str | Path], mutations: MutationSpec | None = None) -> list[Path]:
    """Expand the given paths into replayable units, in a stable order; with mutations,
    each unit is followed by its mutants, named `<unit>@<kind>.<n>` (see `load`)."""
    units = _trace_files(paths)
    if mutations is None or mutations.perTrace == 0:
        return units
    out: list[Path] = []
    for unit in units:
        out.append(unit)
        out.extend(Path(f"{unit}@{mutations.kinds[n % len(mutations.kinds)]}.{n}")
                   for n in range(mutations.perTrace))
    return out


def _trace_files(paths: list[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise ProgramError(f"{p}: no such trace file or folder")
        if p.is_dir():
            if (p / "module.mlir").exists() or (p / "module.mlirbc").exists():
                out.append(p)
                continue
            dumps = sorted(p.glob("*before_optimizations.txt"))
            modules = dumps or sorted(f for f in p.iterdir() if f.suffix in MODULE_SUFFIXES)
            # What `record --out DIR` writes: a trace folder per computation the job compiled.
            modules = modules or sorted(d for d in p.iterdir() if d.is_dir() and (
                (d / "module.mlir").exists() or (d / "module.mlirbc").exists()))
            if not modules:
                raise ProgramError(f"{p}: no trace, dump or module files in this folder")
            out.extend(modules)
        elif p.suffix in MODULE_SUFFIXES:
            out.append(p)
        else:
            raise ProgramError(f"{p}: unknown trace file type (expected one of {', '.join(MODULE_SUFFIXES)})")
    return out


def corpus_units(folders: list[str | Path]) -> list[Path]:
    """Every snippet and module file under the given corpus folders, in a stable order."""
    out: list[Path] = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise ProgramError(f"{folder}: no such corpus folder")
        out.extend(sorted(p for p in folder.rglob("*") if p.is_file()
                          and (p.suffix == SNIPPET_SUFFIX or p.suffix in CORPUS_MODULE_SUFFIXES)
                          and "__pycache__" not in p.parts))
    return out
