"""Each SPMD fault fires on a partitioned program and the oracle detects it: a program
folder whose module holds the collective the fault corrupts passes `check` clean and is
a mismatch with the fault injected into the target."""

from __future__ import annotations

from pathlib import Path

import pytest
from spmd_programs import inputs_for, lower_and_run, one_op_graph, with_region
from xla_sentinel.campaign.check import check_program
from xla_sentinel.core.program import Program
from xla_sentinel.xla.faults import fault_path

# A sum over mesh axis x of a 2x2 mesh (groups {0,2},{1,3}) of a replicated value, one
# device's copy chosen by axis_index; the result is returned sharded, so each device
# slices its part at an offset computed from its partition-id: every SPMD fault corrupts
# it. (Replicated in and out, an off-by-one partition-id would only pick another
# device's identical copy.)
REGION = {"kind": "psum_broadcast", "axis": "x", "source": 1}
CAMPAIGN = "targets: [default]\nreferences: [f64_eager, eager]\n"


@pytest.fixture(scope="module")
def program(probe, tmp_path_factory) -> Path:
    graph = with_region(one_op_graph((4, 6)), [2, 2], REGION, inputs=[[None, None], [None, None]],
                       output=["x", "y"])
    inputs = inputs_for(graph)
    reply = lower_and_run(probe, graph, inputs)
    folder = tmp_path_factory.mktemp("spmd") / "program"
    Program("spmd-psum", reply["module"], inputs, ["f32", "f32"], graph=graph).save(folder)
    (folder.parent / "campaign.yaml").write_text(CAMPAIGN)
    return folder


def test_the_clean_sharded_program_passes(program) -> None:
    (row,) = check_program(program, program.parent / "campaign.yaml")

    assert (row["verdict"], row["status"]) == ("pass", "judged")


@pytest.mark.parametrize("fault", ["allreduce_wrong_groups", "allreduce_twice", "partition_id_off_by_one"])
def test_spmd_fault_is_detected(program, fault) -> None:
    (row,) = check_program(program, program.parent / "campaign.yaml", [fault_path(fault)])

    assert row["verdict"] == "mismatch", row
