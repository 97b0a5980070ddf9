"""Every SPMD region is the identity on its value: a one-op program with the region run on
several devices equals the program run unsharded, bitwise, and its module holds the
collective the region is for, partitioned over the plan's devices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from spmd_programs import inputs_for, lower_and_run, one_op_graph, with_region

SUMS = ("psum_scatter", "psum_broadcast")
# (mesh, region, what the lowered module must hold)
CASES: list[tuple[list[int], dict[str, Any], str]] = [
    ([4], {"kind": "constraint", "spec": ["x", None]}, "sharding"),
    ([2, 2], {"kind": "all_gather", "axis": "y", "dim": 1}, "all_gather"),
    ([4], {"kind": "psum_scatter", "axis": "x", "dim": 0, "source": 3}, "reduce_scatter"),
    ([2, 2], {"kind": "psum_broadcast", "axis": "x", "source": 1}, "all_reduce"),
    ([2, 2], {"kind": "pmax_broadcast", "axis": "y", "source": 0}, "all_reduce"),
    ([4], {"kind": "ppermute", "axis": "x", "dim": 1, "shift": 3}, "collective_permute"),
    ([4], {"kind": "all_to_all", "axis": "x", "dim": 0, "to": 1}, "all_to_all"),
]


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize(("mesh", "region", "collective"), CASES, ids=[c[1]["kind"] for c in CASES])
def test_region_is_the_identity_on_several_devices(probe, partitioner, mesh, region, collective) -> None:
    graph = with_region(one_op_graph((8, 12)), mesh, region, partitioner,
                        inputs=[["x", None], [None, None]])
    inputs = inputs_for(graph)
    inputs[0][0, 0] = -0.0  # a signed zero survives the regions that add -0.0
    inputs[1][0, 0] = -0.0

    reply = lower_and_run(probe, graph, inputs)

    assert f"mhlo.num_partitions = {int(np.prod(mesh))}" in reply["module"]
    assert collective in reply["module"]
    assert ("sdy.mesh" in reply["module"]) == (partitioner == "shardy")
    (sharded,), (unsharded,) = reply["sharded"], reply["unsharded"]
    np.testing.assert_array_equal(unsharded, inputs[0] + inputs[1])
    if region["kind"] in SUMS:
        # XLA:CPU sums -0.0 + -0.0 to +0.0 in its collectives (see the test below): the
        # region is the identity everywhere else, bitwise.
        assert not np.signbit(sharded[0, 0]) and np.signbit(unsharded[0, 0])
        sharded, unsharded = sharded.reshape(-1)[1:], unsharded.reshape(-1)[1:]
    assert sharded.tobytes() == unsharded.tobytes()


def test_xla_cpu_all_reduce_loses_the_sign_of_zero(probe) -> None:
    """A known XLA:CPU deviation from IEEE 754 (-0.0 + -0.0 is -0.0): an all-reduce sum
    over devices that all hold -0.0 gives +0.0, where the same sum as an add keeps -0.0.
    The oracle compares zeros by value, so campaigns do not flag it; this test says when
    XLA changes it."""
    graph = with_region(one_op_graph((2, 2)), [2], {"kind": "psum_broadcast", "axis": "x", "source": 0})
    inputs = [np.full((2, 2), -0.0, np.float32), np.full((2, 2), -0.0, np.float32)]

    reply = lower_and_run(probe, graph, inputs)

    assert np.signbit(reply["unsharded"][0]).all()
    assert not np.signbit(reply["sharded"][0]).any()


@pytest.mark.parametrize("dtype", ["s32", "u8", "bool"])
def test_regions_keep_integer_and_bool_values(probe, dtype) -> None:
    region = {"kind": "ppermute", "axis": "x", "dim": 0, "shift": 1} if dtype == "bool" \
        else {"kind": "pmax_broadcast", "axis": "x", "source": 1}
    graph = with_region(one_op_graph((4, 6), dtype), [2], region)
    inputs = inputs_for(graph)

    reply = lower_and_run(probe, graph, inputs)

    np.testing.assert_array_equal(reply["sharded"][0], reply["unsharded"][0])


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_an_uneven_constraint_is_the_identity(probe, partitioner) -> None:
    """A sharding constraint of a dimension its axis does not divide (spmd.UNEVEN_P): the
    partitioner pads the last shards and must cut the padding off again."""
    graph = with_region(one_op_graph((7, 5)), [2, 2], {"kind": "constraint", "spec": ["x", "y"]}, partitioner,
                        inputs=[[None, None], [None, None]])
    inputs = inputs_for(graph)

    reply = lower_and_run(probe, graph, inputs)

    (sharded,), (unsharded,) = reply["sharded"], reply["unsharded"]
    assert sharded.tobytes() == unsharded.tobytes()


def test_uneven_constraints_come_from_their_own_stream() -> None:
    """With the uneven stream a plan is the plan drawn without it but for the constraints
    it makes uneven, each one axis moved onto a dimension that axis does not divide."""
    from xla_sentinel.programs import spmd
    from xla_sentinel.programs.generator import generate
    from xla_sentinel.spec.campaign import parse_spec

    spec = parse_spec({"seed": 5, "generator": {"devices": 4, "sharded": 1.0, "maxOps": 12}}).generator
    made = 0
    for i in range(60):
        graph = generate(5, i, spec)
        if graph.sharding is None:
            continue  # a large program (generator.LARGE_P) is never sharded
        plain_rng = np.random.default_rng([5, i, 0x5BD])
        plain_rng.random()  # the sharded-or-not draw (generator._partition)
        plain = spmd.plan(graph, 4, plain_rng, tuple(spec.partitioners))
        drawn = graph.sharding
        assert (drawn.mesh, drawn.partitioner, drawn.inputs, drawn.outputs) == \
            (plain.mesh, plain.partitioner, plain.inputs, plain.outputs)
        assert drawn.regions.keys() == plain.regions.keys()
        sizes = dict(zip(drawn.axes, drawn.mesh, strict=True))
        for v, region in drawn.regions.items():
            if region == plain.regions[v]:
                continue
            assert region["kind"] == "constraint"
            shape = graph.values[v].shape
            assert any(a is not None and shape[d] % sizes[a] for d, a in enumerate(region["spec"])), region
            made += 1
    assert made >= 3
