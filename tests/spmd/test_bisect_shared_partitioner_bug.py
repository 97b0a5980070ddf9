"""A partitioner bug that every configuration of a module shares (all of them compile the
same partitioned module) is bisected: the bisector's float64 values and its legal
configuration run the case unsharded (worker/bisect_handlers.py `every_value`, `legal`), so the
reproduce stage sees the target's wrong result, the graph stage names the op and the
bundle's repro.py shows the bug alone. Before, such findings stopped at `not_reproduced`
(docs/spmd.md, "Bisecting").

The bug is a real one of jaxlib 0.10.2 (bench/repros/spmd_scatter_after_shift.py): on an
array sharded over 2 devices, x.at[1:].set(x[:-1]).at[0].set(-x[0]) overwrites the second
shard's first element with x[0]."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.core.graph import Graph, Node, ShardingPlan, Value
from xla_sentinel.core.program import Program
from xla_sentinel.triage.signature import signature_id
from xla_sentinel.worker.protocol import Lower

TIMEOUT = 120.0


def shift_graph(dtype: str, partitioner: str, regions: dict[int, dict[str, Any]] | None = None,
                spec: str | None = "x") -> Graph:
    """One fori trip of the shift and a negated head on x[8] on 2 devices, x and the result
    split over them (`spec` "x") or replicated (None)."""
    return Graph(values=[Value([8], dtype, input=0), Value([8], dtype, node=0)],
                 nodes=[Node("loop_shift", [0], {"loop": "fori", "body": "neg", "trips": 1, "step": 0,
                                                 "offset": 0, "axis": 0})],
                 outputs=[1],
                 sharding=ShardingPlan(devices=2, mesh=(2,), axes=("x",), partitioner=partitioner,
                                       inputs=[[spec]], outputs=[[spec]], regions=regions or {}))


def shift_finding(folder: Path, probe: Any, graph: Graph, reason: str | None) -> Path:
    """A finding folder as the campaign writes it for the shift program on the default
    target: no plugin, the wrong numbers are XLA's own."""
    dtype = graph.values[0].dtype
    inputs = [np.arange(1, 9).astype({"s32": np.int32, "f32": np.float32}[dtype])]
    module = probe.call(Lower(graph), TIMEOUT).module
    Program(folder.name, module, inputs, [dtype], graph=graph).save(folder / "program")
    evidence: dict[str, Any] = {"target_options": {}, "plugins": [], "output": 0}
    if reason:
        evidence["reason"] = reason
    record = {"id": folder.name, "campaign": "test", "program": folder.name, "target": "default",
              "verdict": "mismatch", "culprit_op": None, "culprit_pass": None, "fusion_kind": None,
              "dtype": dtype, "evidence": evidence, "dir": folder.name,
              "time": "2026-01-01T00:00:00+00:00"}
    record["signature"] = signature_id(record)
    (folder / "finding.json").write_text(json.dumps(record, indent=1))
    return folder


def repro(bundle: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """repro.py as a person runs it: no XLA_FLAGS of ours, only the devices it asks for."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "repro.py", *args], cwd=bundle, capture_output=True,
                          text=True, timeout=TIMEOUT, env=env)


# x and the result replicated, x split by a sharding constraint (GSPMD's Sharding custom
# call): the loop neither reads an argument of @main nor makes its result, so the float64
# values of the old bisector, the loop compiled alone on a replicated operand, were right,
# and only its legal configuration was wrong (as on s31-i124).
CONSTRAINED = {0: {"kind": "constraint", "spec": ["x"]}}


@pytest.mark.parametrize(("dtype", "partitioner", "regions", "spec", "reason"), [
    # s31-i60's kind: an integer output judged bitwise, against the legal result and the
    # float64 values, both of which were partitioned (the loop reads @main's sharded x).
    ("s32", "shardy", None, "x", "bitwise"),
    # s31-i124's kind: a float output judged normwise, whose threshold the legal
    # configuration's own error set, which was the target's.
    ("f32", "gspmd", CONSTRAINED, None, None),
])
def test_a_bug_every_configuration_shares_is_reproduced_and_localized(
        probe, tmp_path, dtype, partitioner, regions, spec, reason) -> None:
    graph = shift_graph(dtype, partitioner, regions, spec)
    folder = shift_finding(tmp_path / f"shift-{dtype}", probe, graph, reason)

    result = bisect_finding(folder, timeout=TIMEOUT)

    assert result["reproduces"], result["stages"]["reproduce"]
    assert result["status"] == "localized", result["stages"]
    # The loop that holds the shift and the set: what the partitioner gets wrong; inside
    # it (bisect/regions.py, docs/bisect.md) the set, a scatter, is the first value wrong.
    loop = result["stages"]["regions"]["outer_op"]
    assert loop.startswith("while ("), result["stages"]["graph"]
    assert result["culprit_op"].startswith("scatter ("), result["stages"]["regions"]
    assert re.fullmatch(r"main/while#\d+/body/scatter#\d+", result["culprit_path"]), result["stages"]["regions"]
    if regions:
        # The suffix search stops at the constraint, which computes nothing and which the
        # bug needs: reduce moves the culprit on to the loop.
        assert result["stages"]["graph"]["culprit_op"].startswith("custom_call"), result["stages"]["graph"]
        assert result["stages"]["reduce"]["culprit_moved"]["to"] == loop
    bundle = folder / result["repro"]
    assert "mhlo.num_partitions = 2" in (bundle / "module.mlir").read_text()
    # The bundle's expected values are the unsharded ones: the target shows the bug against
    # them, and the cure that the bug's reproducer names agrees with them.
    shown = repro(bundle)
    assert shown.returncode == 1 and "BUG" in shown.stdout, shown.stdout + shown.stderr
    cured = repro(bundle, "--xla-option", "xla_disable_hlo_passes=algsimp")
    assert cured.returncode == 0, cured.stdout + cured.stderr
    recorded = json.loads((folder / "finding.json").read_text())
    assert recorded["culprit_op"] == result["culprit_op"]


def test_one_device_strips_the_shardings_and_keeps_a_manual_region(probe) -> None:
    """module.one_device: a partitioned module without per-device parts runs on one device
    as it is, its shardings and layout ops gone; a shard_map region has no one-device form."""
    from xla_sentinel.xla.cuts import one_device

    constrained = shift_graph("s32", "shardy", {1: {"kind": "constraint", "spec": [None]}})
    module = probe.call(Lower(constrained), TIMEOUT).module
    assert "sdy.sharding_constraint" in module and "sdy.mesh" in module
    text = one_device(module)
    assert text is not None
    assert "mhlo.num_partitions = 1" in text
    assert "sdy" not in text and "sharding" not in text
    module = probe.call(Lower(shift_graph("f32", "gspmd", CONSTRAINED, None)), TIMEOUT).module
    assert "@Sharding" in module
    gspmd = one_device(module)
    assert gspmd is not None and "mhlo.sharding" not in gspmd and "@Sharding" not in gspmd

    psum = {"kind": "psum_broadcast", "axis": "x", "source": 1}
    assert one_device(probe.call(Lower(shift_graph("s32", "shardy", {1: psum})), TIMEOUT).module) is None
    assert one_device(probe.call(Lower(shift_graph("s32", "gspmd", {1: psum})), TIMEOUT).module) is None
