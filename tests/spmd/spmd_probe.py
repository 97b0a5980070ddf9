"""Worker-side helpers for the SPMD tests: served by a real worker process
(runners/worker.py), which has the virtual host devices a test process may lack (jax
reads the device count once, when it first initializes).

Named uniquely (not conftest helpers) because test folders share one import namespace."""

from __future__ import annotations

from typing import Any

import numpy as np
from xla_sentinel import evaluate, spmd, targets
from xla_sentinel.generator import Graph


def _lower_and_run(graph: Graph, inputs: list[np.ndarray]) -> dict[str, Any]:
    module = spmd.lower_text(graph)
    return {"module": module,
            "sharded": targets.run_module(module, inputs, {}).outputs,
            "unsharded": targets.run_module(evaluate.lower_text(graph), inputs, {}).outputs}


def handle(req: dict[str, Any]) -> dict[str, Any]:
    if req["cmd"] == "ping":
        return {}
    if req["cmd"] == "lower_and_run":
        return _lower_and_run(Graph.from_json(req["graph"]), req["inputs"])
    if req["cmd"] == "run":
        return {"outputs": targets.run_module(req["module"], req["inputs"], {}).outputs}
    raise ValueError(f"unknown request {req['cmd']!r}")
