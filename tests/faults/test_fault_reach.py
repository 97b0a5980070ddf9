"""The generator reaches the two faults that need a shape of their own.

select_ge_to_gt changes a result only where a GE/LE compare ties and the select then
picks between different values; dus_copy_elided only where an updated value is returned
next to another reader of the value before the update. Random growth almost never
builds either (0 of 150 programs fired dus_copy_elided); `select_extremum` and the
generator's state-update opening do. Each test finds a generated program, from the first
few dozen of the detection bench's settings, whose results the fault really changes.
"""

from __future__ import annotations

import numpy as np
import pytest
from fault_harness import run, run_with_fault
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import generate
from xla_sentinel.programs.inputs import make_inputs
from xla_sentinel.spec.campaign import GeneratorSpec
from xla_sentinel.worker.client import Worker, WorkerDied
from xla_sentinel.worker.protocol import RequestFailed, Run
from xla_sentinel.xla import compiler
from xla_sentinel.xla.faults import fault_path

SPEC = GeneratorSpec(version=1, minOps=2, maxOps=16)  # bench/detection.py's generator settings
SEED = 3


def _programs(op: str, limit: int):
    for index in range(limit):
        graph = generate(SEED, index, SPEC)
        if op in graph.op_names():
            inputs = make_inputs({"seed": SEED, "index": index, "special": False}, graph.inputs)
            yield graph, inputs


def _differ(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return any(not np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


def test_select_extremum_ties_reach_select_ge_to_gt() -> None:
    drawn = changed = 0
    for graph, inputs in _programs("select_extremum", 120):
        drawn += 1
        f = evaluate.traced(graph)
        changed += _differ(run(f, *inputs), run_with_fault("select_ge_to_gt", f, *inputs))
    assert drawn >= 3, "select_extremum is drawn too rarely to test"
    assert changed >= 1, f"the fault changed none of {drawn} programs with select_extremum"


def _opens_with_state_update(graph) -> bool:
    """Outputs 0 and 1 are x.at[i].set(u) (the first op) and another op reading x."""
    if not graph.nodes or graph.nodes[0].op != "dynamic_update_slice" or len(graph.outputs) < 2:
        return False
    first, second = (graph.values[v].node for v in graph.outputs[:2])
    return first == 0 and second is not None \
        and graph.nodes[0].args[0] in graph.nodes[second].args


def test_state_update_programs_return_the_update_before_the_old_values_reader() -> None:
    opened = sum(_opens_with_state_update(generate(SEED, i, SPEC)) for i in range(150))
    # 8 % of programs open with the idiom (generator.STATE_UPDATE_P): about 12 of 150.
    assert opened >= 4


def test_state_update_programs_reach_dus_copy_elided() -> None:
    # The fault can also make XLA abort (two outputs end up in one buffer), so the faulty
    # compile runs in a worker process, as in a campaign; an abort counts as reached.
    worker = Worker("reach", plugins=[f"{fault_path('dus_copy_elided')}:transform"])
    tried = 0
    try:
        for graph, inputs in _programs("dynamic_update_slice", 150):
            if not _opens_with_state_update(graph):
                continue
            tried += 1
            module = evaluate.lower_text(graph)
            clean = compiler.run_module(module, inputs, {}).outputs
            try:
                reply = worker.call(Run(module, inputs, {}), 120)
            except WorkerDied:
                return
            except RequestFailed:
                continue
            if _differ(clean, reply.outputs):
                return
    finally:
        worker.close()
    pytest.fail(f"dus_copy_elided changed none of {tried} state-update programs")
