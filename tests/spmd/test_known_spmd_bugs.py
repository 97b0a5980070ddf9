"""The bugs of the clean runs (issue 13's devices-4 run, SPMD and not; the seed-26 run) are
known bugs (runners/xla_sentinel/triage/known_bugs.yaml):
a campaign's finding of a program that shows one is marked with its entry, a finding of
another program is not (docs/spmd.md, "The devices-4 clean run").

The programs are built by hand, a few elements each, and go the campaign's way: lowered
with their plan, judged by an Assessor on real compiles, recorded by a Recorder (which
matches each finding against the list with the program's graph)."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xla_sentinel.campaign.recording import Counters, Recorder
from xla_sentinel.core.graph import Graph, Node, ShardingPlan, Spec, Value
from xla_sentinel.core.model import Finding
from xla_sentinel.core.program import Program
from xla_sentinel.judge.assess import Assessor, Slot
from xla_sentinel.judge.targets import resolve
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.triage import known_bugs
from xla_sentinel.worker.client import wait_ready
from xla_sentinel.worker.protocol import Lower
from xla_sentinel.xla.faults import fault_path

TIMEOUT = 120.0
SPEC = parse_spec({"targets": ["default"], "references": ["f64_eager", "eager"],
                   "bisect": {"enabled": False}})


def _value(shape: list[int], dtype: str, **source: int) -> Value:
    return Value(shape, dtype, bitwise=True, **source)


def _plan(inputs: list[Spec], outputs: list[Spec]) -> ShardingPlan:
    return ShardingPlan(devices=2, mesh=(2,), axes=("x",), partitioner="shardy", inputs=inputs,
                        outputs=outputs)


# s32[8] over 2 devices, one trip of x.at[1:].set(x[:-1]).at[0].set(-x[0]): XLA gives
# [-1, 1, 2, 3, 1, 5, 6, 7] for [-1, 1, ..., 7] (bench/repros/spmd_scatter_after_shift.py).
SHIFT = Graph(values=[_value([8], "s32", input=0), _value([8], "s32", node=0)],
              nodes=[Node("loop_shift", [0],
                          {"loop": "fori", "body": "neg", "trips": 1, "step": 0, "offset": 0, "axis": 0})],
              outputs=[1], sharding=_plan([["x"]], [["x"]]))
SHIFT_INPUTS = [np.arange(1, 9, dtype=np.int32)]

# An f32[2, 1] update of f32[2, 4] sharded along dimension 1, at column 9 (clamped to 3):
# dropped (bench/repros/spmd_dynamic_update_slice_clamp.py).
DUS = Graph(values=[_value([2, 4], "f32", input=0), _value([2, 1], "f32", input=1),
                    _value([], "s32", input=2), _value([], "s32", input=3), _value([2, 4], "f32", node=0)],
            nodes=[Node("dynamic_update_slice", [0, 1, 2, 3])],
            outputs=[4], sharding=_plan([[None, "x"], [None, None], [], []], [[None, "x"]]))
DUS_INPUTS = [np.zeros((2, 4), np.float32), np.ones((2, 1), np.float32), np.int32(0), np.int32(9)]

# A psum of one device's copy on a 2x2 mesh, returned sharded: right on XLA, wrong only
# with an injected fault (tests/spmd/test_spmd_faults.py), which is no XLA bug.
PSUM = Graph(values=[_value([4, 6], "f32", input=0), _value([4, 6], "f32", input=1),
                     Value([4, 6], "f32", tainted=True, node=0, bitwise=False)],
             nodes=[Node("add", [0, 1])],
             outputs=[2],
             sharding=ShardingPlan(devices=4, mesh=(2, 2), axes=("x", "y"), partitioner="shardy",
                                   inputs=[[None, None], [None, None]], outputs=[["x", "y"]],
                                   regions={2: {"kind": "psum_broadcast", "axis": "x", "source": 1}}))
PSUM_INPUTS = [np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6),
               np.linspace(1, 3, 24, dtype=np.float32).reshape(4, 6)]


# One device, x.at[1:].set(x[:-1]) then [None]: XLA gives x[0] everywhere
# (bench/repros/shift_set_then_reshape.py, s31-i2080); without the reshape it is right.
def _shift_then(reshape: bool) -> Graph:
    shift = Node("loop_shift", [0], {"loop": "scan", "body": "neg", "trips": 1, "step": 2, "offset": 0, "axis": 0})
    nodes = [shift, Node("expand_dims", [1], {"dims": [1]})]
    values = [_value([7], "s32", input=0), _value([7], "s32", node=0), _value([7, 1], "s32", node=1)]
    n = 2 if reshape else 1
    return Graph(values=values[:n + 1], nodes=nodes[:n], outputs=[n])


SHIFT_INPUTS_7 = [np.array([12, -7, -3, -3, 12, 13, 0], np.int32)]

# cummin and cummax of one s32[4] sharded in 2 along the scan: cummax's second shard is
# INT32_MAX (bench/repros/spmd_cumulative_int_init.py, s31-i2531).
CUMULATIVE = Graph(values=[_value([4], "s32", input=0), _value([4], "s32", node=0), _value([4], "s32", node=1)],
                   nodes=[Node("cummin", [0], {"axis": 0, "reverse": True}),
                          Node("cummax", [0], {"axis": 0, "reverse": True})],
                   outputs=[1, 2], sharding=_plan([["x"]], [[None], [None]]))
CUMULATIVE_INPUTS = [np.array([12, 63, -6, 42], np.int32)]


def _recorded(probe, tmp: Path, name: str, graph: Graph, inputs: list[np.ndarray],
              plugins: list[str] = ()) -> list[Finding]:
    """The findings a campaign records for this program: assessed, then recorded."""
    module = probe.call(Lower(graph), TIMEOUT).module
    program = Program(name, module, inputs, [v.dtype for v in graph.inputs], graph=graph)
    return _recorded_program(tmp, program, plugins)


def _recorded_program(tmp: Path, program: Program, plugins: list[str] = ()) -> list[Finding]:
    name = program.id
    targets = [resolve(t) for t in SPEC.targets]
    slot = Slot(name, targets, list(plugins), None)
    try:
        wait_ready(slot.workers())
        result = Assessor(targets, SPEC.references, SPEC.timeouts.programSeconds, {}).assess(slot, program)
    finally:
        slot.close()
    recorder = Recorder(tmp, "known-spmd-bugs", SPEC, list(plugins), (0, 1), Counters(),
                        threading.Lock(), None)
    recorder.open()
    for v in result.verdicts:
        recorder.finding(program, v.target, v.verdict, v.evidence, result.expected, v.actual, v.output)
    assert recorder.store is not None
    return recorder.store.findings()


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("known")


def test_the_shift_bug_is_marked_known(probe, out) -> None:
    (finding,) = _recorded(probe, out / "shift", "shift", SHIFT, SHIFT_INPUTS)

    assert finding.verdict == "mismatch"
    assert finding.known_bug == "xla-spmd-scatter-after-shift"


def test_the_dynamic_update_slice_bug_is_marked_as_itself(probe, out) -> None:
    (finding,) = _recorded(probe, out / "dus", "dus", DUS, DUS_INPUTS)

    assert finding.verdict == "mismatch"
    assert finding.known_bug == "xla-spmd-dynamic-update-slice-clamp"


def test_the_shift_then_reshape_bug_is_marked_known_and_the_shift_alone_is_right(probe, out) -> None:
    (finding,) = _recorded(probe, out / "shift-reshape", "shift-reshape", _shift_then(True), SHIFT_INPUTS_7)
    assert finding.verdict == "mismatch"
    assert finding.known_bug == "xla-shift-set-then-reshape"
    assert _recorded(probe, out / "shift-alone", "shift-alone", _shift_then(False), SHIFT_INPUTS_7) == []


def test_the_cumulative_init_bug_is_marked_known(probe, out) -> None:
    (finding,) = _recorded(probe, out / "cumulative", "cumulative", CUMULATIVE, CUMULATIVE_INPUTS)
    assert finding.verdict == "mismatch" and finding.evidence["output"] == 1
    assert finding.known_bug == "xla-spmd-cumulative-int-init"


def test_the_convert_and_compiler_crash_is_marked_known(probe, out) -> None:
    """s26-i2316: and(convert(s32 -> s8), s8) kills the compiling worker (SIGSEGV)."""
    graph = Graph(values=[_value([4], "s32", input=0), _value([4], "s8", input=1),
                          _value([4], "s8", node=0), _value([4], "s8", node=1)],
                  nodes=[Node("convert", [0], {"dtype": "s8"}), Node("and", [2, 1])],
                  outputs=[3])
    inputs = [np.array([-2, -1, 0, 1], np.int32), np.full(4, 0x5A, np.int8)]
    (finding,) = _recorded(probe, out / "convert-and", "convert-and", graph, inputs)
    assert finding.verdict == "crash" and "SIGSEGV" in finding.error
    assert finding.known_bug == "xla-cpu-convert-narrow-int-bitwise-segfault"


def test_a_finding_of_another_sharded_program_is_not_known(probe, out) -> None:
    """A real mismatch of a sharded program (an all-reduce done twice, injected) is new."""
    (finding,) = _recorded(probe, out / "psum", "psum", PSUM, PSUM_INPUTS,
                           [f"{fault_path('allreduce_twice')}:transform"])

    assert finding.verdict == "mismatch"
    assert finding.known_bug is None


DATA = Path(__file__).parent / "data"
# The clean runs' finding folders, as the campaign wrote them (tests/bisect bisects them).
BISECT_DATA = Path(__file__).parents[1] / "bisect" / "data"


def test_a_max_all_reduce_dropping_nan_is_known_in_an_output_judged_bitwise(out) -> None:
    """s34-i1659 of the seed-34 clean run (docs/detection.md): pmax of where(partition == 1,
    x, -inf) over 4 devices gives -inf where x holds NaN. The output is exact (a scatter and
    a pmax), so it is judged bitwise against op by op: that was a `mismatch` with no wrong
    element counted and no known bug (the entry asks for nan_mismatch); NaN against a
    number is a nan_mismatch whichever way the output is judged."""
    (finding,) = _recorded_program(out / "s34-i1659", Program.load(BISECT_DATA / "s34" / "s34-i1659" / "program"))
    assert finding.verdict == "nan_mismatch" and finding.evidence["reason"] == "bitwise"
    assert finding.evidence["wrong_elements"] >= 1
    assert np.isnan(finding.evidence["expected"]) and finding.evidence["actual"] == -np.inf
    assert finding.known_bug == "xla-cpu-all-reduce-max-drops-nan"


def test_a_sharded_dynamic_slice_reading_an_infinity_is_known(out) -> None:
    """s34-i2091: the f16 dynamic_slice whose result is sharded where its start must be
    clamped reads a window holding inf where float64 reads 0.5: a nan_mismatch of the
    known bug, whose entry asked for a mismatch only."""
    (finding,) = _recorded_program(out / "s34-i2091", Program.load(DATA / "s34-i2091"))
    assert finding.verdict == "nan_mismatch"
    assert finding.known_bug == "xla-spmd-dynamic-slice-clamp"


def _finding(**evidence: Any) -> Finding:
    return Finding(id="f", campaign="c", program="p", target="default", verdict="mismatch",
                   dtype="s32", evidence=evidence, dir="findings/f", time="t")


def test_a_program_rule_looks_only_at_what_computes_the_wrong_output() -> None:
    """Output 0 of SHIFT plus an output 1 that only negates the input: a mismatch of
    output 1 does not go through loop_shift, so it is not the shift bug; without a graph
    no program rule matches."""
    graph = Graph(values=[*SHIFT.values, _value([8], "s32", node=1)], nodes=[*SHIFT.nodes, Node("neg", [0])],
                  outputs=[1, 2], sharding=SHIFT.sharding)

    assert known_bugs.match(_finding(output=0), graph=graph) == "xla-spmd-scatter-after-shift"
    assert known_bugs.match(_finding(output=1), graph=graph) is None
    assert known_bugs.match(_finding(output=0)) is None
    unsharded = dataclasses.replace(graph, sharding=None)
    assert known_bugs.match(_finding(output=0), graph=unsharded) is None


def test_a_slice_of_a_slice_is_told_from_one_slice() -> None:
    """`nested`: the dynamic_slice_of_dynamic_slice entry needs one slice applied to
    another's result; a single sharded slice is the clamp bug's."""
    def slices(n: int) -> Graph:
        values = [_value([13], "bool", input=0), _value([], "s32", input=1)]
        nodes: list[Node] = []
        for size in (9, 5)[:n]:
            nodes.append(Node("dynamic_slice_idx", [len(values) - 1 if nodes else 0, 1],
                              {"sizes": [size], "index_dtype": "s32"}))
            values.append(_value([size], "bool", node=len(nodes) - 1))
        return Graph(values=values, nodes=nodes, outputs=[len(values) - 1],
                     sharding=_plan([["x"], []], [[None]]))

    assert known_bugs.match(_finding(output=0), graph=slices(2)) == "xla-dynamic-slice-of-dynamic-slice"
    assert known_bugs.match(_finding(output=0), graph=slices(1)) == "xla-spmd-dynamic-slice-clamp"


def test_a_slice_of_a_broadcast_of_a_slice_is_the_nested_slice_bug() -> None:
    """s39-i717 (unsharded): dynamic_slice(broadcast_in_dim(dynamic_slice(x))) loses the
    inner clamp as two slices do (`between`); a slice of a broadcast of another op is not it."""
    def program(inner: str) -> Graph:
        values = [_value([34], "u8", input=0), _value([], "s32", input=1), _value([30], "u8", node=0),
                  _value([30, 5], "u8", node=1), _value([4, 5], "u8", node=2)]
        first = Node("dynamic_slice", [0, 1], {"sizes": [30]}) if inner == "slice" else Node("neg", [0])
        if inner != "slice":
            values[2] = _value([34], "u8", node=0)
            values[3] = _value([34, 5], "u8", node=1)
        return Graph(values=values, nodes=[first, Node("broadcast_in_dim", [2], {"shape": list(values[3].shape),
                                                                                "dims": [0]}),
                                           Node("dynamic_slice", [3, 1, 1], {"sizes": [4, 5]})],
                     outputs=[4])

    assert known_bugs.match(_finding(output=0), graph=program("slice")) == "xla-dynamic-slice-of-dynamic-slice"
    assert known_bugs.match(_finding(output=0), graph=program("neg")) is None


def test_a_crash_is_matched_by_its_error_text() -> None:
    """The partitioner's pad abort and gather abort have the same verdict; the stack in the
    error text tells them apart."""
    graph = Graph(values=[_value([48], "bool", input=0), _value([95], "bool", node=0)],
                  nodes=[Node("pad", [0], {"config": [[-1, 0, 1]], "value": 0})],
                  outputs=[1], sharding=_plan([["x"]], [["x"]]))
    crash = {"id": "f", "campaign": "c", "program": "p", "target": "O0", "verdict": "crash",
             "dir": "findings/f", "time": "t"}
    pad = Finding(**crash, evidence={"error": "worker exited with code -6 (SIGABRT)\n"
                                              "pmdPartitioningVisitor::HandlePad()\n    @ 0x7f40"})
    other = Finding(**crash, evidence={"error": "worker exited with code -6 (SIGABRT)\n"
                                                "xla::cpu::IrEmitter::HandleSort()"})

    assert known_bugs.match(pad, graph=graph) == "xla-spmd-pad-negative-low-interior"
    assert known_bugs.match(other, graph=graph) is None


@pytest.mark.parametrize("program", ["{sharded: true, ops: [pad]}", "{nested: [pad]}"])
def test_a_bad_program_rule_is_refused_naming_the_file(tmp_path: Path, program: str) -> None:
    f = tmp_path / "bugs.yaml"
    f.write_text(f"bugs:\n- id: xla-3\n  match: {{verdict: crash}}\n  program: {program}\n")
    with pytest.raises(ValueError, match=re.escape(f"{f}: bug 'xla-3'")):
        known_bugs.match(_finding(), f)


def test_the_interior_pad_bug_failing_the_verifier_at_a_binary_op_is_known(probe, out) -> None:
    """s39-i186 of the seed-39 clean run (docs/detection.md): a pad with interior padding
    and a negative high edge, compared with an input sharded along the padded dimension:
    the partitioner gives the pad's tile a row short, which XLA's verifier refuses at the
    compare (`Binary op with incompatible shapes`), where the entry's first case refused a
    shape at the instruction itself (`Expected instruction to have shape equal to`)."""
    graph = Graph(values=[_value([5, 3], "u8", input=0), _value([8, 3], "u8", input=1),
                          _value([8, 3], "u8", node=0), _value([8, 3], "bool", node=1)],
                  nodes=[Node("pad", [0], {"config": [[0, -1, 1], [0, 0, 0]], "value": 1.0}),
                         Node("compare_eq", [2, 1])],
                  outputs=[3], sharding=_plan([[None, None], ["x", None]], [["x", None]]))
    inputs = [np.arange(15, dtype=np.uint8).reshape(5, 3), np.ones((8, 3), np.uint8)]
    (finding,) = _recorded(probe, out / "pad-verifier", "pad-verifier", graph, inputs)
    assert finding.verdict == "compile_error"
    assert "Binary op with incompatible shapes" in finding.error, finding.error
    assert finding.known_bug == "xla-spmd-pad-interior-verifier"


def test_a_dropped_nan_seen_through_is_finite_is_known(probe, out) -> None:
    """s39-i1625: is_finite(reduce_min(x, 0)) of x sharded along dimension 0 is True where
    a column holds NaN (the NaN-dropping min across devices): a bool mismatch, not a
    nan_mismatch, of the known bug."""
    graph = Graph(values=[_value([8, 3], "f16", input=0), _value([3], "f16", node=0), _value([3], "bool", node=1)],
                  nodes=[Node("reduce_min", [0], {"axes": [0]}), Node("is_finite", [1])],
                  outputs=[2], sharding=dataclasses.replace(_plan([["x", None]], [[None]]), partitioner="gspmd"))
    x = np.ones((8, 3), np.float16)
    x[5, 1] = np.nan
    (finding,) = _recorded(probe, out / "min-is-finite", "min-is-finite", graph, [x])
    assert finding.verdict == "mismatch" and finding.evidence["where"] == [1], finding.evidence
    assert finding.known_bug == "xla-cpu-all-reduce-min-drops-nan-predicate"
