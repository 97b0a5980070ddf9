"""Programs that span host processes (worker/hosts.py, worker/host.py, campaign/multihost.py).

Real jax.distributed groups on loopback, gloo collectives between the processes: one of
2 hosts x 2 devices and one of 4 hosts x 1 device, each started once for the module (a
host imports jax and joins the coordinator: seconds each). The one-process twin is the
spmd probe worker (8 virtual devices)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from spmd_programs import SLOW_PLUGIN, TIMEOUT, inputs_for, one_op_graph, with_region
from xla_sentinel.campaign.multihost import LayoutAssessor, layout_disagreement
from xla_sentinel.core import cpu_account
from xla_sentinel.core.graph import Graph
from xla_sentinel.core.model import ProgramStatus, Verdict
from xla_sentinel.core.program import Program
from xla_sentinel.judge import oracle
from xla_sentinel.judge.assess import Assessor, Slot
from xla_sentinel.judge.targets import Target
from xla_sentinel.worker.client import WorkerDied, WorkerHung
from xla_sentinel.worker.hosts import HostGroup, Layout, collectives
from xla_sentinel.worker.protocol import Lower, Run

# The engine's: a lost host's peer is ended by the coordinator within it (gloo usually
# fails the collective sooner, when the lost host's connection closes).
HEARTBEAT_S = 10


@pytest.fixture(scope="module")
def group2(slow_flag, tmp_path_factory) -> Iterator[HostGroup]:
    group = HostGroup(Layout(2, 2), [SLOW_PLUGIN], tmp_path_factory.mktemp("logs2"), heartbeat_s=HEARTBEAT_S)
    try:
        yield group
    finally:
        group.close()


@pytest.fixture(scope="module")
def group4(tmp_path_factory) -> Iterator[HostGroup]:
    group = HostGroup(Layout(4, 1), [], tmp_path_factory.mktemp("logs4"), heartbeat_s=HEARTBEAT_S)
    try:
        yield group
    finally:
        group.close()


def _module(probe, graph: Graph) -> str:
    return str(probe.call(Lower(graph), TIMEOUT).module)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# Regions on a 2x2 mesh, and whether the program's collectives cross the process boundary:
# mesh axis x joins devices {0,2} and {1,3}, one of each host; axis y joins {0,1} and
# {2,3}, each group on one host. The crossing programs' inputs are split over x, the last
# one's over y only (no resharding across hosts either).
ACROSS = ([["x", None], [None, "y"]], ["y", None])
WITHIN = ([[None, "y"], [None, "y"]], [None, "y"])
CASES = [
    ({"kind": "psum_broadcast", "axis": "x", "source": 1}, "f32", ACROSS, True),
    ({"kind": "pmax_broadcast", "axis": "x", "source": 0}, "s32", ACROSS, True),
    ({"kind": "all_gather", "axis": "x", "dim": 0}, "f32", ACROSS, True),
    ({"kind": "ppermute", "axis": "x", "dim": 0, "shift": 1}, "s32", ACROSS, True),
    ({"kind": "all_to_all", "axis": "x", "dim": 0, "to": 1}, "f32", ACROSS, True),
    ({"kind": "psum_broadcast", "axis": "y", "source": 1}, "f32", WITHIN, False),
]


@pytest.mark.parametrize(("region", "dtype", "specs", "crosses"), CASES, ids=lambda c: str(c))
def test_two_hosts_compute_what_one_process_computes_bit_for_bit(probe, group2, region, dtype, specs,
                                                                 crosses) -> None:
    graph = with_region(one_op_graph((4, 6), dtype), [2, 2], region, inputs=specs[0], output=specs[1])
    inputs = inputs_for(graph)
    module = _module(probe, graph)
    before = group2.cross_host_programs

    on_hosts = group2.call(Run(module, inputs, {}), TIMEOUT).outputs
    one_process = probe.call(Run(module, inputs, {}), TIMEOUT).outputs

    assert _same_bits(on_hosts[0], one_process[0])
    assert np.array_equal(on_hosts[0], inputs[0] + inputs[1])  # the region is the identity
    assert group2.cross_host_programs - before == int(crosses)


def test_four_hosts_of_one_device_each(probe, group4) -> None:
    graph = with_region(one_op_graph((8, 3)), [4], {"kind": "psum_scatter", "axis": "x", "dim": 0, "source": 2},
                        inputs=[["x", None], [None, None]], output=["x", None])
    inputs = inputs_for(graph, seed=4)
    module = _module(probe, graph)
    before = cpu_account.WORKERS.snapshot()

    ran = group4.call(Run(module, inputs, {}, repeat=True), TIMEOUT)

    assert _same_bits(ran.outputs[0], probe.call(Run(module, inputs, {}), TIMEOUT).outputs[0])
    assert ran.again is not None and _same_bits(ran.again[0], ran.outputs[0])
    assert group4.cross_host_programs >= 1
    # The host processes' CPU is in the campaign's account (bench/throughput.py), by stage,
    # under the layout's name, added before the call returns: their start-up (this is the
    # group's first call) and the two compiles and runs of every host.
    spent = {k: v - before.get(k, 0.0) for k, v in cpu_account.WORKERS.snapshot().items()}
    for stage in (cpu_account.STARTUP, cpu_account.COMPILE, cpu_account.RUN):
        assert spent.get(f"hosts4x1:{stage}", 0.0) > 0, (stage, spent)
    # Start-up is each host's import of jax and its join: more than one compile of one op.
    assert spent["hosts4x1:startup"] > spent["hosts4x1:compile"], spent


def _assessor(probe, group2) -> tuple[LayoutAssessor, Slot]:
    default = Target("default")
    slot = Slot("multihost", [default], (), None)
    # The probe serves every request of the protocol: programs, references and the twin.
    slot.programs = probe
    slot.targets = {"default": probe, "hosts2x2": group2}
    base = Assessor([default], ["f64_numpy", "eager"], TIMEOUT)
    return LayoutAssessor.around(base, Layout(2, 2)), slot


def test_the_layout_is_a_target_of_the_assessor_on_sharded_programs_only(probe, group2) -> None:
    assessor, slot = _assessor(probe, group2)
    sharded = with_region(one_op_graph((4, 6)), [2, 2], {"kind": "psum_broadcast", "axis": "x", "source": 0},
                          inputs=[["x", "y"], [None, None]], output=[None, "y"])
    unsharded = one_op_graph((4, 6))
    programs = [Program(f"p{i}", _module(probe, g), inputs_for(g), ["f32", "f32"], graph=g)
                for i, g in enumerate([sharded, unsharded])]

    on_sharded, on_unsharded = (assessor.assess(slot, p) for p in programs)

    assert [t.name for t in assessor.targets] == ["default", "hosts2x2"]
    assert (on_sharded.status, on_sharded.verdicts) == (ProgramStatus.JUDGED, [])
    assert on_sharded.compile_s["hosts2x2"] > 0  # it ran there
    assert (on_unsharded.status, on_unsharded.verdicts) == (ProgramStatus.JUDGED, [])
    assert on_unsharded.compile_s["hosts2x2"] == 0  # skipped: one partition


def test_layout_disagreement_is_the_oracles_bitwise_rule_on_exact_outputs_only() -> None:
    twin = [np.arange(6, dtype=np.int32), np.array([1.0, 2.0], np.float32), np.array([np.nan, 0.0], np.float32)]
    exact, rounded = oracle.OutputInfo("s32", tainted=False, bitwise=True), oracle.OutputInfo("f32")
    lay = Layout(2, 2)
    nan_other_sign = np.array([-np.nan, 0.0], np.float32)
    infos = [exact, rounded, oracle.OutputInfo("f32", bitwise=True)]

    agree = layout_disagreement(twin, [twin[0], twin[1] * 1.0000001, nan_other_sign], infos, "default", lay)
    off = twin[0].copy()
    off[4] += 1
    j = layout_disagreement(twin, [off, twin[1], twin[2]], infos, "default", lay)
    # The oracle's bitwise rule: the sign of a zero and a flushed subnormal are XLA's to
    # choose (two f16 outputs of a clean 2-host run were +0.0 on one process, -0.0 on two).
    zero_like = layout_disagreement(twin, [twin[0], twin[1], np.array([np.nan, -1e-40], np.float32)],
                                    infos, "default", lay)
    other = layout_disagreement(twin, [twin[0], twin[1], np.array([np.nan, 0.5], np.float32)],
                                infos, "default", lay)

    assert agree is None  # the float output is the noise model's to judge; NaN signs are open
    assert j is not None and (j.verdict, j.output) == (Verdict.MISMATCH, 0)
    assert j.evidence["reason"] == "layout" and j.evidence["where"] == [4]
    assert j.evidence["layout"] == "2 processes x 2 devices" and j.evidence["against"] == "default"
    assert zero_like is None
    assert other is not None and other.output == 2 and other.evidence["actual"] == 0.5


def _psum_program_on(group: HostGroup, probe, seed: int) -> tuple[str, list[np.ndarray]]:
    """A psum across the hosts and its inputs, run once on `group` so the group is up."""
    graph = with_region(one_op_graph((4, 6)), [2, 2], {"kind": "psum_broadcast", "axis": "x", "source": 1},
                        inputs=[["x", None], [None, None]], output=[None, None])
    inputs = inputs_for(graph, seed=seed)
    module = _module(probe, graph)
    group.call(Run(module, inputs, {}), TIMEOUT)
    return module, inputs


def test_a_host_killed_mid_program_is_a_hang_naming_it_and_the_group_restarts(probe, group2, slow_flag) -> None:
    module, inputs = _psum_program_on(group2, probe, seed=7)  # the group is up
    old = group2.pids()
    restarts = group2.restarts
    slow_flag.touch()  # host 1 stalls in its compile; host 0 goes on into the all-reduce
    compiling = Path(f"{slow_flag}.compiling")

    def kill_host_1() -> None:
        deadline = time.monotonic() + TIMEOUT
        while not compiling.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # host 0 compiled too and waits in the collective by now
        os.kill(old[1], 9)

    killer = threading.Thread(target=kill_host_1)
    killer.start()
    started = time.monotonic()
    try:
        with pytest.raises(WorkerHung) as hung:
            group2.call(Run(module, inputs, {}), TIMEOUT)
    finally:
        killer.join()
        slow_flag.unlink()
    took = time.monotonic() - started

    message = str(hung.value)
    assert "host 1 (exit -9) lost" in message, message
    assert "hosts [0] waited" in message and "all-reduce" in message and "across hosts" in message, message
    assert took < TIMEOUT / 2  # the heartbeat ends the wait, not the request's timeout
    assert group2.restarts == restarts + 1
    assert all(not Path(f"/proc/{pid}").exists() for pid in old)  # no host left behind
    again = group2.call(Run(module, inputs, {}), TIMEOUT).outputs  # a fresh group
    assert np.array_equal(again[0], inputs[0] + inputs[1])
    assert set(group2.pids()).isdisjoint(old)


def test_a_host_that_aborts_in_its_compile_is_a_crash_naming_it(probe, group2, slow_flag) -> None:
    # As one process gives for the same compiler abort, so the finding signs with it: a
    # clean 2-host run had host 0 abort in the SPMD partitioner while host 1 still compiled,
    # recorded as a `hang` that named no collective and matched no known bug.
    module, inputs = _psum_program_on(group2, probe, seed=8)  # the group is up
    old, restarts = group2.pids(), group2.restarts
    abort = Path(f"{slow_flag}.abort")
    abort.touch()
    try:
        with pytest.raises(WorkerDied) as died:
            group2.call(Run(module, inputs, {}), TIMEOUT)
    finally:
        abort.unlink()
    assert died.value.exitcode == -6 and "host 1" in died.value.log_tail, died.value.log_tail[:500]
    assert group2.restarts == restarts + 1
    assert all(not Path(f"/proc/{pid}").exists() for pid in old)  # no host left behind
    again = group2.call(Run(module, inputs, {}), TIMEOUT).outputs  # a fresh group
    assert np.array_equal(again[0], inputs[0] + inputs[1])


def test_collectives_are_read_from_every_replica_group_form() -> None:
    hlo = "\n".join([
        "  %a = f32[4]{0} all-reduce(%p), channel_id=1, replica_groups={{0,2},{1,3}}, to_apply=%sum",
        "  %b = f32[4]{0} all-gather(%p), channel_id=2, replica_groups=[2,2]<=[4], dimensions={0}",
        "  %c = f32[4]{0} all-to-all(%p), channel_id=3, replica_groups=[2,2]<=[2,2]T(1,0), dimensions={0}",
        "  %d = f32[4]{0} all-reduce(%p), replica_groups=mesh['x'=2,'y'=2] {'y'}, to_apply=%sum",
        # jaxlib 0.10.2's form: mesh ids [[0,2],[1,3]] after the transpose, grouped along
        # axis_1: {0,1} and {2,3}, each on one host.
        "  %all-gather = f32[4,6]{0,1} all-gather(%c), channel_id=2, replica_groups=mesh['axis_0'=1,"
        "'axis_1'=2,'axis_2'=2], device_ids=([2,2]T(1,0)) {'axis_1'}, dimensions={1}",
        "  %h = f32[4]{0} all-gather(%p), replica_groups=mesh['a'=2,'b'=2], device_ids=(0,2,1,3) {'b'}",
        "  %e = f32[4]{0} collective-permute(%p), channel_id=4, source_target_pairs={{0,1},{1,0}}",
        "  ROOT %f = (f32[4]{0}, f32[4]{0}) all-reduce-start(%p, %q), replica_groups={}, to_apply=%sum",
        "  %g = f32[4]{0} add(%p, %q)",
    ])

    found = collectives(hlo, [0, 0, 1, 1])

    assert [(c["name"], c["kind"], c["crosses"]) for c in found] == [
        ("a", "all-reduce", True), ("b", "all-gather", False), ("c", "all-to-all", True),
        ("d", "all-reduce", False), ("all-gather", "all-gather", False), ("h", "all-gather", True),
        ("e", "collective-permute", False), ("f", "all-reduce", True)]



def test_closing_a_busy_group_ends_its_call_at_once_and_leaves_no_host(probe, group2, slow_flag) -> None:
    # Last in the module: a closed group stays closed (a stopping campaign's slots must not
    # start a fresh one), so no test may use group2 after this one.
    graph = with_region(one_op_graph((4, 6)), [2, 2], {"kind": "psum_broadcast", "axis": "x", "source": 0},
                        inputs=[["x", None], [None, None]], output=[None, None])
    module = _module(probe, graph)
    inputs = inputs_for(graph, seed=9)
    group2.call(Run(module, inputs, {}), TIMEOUT)
    pids = group2.pids()
    slow_flag.touch()
    compiling = Path(f"{slow_flag}.compiling")
    compiling.unlink(missing_ok=True)
    raised: list[BaseException] = []

    def busy() -> None:
        try:
            group2.call(Run(module, inputs, {}), TIMEOUT)
        except BaseException as e:  # what the call ended with, checked below
            raised.append(e)

    caller = threading.Thread(target=busy)
    caller.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while not compiling.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        group2.close()
        caller.join(TIMEOUT)
    finally:
        slow_flag.unlink()
    took = time.monotonic() - started

    assert not caller.is_alive() and took < 10, took
    assert len(raised) == 1 and isinstance(raised[0], WorkerDied), raised
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids)
    with pytest.raises(WorkerDied) as closed:
        group2.call(Run(module, inputs, {}), TIMEOUT)
    assert closed.value.log_tail == "hosts2x2: closed" and group2.pids() == []
