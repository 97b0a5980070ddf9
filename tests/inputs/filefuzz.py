"""Fuzz targets for every file format xla-sentinel reads: real valid files, mutated.

Each kind has seed files written by the project's own code or by jax (`write_seeds`),
mutations (bytes truncated or flipped; JSON values of the wrong type; npz arrays of the
wrong shape or dtype, missing or extra), and the reader the campaign uses, called the way
the campaign calls it: module and snippet loads and plugin probes in a worker process
(`xla_sentinel.worker.client.Worker`, so an abort or hang is seen, not suffered), stored
findings in-process. `classify` says what happened:

- rejected: a one-line error of the project's own type that names the file;
- accepted: the reader took it (fine for a harmless change, such as a flipped comment);
- silent: accepted although the mutation is one the reader must refuse;
- abort: the reader killed its worker process (jaxlib's MLIR bytecode reader aborts on
  some corrupt files); contained, as in a campaign, where it is a trace_error naming the file;
- crash: a traceback of another type, or an error that names no file of the input;
- hang: no answer within the timeout.

Shared by tests/inputs/test_file_inputs.py (bounded) and bench/fuzz_inputs.py (longer).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

OUTCOMES = ("rejected", "accepted", "silent", "abort", "crash", "hang")
KINDS = ("trace_module", "inputs_npz", "meta_json", "stats_json", "hlo_text", "mlir_bytecode",
         "jax_export", "corpus_snippet", "plugin_module", "finding_json", "finding_program")


@dataclass(frozen=True)
class Case:
    """One mutated input: the unit to hand the reader, and whether it must be refused."""

    kind: str
    unit: Path
    mutated: Path  # the file that was changed, which a rejection must name
    must_reject: bool
    mutation: str


def write_seeds(root: Path) -> dict[str, Path]:
    """Real valid files of each kind under `root` (jax needed: run once per session)."""
    import jax
    import jax.numpy as jnp
    from jax import export
    from jaxlib.mlir.dialects import stablehlo
    from xla_sentinel.core.program import Program
    from xla_sentinel.xla.faults import fault_path

    def f(x, y):
        return jnp.tanh(x @ y) + jnp.exp(x)

    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    lowered = jax.jit(f).lower(x, x)
    root.mkdir(parents=True, exist_ok=True)
    seeds = {"trace": root / "trace", "hlo": root / "m.hlo", "mlirbc": root / "m.mlirbc",
             "jaxexport": root / "m.jaxexport", "snippet": root / "snippet.py",
             "plugin": root / "plugin.py", "finding": root / "finding"}
    Program("t", lowered.as_text(), [x, x], ["f32", "f32"], provenance={"source": "recorded"}).save(seeds["trace"])
    (seeds["trace"] / "stats.json").write_text(json.dumps({"arg0": {"mean": 0.0, "std": 0.6}}))
    seeds["hlo"].write_text(lowered.as_text(dialect="hlo"))
    seeds["mlirbc"].write_bytes(stablehlo.serialize_portable_artifact_str(lowered.as_text(), "1.0.0"))
    seeds["jaxexport"].write_bytes(export.export(jax.jit(f))(x, x).serialize())
    seeds["snippet"].write_text('import jax.numpy as jnp\nINPUTS = [("f32", (4, 8)), ("f32", (8,))]\n'
                                "def f(x, b):\n    return jnp.tanh(x @ jnp.ones((8, 8), x.dtype) + b)\n")
    shutil.copy(fault_path("fusion_bf16_rounding"), seeds["plugin"])
    finding = seeds["finding"]
    Program("p", lowered.as_text(), [x, x], ["f32", "f32"]).save(finding / "program")
    (finding / "finding.json").write_text(json.dumps({
        "id": "abc", "verdict": "mismatch", "target": "default", "signature": "s1",
        "evidence": {"error": 0.5, "target_options": {}, "plugins": []}, "dir": "findings/abc"}))
    return seeds


# --- mutations -----------------------------------------------------------------------------

def mutate_bytes(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """Truncate, flip bytes, or splice junk: what a torn write or a bad disk does."""
    if not data:
        return b"\x00", "empty->nul"
    how = rng.integers(3)
    if how == 0:
        cut = int(rng.integers(0, len(data)))
        return data[:cut], f"truncate@{cut}"
    buf = bytearray(data)
    if how == 1:
        for _ in range(int(rng.integers(1, 6))):
            i = int(rng.integers(len(buf)))
            buf[i] ^= 1 << int(rng.integers(8))
        return bytes(buf), "flip"
    i = int(rng.integers(len(buf)))
    junk = rng.bytes(int(rng.integers(1, 16)))
    return bytes(buf[:i] + junk + buf[i:]), f"splice@{i}"


WRONG_JSON: list[Any] = [[], "text", 7, None, True, {"provenance": 5}, {"provenance": []}]


def _wrong_npz(path: Path, rng: np.random.Generator) -> str:
    """Rewrite an inputs.npz with one array of the wrong shape or dtype, or one too few or many."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    how = int(rng.integers(5))
    if how == 0:
        arrays["arg0"] = np.zeros((3, 5), arrays["arg0"].dtype)
        what = "shape"
    elif how == 1:
        arrays["arg0"] = arrays["arg0"].astype(rng.choice([np.float64, np.int32, np.float16, np.uint8]))
        what = "dtype"
    elif how == 2:
        del arrays["arg1"]
        what = "missing"
    elif how == 3:
        arrays["arg2"] = arrays["arg0"]
        what = "extra"
    else:
        arrays["arg0"] = np.float32(1.0)
        what = "scalar"
    np.savez(path, **arrays)
    return f"npz-{what}"


