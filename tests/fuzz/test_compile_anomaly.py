"""`compile_anomaly` (docs/detection.md, "Compile anomalies"): what XLA logs during a target's
compile is read by the target's worker, matched against core/anomalies.py's table and judged
a finding, while the worker's own log keeps every line XLA wrote."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from xla_sentinel.campaign.check import check_program
from xla_sentinel.core.anomalies import anomaly_evidence, find_anomalies
from xla_sentinel.core.program import Program
from xla_sentinel.ops import exact
from xla_sentinel.programs import evaluate
from xla_sentinel.triage.signature import signature_id
from xla_sentinel.worker.client import Worker
from xla_sentinel.worker.protocol import Ran, Run
from xla_sentinel.xla import compiler
from xla_sentinel.xla.faults import fault_path

from .test_check import CONVERT  # rev(convert_bf16(x)): an output IEEE 754 fixes bitwise

FAULT = "circular_simplification_log"
CIRCULAR = ("W0000 00:00:1754000000.1   7 algebraic_simplifier.cc:8521] Algebraic simplifier is likely "
            "stuck in a circular simplification loop and ran for 50 runs on computation region_3")
FIXED_POINT = ("E0000 hlo_pass_fix.h:118] Unexpectedly high number of iterations in HLO passes "
               "'simplification' exiting fixed point loop.")
# A time alarm: it fires on a loaded machine too, so it is no anomaly (core/anomalies.py).
SLOW = ("E0000 slow_operation_alarm.cc:73] [Compiling module jit_f] Very slow compile? If you want "
        "to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.")

# Above the midpoint between two bf16 values: truncation is one bf16 ulp off.
X = np.array([1 + 3 * 2**-9, -3 - 5 * 2**-8, 0.1, 7.0, -0.3, 1e5], np.float32)


def test_only_the_tables_lines_are_anomalies_each_under_its_pattern() -> None:
    log = "\n".join(["W0000 xla_bridge.py] An NVIDIA GPU may be present on this machine", CIRCULAR,
                     "********************************", SLOW, "The operation took 2m3.5s",
                     FIXED_POINT])

    found = find_anomalies(log)

    assert [a["anomaly"] for a in found] == ["circular_simplification", "pass_fixed_point"]
    assert found[0]["line"] == CIRCULAR


def test_two_anomalies_are_two_signatures_and_one_anomaly_one() -> None:
    def sig(line: str, program: str) -> str:
        ev = anomaly_evidence(find_anomalies(line))
        return signature_id({"verdict": "compile_anomaly", "target": "default", "program": program,
                             "error": ev["error"]})

    assert sig(CIRCULAR, "s1-i1") != sig(FIXED_POINT, "s1-i1")
    # Another computation, another timestamp: the same anomaly.
    assert sig(CIRCULAR, "s1-i1") == sig(CIRCULAR.replace("region_3", "main.12").replace("1754", "1812"), "s2-i9")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("campaign") / "campaign.yaml"
    path.write_text(yaml.safe_dump({"targets": ["default"], "references": ["f64_eager", "eager"]}))
    return path


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("program")
    Program("hand-bf16", evaluate.lower_text(CONVERT), [X], ["f32"], graph=exact.annotate(CONVERT)).save(folder)
    return folder


def test_a_compile_that_logs_an_anomaly_is_a_compile_anomaly(program: Path, campaign: Path) -> None:
    (result,) = check_program(program, campaign, [fault_path(FAULT)])

    assert result["verdict"] == "compile_anomaly", result
    assert result["evidence"]["anomaly"] == "circular_simplification"
    assert "circular simplification loop" in result["evidence"]["log"][0]
    assert result["evidence"]["error"].startswith("Algebraic simplifier is likely stuck")


def test_the_same_program_passes_without_the_anomaly(program: Path, campaign: Path) -> None:
    (result,) = check_program(program, campaign)

    assert result["verdict"] == "pass", result


def test_another_verdict_wins_and_carries_the_anomaly(program: Path, campaign: Path) -> None:
    (result,) = check_program(program, campaign, [fault_path(FAULT), fault_path("bf16_convert_truncates")])

    assert result["verdict"] == "mismatch", result
    assert result["evidence"]["anomaly"] == "circular_simplification"
    assert "circular simplification loop" in result["evidence"]["anomaly_log"][0]


def test_the_workers_log_keeps_what_its_compile_logged(tmp_path: Path) -> None:
    log = tmp_path / "target.log"
    worker = Worker("anomaly", (f"{fault_path(FAULT)}:transform",), log)
    try:
        reply = worker.call(Run(evaluate.lower_text(CONVERT), [X], {}), 300)
    finally:
        worker.close()

    assert isinstance(reply, Ran)
    assert [a["anomaly"] for a in reply.anomalies] == ["circular_simplification"]
    assert reply.anomalies[0]["line"] in log.read_text()


def test_a_pipe_on_fd2_gets_what_the_compile_wrote_after_it() -> None:
    # Not a file (a terminal, a pipe: `check` without logs): fd 2 is moved to a temporary
    # file for the compile and what it caught is written on afterwards.
    read_end, write_end = os.pipe()
    saved = os.dup(2)
    os.dup2(write_end, 2)
    try:
        with compiler.compile_log() as log:
            os.write(2, (CIRCULAR + "\n").encode())
            assert os.fstat(2).st_ino != os.fstat(write_end).st_ino  # moved for the block
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        passed_on = pipe.read().decode()

    assert passed_on == CIRCULAR + "\n"
    assert log.text == CIRCULAR + "\n"
