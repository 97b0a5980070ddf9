"""The corpus of real-bug traces: each workload of corpus_workloads.py recorded by
`xla-sentinel record --with-values` as a user records a job, its step's trace folder kept
under tests/bisect/data/corpus/<name>/ (module.mlir, meta.json, stats.json, inputs.npz),
and data/corpus/corpus.yaml, the table of what replaying and bisecting each must give:
the campaign targets it is replayed on, the verdict, the culprit op, the cure and the
known bug. bench/replay_pipeline.py and test_corpus_replay.py read the same table.

    python tests/bisect/corpus.py [NAME ...]     # (re)record into data/corpus/
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "data" / "corpus"
TABLE = CORPUS / "corpus.yaml"


def table(path: Path = TABLE) -> dict[str, dict[str, Any]]:
    """name -> expected outcome, as corpus.yaml writes it."""
    data: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text())["traces"]
    return data


def op_name(culprit_op: str | None) -> str | None:
    """`dynamic_slice (f32->f32)` -> `dynamic_slice`."""
    return None if culprit_op is None else culprit_op.split(" ")[0]


def replay(name: str, expected: dict[str, Any], root: Path, *, default_references: bool = False) -> dict[str, Any]:
    """Replay trace `name` in a campaign of its own under `root`, bisection on, as
    `xla-sentinel replay` does; its finding on the table's target against the table:
    `flagged` (that verdict there), `op_ok`, `cure_ok` (one of the table's cures; none
    where the table has none), `known_ok`, and what was found. The table's `references`
    apply unless `default_references`; its `inject`, a fault of xla/faults/, always."""
    from xla_sentinel.campaign.engine import run_campaign
    from xla_sentinel.spec.campaign import parse_spec

    folder = root / "traces" / name
    shutil.copytree(CORPUS / name, folder)
    spec: dict[str, Any] = {"traces": [str(folder)], "targets": expected["targets"], "workers": 1,
                            "budget": {"programs": 1}, "bisect": {"enabled": True, "perSignature": 1}}
    if expected.get("references") and not default_references:
        spec["references"] = expected["references"]
    if expected.get("inject"):
        # A trace no real bug breaks the way the table needs (an invariant): the injected
        # fault (an HLO pass plugin of xla/faults/) named there, as `--inject-pass` gives it.
        from xla_sentinel.xla.faults import fault_path

        spec["injectPasses"] = [str(fault_path(expected["inject"]))]
    t0 = time.monotonic()
    run_campaign(parse_spec(spec), root / "out", name=f"corpus-{name}")
    seconds = time.monotonic() - t0
    found: dict[Path, dict[str, Any]] = {
        p.parent: json.loads(p.read_text()) for p in sorted((root / "out" / "findings").glob("*/finding.json"))}
    findings = list(found.values())
    empty: dict[str, Any] = {}
    at, finding = next(((d, f) for d, f in found.items() if f.get("target") == expected["target"]), (root, empty))
    bisect = finding.get("evidence", {}).get("bisect") or {}
    cures = expected["cure"] if isinstance(expected["cure"], list) else [expected["cure"]]
    row = {
        "trace": name,
        "findings": sorted(f"{f.get('target')}:{f.get('verdict')}" for f in findings),
        "flagged": finding.get("verdict") == expected["verdict"],
        "verdict": finding.get("verdict"),
        "status": bisect.get("status"),
        "culprit_op": finding.get("culprit_op"),
        "culprit_path": bisect.get("culprit_path"),
        "culprit_pass": finding.get("culprit_pass"),
        "known_bug": finding.get("known_bug"),
        "signature": finding.get("signature"),
        "repro": str(at / bisect["repro"]) if bisect.get("repro") else None,
        "bundle": (bisect.get("stages") or {}).get("bundle"),
        "judged_by": ((bisect.get("stages") or {}).get("reproduce") or {}).get("judged_by"),
        "seconds": round(seconds, 1),
    }
    row["op_ok"] = op_name(row["culprit_op"]) == expected["op"]
    row["cure_ok"] = bool(finding) and row["culprit_pass"] in cures
    row["known_ok"] = bool(finding) and row["known_bug"] == expected["known_bug"]
    return row


def record(name: str, out: Path, xla_flags: str = "") -> Path:
    """Record workload `name` with `xla-sentinel record`, keep its step's trace in `out`."""
    cli = Path(sys.executable).with_name("xla-sentinel")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if xla_flags:
        env["XLA_FLAGS"] = xla_flags
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        subprocess.run([str(cli), "record", "--with-values", "--out", tmp, "--",
                        sys.executable, str(HERE / "corpus_workloads.py"), name],
                       check=True, env=env, capture_output=True, timeout=300)
        # The step is the module jax names after the jitted function; the rest are
        # jax's own small computations (device_put of scalars, the printout).
        (step,) = [p for p in Path(tmp).iterdir() if p.name.startswith("jit_step-")]
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(step, out)
    return out


def main(names: list[str]) -> None:
    expected = table()
    for name in names or list(expected):
        folder = record(name, CORPUS / name, expected[name].get("record_xla_flags", ""))
        print(folder, sum(f.stat().st_size for f in folder.iterdir()), "bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
