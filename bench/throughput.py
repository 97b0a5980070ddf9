"""Throughput of `run` against a bare loop over the same programs, measured in one run.

Prints: programs/s of a 1-worker campaign (workers started before timing), programs/s of
a bare loop that only compiles and runs each program once with jax.jit (default options),
the XLA time of every configuration the campaign runs (targets and references, measured
in-process on the same programs), and the campaign's own account of time spent in its
worker processes, so the share of campaign time spent outside jax/XLA is visible. Usage: python bench/throughput.py [--programs N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

from xla_sentinel import evaluate, handlers, targets  # noqa: E402
from xla_sentinel.campaign import parse_spec  # noqa: E402
from xla_sentinel.engine import run_campaign  # noqa: E402
from xla_sentinel.generator import generate  # noqa: E402
from xla_sentinel.inputs import make_inputs  # noqa: E402
from xla_sentinel.protocol import GraphReference  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    spec = parse_spec({"seed": args.seed, "budget": {"programs": args.programs}, "workers": 1,
                       "generator": {"specialValues": 0.0}})
    graphs = [generate(spec.seed, i, spec.generator) for i in range(args.programs)]
    inputs = [make_inputs({"seed": spec.seed, "index": i}, g.inputs) for i, g in enumerate(graphs)]
    modules = [evaluate.lower_text(g) for g in graphs]

    # Bare loop: compile and run each program once with jax.jit, default options.
    t0 = time.perf_counter()
    for g, x in zip(graphs, inputs, strict=True):
        jax.block_until_ready(jax.jit(evaluate.traced(g)).lower(*x).compile()(*x))
    bare = time.perf_counter() - t0

    # XLA time of every configuration the campaign runs, in-process.
    xla = {}
    for t in spec.targets:
        t0 = time.perf_counter()
        opts = targets.resolve(t).options
        for m, x in zip(modules, inputs, strict=True):
            targets.run_module(m, x, opts)
        xla[t.name] = time.perf_counter() - t0
    for kind in spec.references:
        t0 = time.perf_counter()
        for g, x in zip(graphs, inputs, strict=True):
            handlers.graph_reference(GraphReference(kind, g.to_json(), x))
        xla[kind] = time.perf_counter() - t0
    xla_total = sum(xla.values())

    with tempfile.TemporaryDirectory() as tmp:
        summary = run_campaign(spec, Path(tmp))
    campaign = summary["elapsed_s"]

    n = args.programs
    result = {
        "programs": n,
        "campaign_programs_per_s": round(n / campaign, 2),
        "bare_jit_programs_per_s": round(n / bare, 2),
        "campaign_vs_bare_ratio": round(bare / campaign, 3),
        "configurations": len(xla),
        "xla_seconds_by_configuration": {k: round(v, 2) for k, v in xla.items()},
        "xla_seconds_total": round(xla_total, 2),
        "campaign_seconds": round(campaign, 2),
        "share_outside_xla_vs_in_process_loop": round(1 - xla_total / campaign, 3),
        # Measured inside the campaign itself: worker time in jax/XLA vs wall time.
        "campaign_worker_seconds": summary["worker_seconds"],
        "campaign_harness_share": summary["harness_share"],
        "harness_overhead_over_worker_time": round(campaign / summary["worker_seconds"] - 1, 3),
    }
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
