"""A finding from a sharded program is bisected like any other: the bisector's cuts keep
the module's num_partitions and its arguments' and results' shardings, a GSPMD module's
per-device values are never fed or returned, and the bundle's repro.py sets the device
count it needs before jax starts, so it reproduces alone: exit 1 with the injected SPMD
fault, 0 without."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spmd_programs import inputs_for, lower_and_run, region_between_ops
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.core.program import Program
from xla_sentinel.triage.signature import signature_id
from xla_sentinel.xla.faults import fault_path

# A sum over mesh axis x of one device's copy: allreduce_twice doubles it.
PSUM = {"kind": "psum_broadcast", "axis": "x", "source": 1}


def sharded_finding(folder: Path, probe: Any, partitioner: str, fault: str) -> Path:
    """A finding folder as the campaign writes it, for the region program under `fault`."""
    graph = region_between_ops(partitioner, PSUM)
    inputs = inputs_for(graph)
    module = lower_and_run(probe, graph, inputs)["module"]
    Program(folder.name, module, inputs, ["f32", "f32"], graph=graph).save(folder / "program")
    record = {"id": folder.name, "campaign": "test", "program": folder.name, "target": "default",
              "verdict": "mismatch", "culprit_op": None, "culprit_pass": None, "fusion_kind": None,
              "dtype": "f32", "evidence": {"target_options": {}, "plugins": [fault_path(fault)]},
              "dir": folder.name, "time": "2026-01-01T00:00:00+00:00"}
    record["signature"] = signature_id(record)
    (folder / "finding.json").write_text(json.dumps(record, indent=1))
    return folder


def repro(bundle: Path, *args: str, script: str = "repro.py") -> subprocess.CompletedProcess[str]:
    """A bundle's script as a person runs it: no XLA_FLAGS of ours, so no virtual devices
    but its own."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, script, *args], cwd=bundle, capture_output=True,
                          text=True, timeout=120, env=env)


def issue_snippet(bundle: Path) -> str:
    """issue.md's reproducer, written beside the plugin copy it registers."""
    snippet = re.search(r"```python\n(.*?)```", (bundle / "issue.md").read_text(), re.S).group(1)
    (bundle / "issue_repro.py").write_text(snippet)
    return "issue_repro.py"


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_spmd_fault_is_localized_to_its_region_and_reproduces_alone(probe, tmp_path, partitioner) -> None:
    folder = sharded_finding(tmp_path / f"spmd-{partitioner}", probe, partitioner, "allreduce_twice")

    result = bisect_finding(folder, timeout=120)

    assert result["status"] == "localized", result["stages"]
    culprit = result["stages"]["graph"]["op_text"]
    # The op that holds the doubled all-reduce: Shardy's manual computation, or where
    # GSPMD's manual region starts.
    assert ("sdy.manual_computation" if partitioner == "shardy" else "@SPMDFullToShardShape") in culprit
    bundle = folder / result["repro"]
    module = (bundle / "module.mlir").read_text()
    assert "mhlo.num_partitions = 4" in module and "all_reduce" in module
    assert "PARTITIONS = 4" in (bundle / "repro.py").read_text()
    with_fault, without = repro(bundle), repro(bundle, "--without-plugins")
    assert with_fault.returncode == 1 and "BUG" in with_fault.stdout, with_fault.stdout + with_fault.stderr
    assert without.returncode == 0, without.stdout + without.stderr
    # The upstream issue's reproducer places inputs and joins outputs by the compiled
    # shardings itself, on the 4 devices it asks for.
    snippet = issue_snippet(bundle)
    assert "xla_force_host_platform_device_count=4" in (bundle / snippet).read_text()
    shown = repro(bundle, script=snippet)
    assert shown.returncode == 1 and "normwise error" in shown.stdout, shown.stdout + shown.stderr


def test_a_cut_keeps_the_result_sharding_the_fault_needs(probe, tmp_path) -> None:
    """partition_id_off_by_one shows only where a device slices its part of a sharded
    result: the reduced case is the last op alone, returned with @main's sharding."""
    folder = sharded_finding(tmp_path / "spmd-slice", probe, "shardy", "partition_id_off_by_one")

    result = bisect_finding(folder, timeout=120)

    assert result["status"] == "localized", result["stages"]
    assert result["stages"]["reduce"]["kept_ops"] == ["stablehlo.multiply"]
    module = (folder / result["repro"] / "module.mlir").read_text()
    assert 'sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>' in module
    assert repro(folder / result["repro"]).returncode == 1
