"""Program: a portable module (StableHLO text) + its inputs + provenance, and the engine's
on-disk formats in one place.

On disk a program is a trace folder (docs/architecture.md, "Programs and trace folders"):
`module.mlir`, `inputs.npz` (`arg0`, `arg1`, ...; bf16 stored as its uint16 bit pattern),
`meta.json` (provenance, input recipe, dtypes) and, for generated programs, `graph.json`
(the program's `Graph`, core/graph.py), from which references re-evaluate it op by op.
summary.json is written here too (`save_summary`), with numpy values made plain JSON
(`json_default`). Pure numpy: no jax import here.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES, bit_view
from xla_sentinel.core.errors import UserError
from xla_sentinel.core.graph import Graph
from xla_sentinel.core.names import MLIR_NAMES

MLIR_TYPES = {mlir: name for name, mlir in MLIR_NAMES.items()}


class ProgramError(UserError, ValueError):
    """A program folder or module cannot be read; the message names the file."""


@dataclass
class Program:
    id: str
    module: str
    inputs: list[np.ndarray]
    input_dtypes: list[str]
    provenance: dict[str, Any] = field(default_factory=dict)
    graph: Graph | None = None  # a generated program's; None for a replayed module

    @property
    def op_count(self) -> int:
        if self.graph is not None:
            return len(self.graph.nodes)
        return len(re.findall(r"=\s*\"?(?:stablehlo|chlo)\.", self.module))

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "module.mlir").write_text(self.module)
        save_arrays(folder / "inputs.npz", self.inputs, self.input_dtypes)
        meta = {"id": self.id, "input_dtypes": self.input_dtypes, "provenance": self.provenance}
        (folder / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
        if self.graph is not None:
            (folder / "graph.json").write_text(json.dumps(self.graph.to_json()))

    @classmethod
    def load(cls, folder: Path) -> Program:
        folder = Path(folder)
        module_path = folder / "module.mlir"
        if not module_path.is_file():
            raise ProgramError(f"{folder}: not a program folder (no module.mlir)")
        try:
            module = module_path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ProgramError(f"{module_path}: unreadable ({e})") from None
        try:
            dtypes = param_dtypes(module)
        except ProgramError as e:
            raise ProgramError(f"{module_path}: {e}") from None
        meta = _read_json(folder / "meta.json") if (folder / "meta.json").exists() else {}
        graph = _read_graph(folder / "graph.json") if (folder / "graph.json").exists() else None
        npz = folder / "inputs.npz"
        if not npz.exists():
            raise ProgramError(f"{npz}: missing (a program needs its inputs)")
        inputs = load_arrays(npz, dtypes)
        return cls(id=str(meta.get("id", folder.name)), module=module, inputs=inputs,
                   input_dtypes=dtypes, provenance=meta.get("provenance", {}), graph=graph)


def _read_graph(path: Path) -> Graph:
    data = _read_json(path)
    try:
        return Graph.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # JSON, but not a graph
        raise ProgramError(f"{path}: not a program graph ({type(e).__name__}: {e})") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:  # ValueError: bad JSON or bad UTF-8
        raise ProgramError(f"{path}: unreadable JSON ({e})") from None


def param_specs(module: str) -> list[dict[str, Any]]:
    """Shapes and element types of @main's parameters, from StableHLO text."""
    m = re.search(r"func\.func (?:public )?@main\((.*?)\)\s*->", module, re.S)
    if not m:
        raise ProgramError("module has no @main function")
    specs = []
    for dims, elem in re.findall(r"%arg\d+:\s*tensor<((?:[\d?]+x)*)([a-z]+\d*)>", m.group(1)):
        if "?" in dims:
            raise ProgramError("dynamic parameter shapes are not supported; export with static shapes")
        if elem not in MLIR_TYPES:
            raise ProgramError(f"unsupported parameter element type {elem}")
        specs.append({"shape": [int(d) for d in dims.split("x") if d], "dtype": MLIR_TYPES[elem]})
    return specs


def param_dtypes(module: str) -> list[str]:
    """Element types of @main's parameters, from StableHLO text."""
    return [s["dtype"] for s in param_specs(module)]


