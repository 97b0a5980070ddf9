"""`check` on a hand-built program: the whole judging path through worker processes.

The oracle's unit tests call `oracle.judge` with noise samples in hand; this goes through
the workers, so it also proves the noise model's samples reach the oracle. Without them an
integer output computed from floats cannot be judged (every difference there might be a
legal flip), and a miscompile of it went unreported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from xla_sentinel.campaign.check import check_program
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.core.program import Program
from xla_sentinel.ops import exact
from xla_sentinel.programs import evaluate
from xla_sentinel.xla.faults import fault_path

# y = shift_right_arithmetic(convert_s32(x), k): an integer output that depends on floats.
GRAPH = Graph(
    values=[Value([8], "f32", False, input=0),
            Value([8], "s32", True, node=0),
            Value([8], "s32", False, input=1),
            Value([8], "s32", True, node=1)],
    nodes=[Node("convert", [0], {"dtype": "s32"}, True),
           Node("shift_right_arithmetic", [1, 2], {})],
    outputs=[3])


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("program")
    # Far from integers, so no legal rounding moves a conversion; negative, so a logical
    # shift differs from an arithmetic one.
    x = np.array([-7.3, -100.6, 5.4, -2.2, 64.5, -1e4 - 0.3, 3.7, -9.9], np.float32)
    k = np.array([1, 2, 3, 1, 2, 3, 1, 2], np.int32)
    Program("hand-s32", evaluate.lower_text(GRAPH), [x, k], ["f32", "s32"],
            graph=GRAPH).save(folder)
    return folder


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("campaign") / "campaign.yaml"
    path.write_text(yaml.safe_dump({"targets": ["default"], "references": ["f64_eager", "eager"]}))
    return path


def test_a_float_dependent_integer_miscompile_is_flagged(program: Path, campaign: Path) -> None:
    (verdict,) = check_program(program, campaign, [str(fault_path("shift_right_logical"))])

    assert verdict["verdict"] == "mismatch", verdict
    assert verdict["evidence"]["reason"] == "integer" and verdict["evidence"]["tainted"]


def test_the_same_program_passes_without_the_fault(program: Path, campaign: Path) -> None:
    (verdict,) = check_program(program, campaign)

    assert verdict["verdict"] == "pass", verdict


def test_the_interpreter_reads_unsigned_inputs() -> None:
    # ui8/ui32 parameters must be passed as unsigned attributes: signless ones were refused
    # as a type mismatch, and every program with an unsigned input lost this reference.
    from xla_sentinel.worker import handlers

    graph = Graph(values=[Value([4], "u8", False, input=0),
                          Value([4], "u32", False, input=1),
                          Value([4], "u32", False, node=0),
                          Value([4], "u32", False, node=1)],
                  nodes=[Node("convert", [0], {"dtype": "u32"}, True),
                         Node("add", [2, 1], {})],
                  outputs=[3])
    inputs = [np.array([0, 1, 200, 255], np.uint8), np.array([7, 2**31, 2**32 - 1, 3], np.uint32)]

    reply = handlers.interpret(evaluate.lower_text(graph), inputs)

    np.testing.assert_array_equal(reply.outputs[0], evaluate.eager(graph, inputs)[0])


# rev(convert_bf16(x)): an output IEEE 754 fixes bitwise (exact.py).
CONVERT = Graph(
    values=[Value([6], "f32", False, input=0),
            Value([6], "bf16", True, node=0),
            Value([6], "bf16", True, node=1)],
    nodes=[Node("convert", [0], {"dtype": "bf16"}, True),
           Node("rev", [1], {"dims": [0]})],
    outputs=[2])


@pytest.mark.parametrize("fault,verdict", [("bf16_convert_truncates", "mismatch"), (None, "pass")])
def test_a_one_ulp_conversion_error_is_flagged_bitwise(tmp_path: Path, campaign: Path,
                                                       fault: str | None, verdict: str) -> None:
    # Above the midpoint between two bf16 values: rounding to nearest goes up, truncation
    # down, one bf16 ulp (2u), a quarter of what the normwise tolerance allows.
    x = np.array([1 + 3 * 2**-9, -3 - 5 * 2**-8, 0.1, 7.0, -0.3, 1e5], np.float32)
    graph = exact.annotate(CONVERT)
    Program("hand-bf16", evaluate.lower_text(CONVERT), [x], ["f32"], graph=graph).save(tmp_path)

    (result,) = check_program(tmp_path, campaign, [str(fault_path(fault))] if fault else [])

    assert result["verdict"] == verdict, result
    if fault:
        assert result["evidence"]["reason"] == "bitwise" and result["evidence"]["max_ulp"] == 1
