"""Trace replay: real workload modules in, Programs out.

Accepted: a trace folder (`module.mlir` or `module.mlirbc`, optional `inputs.npz`,
`stats.json`, `meta.json`), a bare XLA dump folder (its `*.before_optimizations.txt`
modules), and single files: StableHLO text (`.mlir`), MLIR bytecode or VHLO portable
artifacts (`.mlirbc`), HLO text (`.hlo`, `.txt`), and `jax.export` blobs (`.jaxexport`,
`.bin`). `discover` needs only the file system; `load` runs where jax is (a worker).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES, bit_view
from xla_sentinel.core.program import Program, ProgramError, load_arrays, param_specs
from xla_sentinel.programs.argstats import check_stats
from xla_sentinel.programs.inputs import matching_array
from xla_sentinel.spec.campaign import MUTATION_KINDS
from xla_sentinel.xla import compiler


def _bytecode_to_text(data: bytes) -> str:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    with mlir.make_ir_context() as ctx:
        module = ir.Module.parse(data)
        if "vhlo." in str(module.operation.name) or "vhlo." in str(module)[:4000]:
            # A VHLO portable artifact (another jaxlib's export): upgrade it to StableHLO.
            module = stablehlo.deserialize_portable_artifact(ctx, data)
        return str(module)


def _hlo_to_text(text: str) -> str:
    import jaxlib._hlo as _hlo
    import jaxlib._jax as _jax

    proto = _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    return _bytecode_to_text(_jax.mlir.hlo_to_stablehlo(proto))


def module_text(path: Path) -> str:
    """StableHLO text of one module file, whatever form it came in."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ProgramError(f"{path}: unreadable ({e.strerror})") from None
    try:
        if path.suffix in (".jaxexport", ".bin"):
            from jax import export
            exported: str = export.deserialize(bytearray(data)).mlir_module()
            return exported
        if path.suffix == ".mlirbc" or data[:4] == b"ML\xefR":
            return _bytecode_to_text(data)
        text = data.decode()
        if text.lstrip().startswith("HloModule"):
            return _hlo_to_text(text)
        return text
    except ProgramError:
        raise
    except Exception as e:  # parsers raise their own types; the file is what is wrong
        raise ProgramError(f"{path}: not a readable module ({type(e).__name__}: {str(e)[:200]})") from None


_MUTANT = re.compile(r"^(.*)@([a-z_]+)\.(\d+)$")


def load(path: str | Path, seed: int = 0) -> Program:
    """A Program from a trace folder or module file; inputs drawn when none are stored.
    A mutant unit `<unit>@<kind>.<n>` is the unit's n-th mutant of that kind, checked to
    parse and verify before any target sees it."""
    m = _MUTANT.match(str(path))
    if m and not Path(path).exists():
        return _load_mutant(Path(m.group(1)), m.group(2), int(m.group(3)), seed)
    path = Path(path)
    folder = path if path.is_dir() else None
    module_file = path
    if folder is not None:
        module_file = folder / "module.mlir"
        if not module_file.exists():
            module_file = folder / "module.mlirbc"
    module = module_text(module_file)
    try:
        specs = param_specs(module)
    except ProgramError as e:
        raise ProgramError(f"{module_file}: {e}") from None
    meta: dict[str, Any] = {}
    stats: list[dict[str, Any] | None] = [None] * len(specs)
    if folder is not None:
        meta = _json_object(folder / "meta.json")
        # Checked even when values are stored: statistics that contradict the module are
        # a damaged trace, reported rather than ignored.
        stats = check_stats(_json_object(folder / "stats.json"), specs, str(folder / "stats.json"))
    provenance = meta.get("provenance", meta)
    if not isinstance(provenance, dict):
        raise ProgramError(f"{path / 'meta.json'}: provenance must be an object, got {type(provenance).__name__}")
    dtypes = [s["dtype"] for s in specs]
    if folder is not None and (folder / "inputs.npz").exists():
        _check_stored_dtypes(folder / "inputs.npz", dtypes)
        inputs = load_arrays(folder / "inputs.npz", dtypes)
        for i, (x, s) in enumerate(zip(inputs, specs, strict=True)):
            if list(x.shape) != s["shape"]:
                raise ProgramError(f"{folder / 'inputs.npz'}: arg{i} has shape {list(x.shape)}, "
                                   f"the module expects {s['shape']}")
    else:
        # No values: draw inputs matching the recorded statistics where there are some.
        rng = np.random.default_rng([seed, 0x7ACE])
        inputs = [matching_array(rng, s["shape"], s["dtype"], st) for s, st in zip(specs, stats, strict=True)]
    return Program(id=f"trace-{path.stem}", module=module, inputs=inputs, input_dtypes=dtypes,
                   provenance={"source": "trace", "path": str(path), **provenance})


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON object file of a trace folder ({} when absent), or ProgramError naming it."""
    if not path.exists():
        return {}
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:  # ValueError: bad JSON, bad UTF-8
        raise ProgramError(f"{path}: unreadable JSON ({str(e)[:200]})") from None
    if not isinstance(value, dict):
        raise ProgramError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _check_stored_dtypes(path: Path, dtypes: list[str]) -> None:
    """Each stored array must have the parameter's dtype (bf16 and the like: its bit
    pattern's unsigned type); a cast would replay other inputs than were recorded."""
    try:
        with np.load(path, allow_pickle=False) as z:
            stored = {name: z[name].dtype for name in z.files}
    except Exception as e:  # numpy and zipfile raise many types on a damaged archive
        raise ProgramError(f"{path}: unreadable inputs ({type(e).__name__}: {str(e)[:200]})") from None
    for i, d in enumerate(dtypes):
        want = bit_view(d) or NP_DTYPES[d]
        got = stored.get(f"arg{i}")
        if got is not None and got != np.dtype(want):
            raise ProgramError(f"{path}: arg{i} is stored as {got}, the module's {d} parameter needs {np.dtype(want)}")


def _load_mutant(unit: Path, kind: str, n: int, seed: int) -> Program:
    from xla_sentinel.programs.mutate import mutate

    base = load(unit, seed)
    if kind not in MUTATION_KINDS:
        raise ProgramError(f"{unit}@{kind}.{n}: unknown mutation kind {kind!r}")
    mutant = mutate(base.module, base.inputs, base.input_dtypes, kind, seed=hash_seed(seed, n))
    if mutant is None:
        raise ProgramError(f"{unit}: no site for a {kind} mutation in this module")
    try:
        compiler.verify_module(mutant.module)
    except Exception as e:  # the MLIR parser's own error type; the mutation is what is wrong
        raise ProgramError(f"{unit}@{kind}.{n}: the {mutant.describe} mutant does not verify "
                           f"({str(e).splitlines()[0][:200]})") from None
    return Program(id=f"{base.id}-{kind}{n}", module=mutant.module, inputs=mutant.inputs,
                   input_dtypes=mutant.input_dtypes,
                   provenance={**base.provenance, "mutation": {"kind": kind, "index": n,
                                                               "what": mutant.describe}})


def hash_seed(seed: int, n: int) -> int:
    """The mutation seed of a campaign seed and a mutant index (stable across runs)."""
    return int(np.random.SeedSequence([seed, n, 0x3A7]).generate_state(1)[0])
