"""Bisection cost: suffix search (graph stage) against linear per-op isolation.

Builds f32 elementwise chains of about 50, 200 and 1,000 StableHLO ops with exactly one
exponential, runs them under the fusion_bf16_rounding fault (it corrupts f32 exp inside
loop fusions), and measures in the same run, on the same float64 reference values:
target compiles and seconds of the graph stage, the same for compiling every op alone,
and the reduction (ops before -> after, shape before -> after).

    python bench/bisection.py [--sizes 50,200,1000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from xla_sentinel.bisect import graph, reduce, reproduce, shrink
from xla_sentinel.bisect.pipeline import open_context, run_stage
from xla_sentinel.core.program import Program
from xla_sentinel.xla.faults import fault_path


def chain_module(n_ops: int, seed: int) -> tuple[str, list[np.ndarray]]:
    """StableHLO text of a chain of about n_ops elementwise ops with one exp, at 37%."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    # A chain that keeps the exp's error visible at the output: adds and subtracts of
    # zero-mean inputs (a random walk, no drift), multiplies by factors near 1 and
    # negations; nothing that flattens a perturbation (max, cos near its peak, tiny
    # scales), so the module fails at 1,000 ops as it does at 50.
    steps = [str(s) for s in rng.choice(["add", "sub", "mul", "neg"], size=n_ops,
                                        p=[0.35, 0.35, 0.15, 0.15])]
    steps[int(n_ops * 0.37)] = "exp"

    def f(x, y, u, w):
        v = x
        for step in steps:
            if step == "add":
                v = v + y
            elif step == "sub":
                v = v - u
            elif step == "mul":
                v = v * w
            elif step == "neg":
                v = -v
            else:
                v = jnp.exp(jnp.sin(v))
        return v

    inputs = [rng.uniform(-1, 1, size=(8, 8)).astype(np.float32) for _ in range(3)]
    inputs.append(rng.uniform(0.95, 1.05, size=(8, 8)).astype(np.float32))
    return jax.jit(f).lower(*inputs).as_text(), inputs


def make_finding(folder: Path, module: str, inputs: list[np.ndarray]) -> Path:
    Program(id=folder.name, module=module, inputs=inputs, input_dtypes=["f32"] * len(inputs)).save(
        folder / "program")
    record = {"id": folder.name, "program": folder.name, "target": "default", "verdict": "mismatch",
              "evidence": {"target_options": {}, "plugins": [fault_path("fusion_bf16_rounding")]}}
    (folder / "finding.json").write_text(json.dumps(record))
    return folder


def measure(folder: Path) -> dict[str, object]:
    t0 = time.monotonic()
    ctx = open_context(folder, timeout=600)
    reference_s = time.monotonic() - t0
    try:
        run_stage(ctx, reproduce)
        if ctx.stopped:
            raise SystemExit(f"{folder}: {ctx.stopped}")
        g = run_stage(ctx, graph)
        ctx.lab.stage = "linear"
        t1 = time.monotonic()
        failing = graph.isolate_each(ctx)
        linear_s = time.monotonic() - t1
        linear_compiles = ctx.lab.compiles["linear"]
        r = run_stage(ctx, reduce)
        s = run_stage(ctx, shrink)
    finally:
        ctx.lab.close()
    culprit = ctx.ops[g["culprit_index"]]["name"]
    return {"ops": len(ctx.ops), "reference_s": round(reference_s, 2),
            "graph_compiles": g["target_compiles"], "graph_s": g["seconds"],
            "linear_compiles": linear_compiles, "linear_s": round(linear_s, 2),
            "culprit": culprit, "linear_agrees": failing == [g["culprit_index"]],
            "ops_after": r["ops_after"], "reduce_compiles": r["target_compiles"], "reduce_s": r["seconds"],
            "shape": f"{s.get('shape_before')}->{s.get('shape_after')}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--out", help="keep the finding folders here")
    args = parser.parse_args()
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-bisection-"))
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        module, inputs = chain_module(n, seed=n)
        row = measure(make_finding(root / f"chain{n}", module, inputs))
        rows.append(row)
        print(json.dumps(row), flush=True)
    head = ("ops", "graph_compiles", "graph_s", "linear_compiles", "linear_s", "reference_s",
            "ops_after", "shape", "linear_agrees")
    print("\n" + " | ".join(head))
    for row in rows:
        print(" | ".join(str(row[h]) for h in head))
    return 0


if __name__ == "__main__":
    sys.exit(main())