def make_case(kind: str, seeds: dict[str, Path], work: Path, rng: np.random.Generator) -> Case:
    """A fresh copy of the seed for `kind` under `work`, mutated once."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    if kind in ("trace_module", "inputs_npz", "meta_json", "stats_json"):
        unit = work / "trace"
        shutil.copytree(seeds["trace"], unit)
        target = unit / {"trace_module": "module.mlir", "inputs_npz": "inputs.npz",
                         "meta_json": "meta.json", "stats_json": "stats.json"}[kind]
        if kind == "inputs_npz" and rng.random() < 0.5:
            return Case(kind, unit, target, True, _wrong_npz(target, rng))
        if kind in ("meta_json", "stats_json") and rng.random() < 0.5:
            value = WRONG_JSON[int(rng.integers(len(WRONG_JSON)))]
            harmless = kind == "stats_json" and isinstance(value, dict)
            target.write_text(json.dumps(value))
            return Case(kind, unit, target, not harmless, f"json={value!r}")
        data, what = mutate_bytes(target.read_bytes(), rng)
        target.write_bytes(data)
        return Case(kind, unit, target, False, what)
    if kind in ("finding_json", "finding_program"):
        unit = work / "finding"
        shutil.copytree(seeds["finding"], unit)
        target = unit / "finding.json" if kind == "finding_json" else unit / "program" / str(
            rng.choice(["module.mlir", "inputs.npz", "meta.json"]))
        if kind == "finding_json" and rng.random() < 0.5:
            value = WRONG_JSON[int(rng.integers(len(WRONG_JSON)))]
            target.write_text(json.dumps(value))
            return Case(kind, unit, target, True, f"json={value!r}")
        data, what = mutate_bytes(target.read_bytes(), rng)
        target.write_bytes(data)
        return Case(kind, unit, target, False, what)
    source = seeds[{"hlo_text": "hlo", "mlir_bytecode": "mlirbc", "jax_export": "jaxexport",
                    "corpus_snippet": "snippet", "plugin_module": "plugin"}[kind]]
    unit = work / source.name
    data, what = mutate_bytes(source.read_bytes(), rng)
    unit.write_bytes(data)
    return Case(kind, unit, unit, False, what)


# --- readers -------------------------------------------------------------------------------

def read(case: Case, worker: Any, timeout: float) -> tuple[str, str]:
    """(outcome, message) of handing the case to the reader the campaign would use."""
    from xla_sentinel.worker.client import WorkerDied, WorkerHung

    if case.kind.startswith("finding"):
        return _read_finding(case)
    if case.kind == "plugin_module":
        request: dict[str, Any] = {"cmd": "validate", "plugins": [str(case.unit)], "targets": []}
    elif case.kind == "corpus_snippet":
        request = {"cmd": "load_corpus", "path": str(case.unit)}
    else:
        request = {"cmd": "load", "path": str(case.unit)}
    try:
        reply = worker.call(request, timeout)
    except WorkerHung as e:
        return "hang", str(e)
    except WorkerDied as e:
        return "abort", f"worker died: {e}"
    if not reply["ok"]:
        error = reply["error"]
        # A rejection may name another file of the unit (a module whose parameters no longer
        # match inputs.npz is reported on inputs.npz); it must name one of them.
        clear = error.startswith("ProgramError: ") and str(case.unit) in error.split("\n")[0]
        return ("rejected" if clear else "crash"), error
    if case.kind == "plugin_module" and reply["errors"]:
        error = reply["errors"][0]
        clear = str(case.unit) in error and "\n" not in error
        return ("rejected" if clear else "crash"), error
    return ("silent" if case.must_reject else "accepted"), ""


def _read_finding(case: Case) -> tuple[str, str]:
    """A stored finding as `bisect` and `check` read it (no jax: in-process)."""
    from xla_sentinel.bisect import BisectError
    from xla_sentinel.bisect.pipeline import _load

    try:
        _load(case.unit)
    except BisectError as e:
        message = str(e)
        clear = "\n" not in message and str(case.unit) in message
        return ("rejected" if clear else "crash"), message
    except Exception as e:  # anything else is a traceback a user would see
        return "crash", f"{type(e).__name__}: {e}"
    return ("silent" if case.must_reject else "accepted"), ""
