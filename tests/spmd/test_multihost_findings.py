"""The multi-host clean run's f16 findings (issue 35: s35-i454, s35-i957, hosts2x2 only)
are XLA's, not the driver's.

Both are NaN where one process is finite, after an f16 all-reduce across the processes:
gloo's float16 drops a sum, max or min whose bits equal the old value's bits read as an
integer (bench/repros/multihost_gloo_f16_allreduce_keeps_operand.py). What the driver
adds on the way (each host's shards of the inputs, the output shards it puts together
on host 0) must carry f16 bit for bit, or the layout's target would show our errors as
XLA's: these programs move f16 values holding every special class across the process
boundary with collectives that combine none of them (so gloo's arithmetic is not in the
path), and must give one process's bits. Real jax.distributed group on loopback, gloo
between the processes; the one-process twin is the spmd probe worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from spmd_programs import TIMEOUT, one_op_graph, with_region
from xla_sentinel.core.graph import Graph
from xla_sentinel.worker.client import Worker
from xla_sentinel.worker.hosts import HostGroup, Layout
from xla_sentinel.worker.protocol import Lower, Run

# The engine's: a lost host's peer is ended by the coordinator within it.
HEARTBEAT_S = 10

# f16 values of every class, and the ones whose bits read as an integer make the gloo bug
# fire (2**-24 is bits 1): subnormals, signed zeros, the extremes, inf, NaN.
F16_SPECIALS = np.array(
    [
        2.0**-24,
        -(2.0**-24),
        2.0**-14,
        1023 * 2.0**-24,
        0.0,
        -0.0,
        1.0,
        -1.5,
        65504.0,
        -65504.0,
        np.inf,
        -np.inf,
        np.nan,
        16.0,
        19440.0,
        3.140625,
        -(2.0**-20),
        0.5,
        1e-3,
        -7.0,
        2048.0,
        2.0**-10,
        1.0 + 2.0**-10,
        -0.25,
    ],
    dtype=np.float16,
).reshape(4, 6)


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostGroup]:
    hosts = HostGroup(Layout(2, 2), [], tmp_path_factory.mktemp("logs"), heartbeat_s=HEARTBEAT_S)
    try:
        yield hosts
    finally:
        hosts.close()


# On a 2x2 mesh axis x joins devices {0, 2} and {1, 3}, one of each host, so these regions'
# collectives cross the process boundary. The inputs are split over x (each host gets its
# own rows), y over y; the output over both.
REGIONS = [
    {"kind": "all_gather", "axis": "x", "dim": 0},
    {"kind": "all_to_all", "axis": "x", "dim": 0, "to": 1},
    {"kind": "ppermute", "axis": "x", "dim": 0, "shift": 1},
]


@pytest.mark.parametrize("region", REGIONS, ids=lambda r: r["kind"])
def test_f16_specials_cross_hosts_bit_for_bit(
    probe: Worker, group: HostGroup, region: dict[str, Any]
) -> None:
    graph: Graph = with_region(
        one_op_graph((4, 6), "f16"),
        [2, 2],
        region,
        inputs=[["x", None], [None, "y"]],
        output=["x", "y"],  # rows across the hosts: host 0 puts host 1's shards in
    )
    # x + (-0.0) is x for every f16 x, signed zeros included: the program moves values only.
    inputs = [F16_SPECIALS, np.full((4, 6), -0.0, np.float16)]
    module = str(probe.call(Lower(graph), TIMEOUT).module)
    before = group.cross_host_programs

    on_hosts = np.asarray(group.call(Run(module, inputs, {}), TIMEOUT).outputs[0])
    one_process = np.asarray(probe.call(Run(module, inputs, {}), TIMEOUT).outputs[0])

    assert on_hosts.dtype == one_process.dtype == np.float16
    assert on_hosts.tobytes() == one_process.tobytes()
    # The regions are the identity: every value arrived as it left, 2**-24 (bits 1) included.
    assert on_hosts.tobytes() == F16_SPECIALS.tobytes()
    assert group.cross_host_programs - before == 1