def result_dtypes(module: str) -> list[str]:
    """Element types of @main's results, from StableHLO text."""
    m = re.search(r"func\.func (?:public )?@main\(.*?\)\s*->\s*(\(.*?\)|tensor<[^>]*>)\s*(?:attributes|\{)",
                  module, re.S)
    if not m:
        raise ProgramError("module has no @main function with results")
    types = re.findall(r"tensor<(?:[\dx?]*x)?([a-z]+\d*)>", m.group(1))
    try:
        return [MLIR_TYPES[t] for t in types]
    except KeyError as e:
        raise ProgramError(f"unsupported result element type {e.args[0]}") from None


_FLOAT_TYPE = re.compile(r"(?<=[x<])(bf16|f16|f32)(?=>)|(?<=: )(bf16|f16|f32)\b")
# A dense literal of a narrow float type, and the hex bit patterns inside it.
_DENSE_FLOAT = re.compile(r"dense<([^<>]*)>(\s*:\s*tensor<(?:[\d?]+x)*(f32|bf16|f16)>)")
_HEX = re.compile(r'"0x([0-9A-Fa-f]+)"|0x([0-9A-Fa-f]+)')


def _widen_hex(match: re.Match[str], dtype: np.dtype) -> str:
    quoted, bare = match.groups()
    if len(quoted or bare) % (2 * dtype.itemsize):  # not this type's data: leave it to XLA
        return match.group(0)
    if bare is not None:  # one element, written as its bit pattern
        bits = np.array([int(bare, 16)], dtype=f"<u{dtype.itemsize}")
        return f"0x{int(bits.view(dtype).astype(np.float64).view(np.uint64)[0]):016X}"
    # A quoted blob is the raw little-endian data of every element.
    wide = np.frombuffer(bytes.fromhex(quoted), dtype=dtype).astype("<f8")
    return '"0x' + wide.tobytes().hex().upper() + '"'


def _widen_dense(match: re.Match[str]) -> str:
    body, tail, elem = match.groups()
    dtype = NP_DTYPES[MLIR_TYPES[elem]]
    return "dense<" + _HEX.sub(lambda m: _widen_hex(m, dtype), body) + ">" + tail


def promote_floats(module: str) -> str | None:
    """The module with every f32/bf16/f16 tensor promoted to f64, or None if that would
    change what it computes (bit casts and explicit precision reductions depend on width).

    The one float64 promoter (replayed modules and the bisector's cuts alike). Hex float
    literals are bit patterns of their type, so they become the f64 bit patterns of the
    same values: else 0xFF800000 (-inf, the start of every max reduction) would be read
    as a tiny positive f64."""
    if "bitcast_convert" in module:
        return None
    return _FLOAT_TYPE.sub("f64", _DENSE_FLOAT.sub(_widen_dense, module))


def save_arrays(path: Path, arrays: list[np.ndarray], dtypes: list[str]) -> None:
    stored: dict[str, Any] = {}  # savez's keyword arguments: one array each
    for i, (a, d) in enumerate(zip(arrays, dtypes, strict=True)):
        view = bit_view(d)
        stored[f"arg{i}"] = np.asarray(a).view(view) if view is not None else np.asarray(a)
    np.savez(path, **stored)


def load_arrays(path: Path, dtypes: list[str]) -> list[np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            n = len(z.files)
            if n != len(dtypes):
                raise ProgramError(f"{path}: {n} arrays for {len(dtypes)} parameters")
            out = []
            for i, d in enumerate(dtypes):
                a = z[f"arg{i}"]
                out.append(a.view(NP_DTYPES[d]) if bit_view(d) is not None else a.astype(NP_DTYPES[d]))
            return out
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:  # a damaged archive
        if isinstance(e, ProgramError):
            raise
        raise ProgramError(f"{path}: unreadable inputs ({e})") from None


def json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def save_summary(out: Path, summary: dict[str, Any]) -> None:
    """Write summary.json; also what the storage layer rewrites it with (storage/objects.py finish)."""
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=json_default))
