"""Every file the docs and the code's docstrings and comments cite by path exists: a module
that moves or is renamed takes its citations with it. A citation is a path whose first part
is a folder of the repository (`tests/fuzz/test_spec.py`, `docs/bisect.md`) or a package of
the engine or the operator (`bisect/pipeline.py`, `xla_sentinel_operator/desired.py`,
`core/program.promote_floats` for a name in a module); capitals are placeholders
(`bench/repros/NAME.py`) and globs are not files, so neither is checked."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Where the short forms resolve: `judge/oracle.py` is runners/xla_sentinel/judge/oracle.py.
PACKAGE_ROOTS = (REPO / "runners", REPO / "runners/xla_sentinel", REPO / "operator",
                 REPO / "operator/xla_sentinel_operator")
FILE_SUFFIXES = {"py", "md", "yaml", "yml", "json", "toml", "sh", "txt", "html", "cfg", "ini",
                 "mlir", "npz", "png", "proto", "hlo", "j2", "tpl"}
# A run of path parts: not inside a longer word, path, URI or option (gs://b/x, ~/x, $X/y).
_CITATION = re.compile(r"(?<![\w./:~$@-])((?:[A-Za-z_][\w.-]*/)+[\w.*-]+)")


def _first_parts() -> tuple[set[str], set[str]]:
    top = {p.name for p in REPO.iterdir() if not p.name.startswith(".")}
    packages = {d.name for root in PACKAGE_ROOTS[1::2] for d in root.iterdir()
                if (d / "__init__.py").exists()}
    return top, packages | {"xla_sentinel", "xla_sentinel_operator"}


TOP, PACKAGES = _first_parts()


def citing_files() -> list[Path]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for folder in ("runners", "operator", "tests", "bench"):
        files += sorted((REPO / folder).rglob("*.py"))
    return files


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(first line, text) of each piece of prose in a file: a whole Markdown file; a Python
    file's docstrings and comments (not its string literals: those are data)."""
    source = path.read_text()
    if path.suffix == ".md":
        yield 1, source
        return
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                yield first.lineno, first.value.value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def citations(text: str) -> Iterator[tuple[int, str]]:
    """(line offset, path) of each repository path `text` cites."""
    for m in _CITATION.finditer(text):
        cited = m.group(1).rstrip(".-")
        parts = cited.split("/")
        if "*" in cited or any(p.partition(".")[0].isupper() for p in parts) or parts[0] not in TOP | PACKAGES:
            continue
        module, dot, attribute = parts[-1].partition(".")
        if not dot:
            continue  # a folder (of the repository or of a campaign's output): no file cited
        if parts[-1].rpartition(".")[2] not in FILE_SUFFIXES:
            if parts[0] not in PACKAGES or not module.isidentifier():
                continue
            cited = "/".join([*parts[:-1], f"{module}.py"])  # module.name: the module's file
        yield text.count("\n", 0, m.start()), cited


def exists(cited: str) -> bool:
    if cited.split("/")[0] in TOP and (REPO / cited).exists():
        return True
    return any((root / cited).is_file() for root in PACKAGE_ROOTS)


def stale_citations(files: list[Path]) -> list[tuple[Path, int, str]]:
    """(file, line, path) of each citation of a path that does not exist."""
    return [(path, line + offset, cited) for path in files for line, text in prose(path)
            for offset, cited in citations(text) if not exists(cited)]


def test_every_cited_path_exists() -> None:
    stale = [f"{path.relative_to(REPO)}:{line}: {cited}" for path, line, cited in stale_citations(citing_files())]
    assert stale == []


def test_a_citation_of_a_moved_module_is_caught(tmp_path: Path) -> None:
    doc = tmp_path / "spmd.md"
    doc.write_text("# SPMD\n\nSharding attributes: `bisect/module.py` `SHARDING_ATTRS`; cut with "
                   "`xla/cuts.py` and `core/program.promote_floats` (tests/spmd/); a fix is "
                   "`bench/repros/NAME.py`, a finding OUT/findings/ID/finding.json.\n")
    assert stale_citations([doc]) == [(doc, 3, "bisect/module.py")]


def test_comments_and_docstrings_are_read_but_string_literals_are_not(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Built by xla/compile.py."""\n'
                      'GLOB = "bisect/options.py"\n'
                      '# compiled by xla/compiler.py, once bisect/module.py\n')
    found = [(line + offset, cited) for line, text in prose(module) for offset, cited in citations(text)]
    assert sorted(found) == [(1, "xla/compile.py"), (3, "bisect/module.py"), (3, "xla/compiler.py")]
