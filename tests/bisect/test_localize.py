"""Each injected fault is localized to the op it corrupts, the fusion it lives in and the
pass that cures it, and reduced to a handful of ops; different faults sign differently."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from findings import (
    bf16_exp_inputs,
    bf16_exp_program,
    concat2_program,
    concat3_program,
    concat_inputs,
    exp_inputs,
    exp_program,
    make_finding,
    nan_inputs,
    nan_program,
    select_inputs,
    select_program,
    shift_inputs,
    shift_program,
)
from shared import once
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.core.model import Finding
from xla_sentinel.triage.signature import signature_of
from xla_sentinel.xla.faults import fault_path


@dataclass(frozen=True)
class Case:
    fault: str
    program: Callable[..., Any]
    inputs: Callable[[], list[np.ndarray]]
    op: str  # the op the fault corrupts, in canonical form
    fusion: str  # where XLA puts that op once it stands alone
    elementwise: bool = True  # whether the reduced case shrinks to one element


CASES = {
    "select_ge_to_gt": Case("select_ge_to_gt", select_program, select_inputs,
                            "compare GE (s32->bool)", "kLoop"),
    "shift_right_logical": Case("shift_right_logical", shift_program, shift_inputs,
                                "shift_right_arithmetic (s32->s32)", "kLoop"),
    "fusion_bf16_rounding": Case("fusion_bf16_rounding", exp_program, exp_inputs,
                                 "exponential (f32->f32)", "kLoop"),
    "nan_dropping_max": Case("nan_dropping_max", nan_program, nan_inputs, "maximum (f32->f32)",
                             "kLoop"),
    # XLA leaves a lone concatenate unfused.
    "concat_off_by_one": Case("concat_off_by_one", concat3_program, concat_inputs,
                              "concatenate (f32->f32)", "unfused", elementwise=False),
    # The same faults reached from other programs: bf16 inputs and outputs; a
    # concatenate of two arrays instead of three.
    "fusion_bf16_rounding_bf16_io": Case("fusion_bf16_rounding", bf16_exp_program,
                                         bf16_exp_inputs, "exponential (f32->f32)", "kLoop"),
    "concat_off_by_one_two": Case("concat_off_by_one", concat2_program, concat_inputs,
                                  "concatenate (f32->f32)", "unfused", elementwise=False),
}
FUSED = sorted(n for n, c in CASES.items() if c.fusion != "unfused")


def _bisect_all(root: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    out = {}
    for name, case in CASES.items():
        folder = make_finding(root / name, case.program, case.inputs(), [fault_path(case.fault)])
        out[name] = (str(folder), bisect_finding(folder, timeout=60))
    return out


@pytest.fixture(scope="module")
def bisected(tmp_path_factory: pytest.TempPathFactory, worker_id: str
             ) -> dict[str, tuple[Path, dict[str, Any]]]:
    done = once(tmp_path_factory, worker_id, "localize", _bisect_all)
    return {name: (Path(folder), result) for name, (folder, result) in done.items()}


@pytest.mark.parametrize("fault", sorted(CASES))
def test_culprit_is_the_op_the_fault_corrupts(bisected: dict, fault: str) -> None:
    _, result = bisected[fault]
    assert result["status"] == "localized"
    assert result["culprit_op"] == CASES[fault].op


@pytest.mark.parametrize("fault", sorted(CASES))
def test_fusion_kind_of_the_culprit(bisected: dict, fault: str) -> None:
    _, result = bisected[fault]
    hits = result["stages"]["fusion"]["reduced"]["hits"]
    assert result["fusion_kind"] == CASES[fault].fusion
    assert hits and (hits[0]["fusion"] is None) == (CASES[fault].fusion == "unfused")


def test_fusion_neighbours_are_recorded(bisected: dict) -> None:
    # select_ge_to_gt fires only when the compare feeds a select: they share the fusion.
    _, result = bisected["select_ge_to_gt"]
    assert "select" in result["stages"]["fusion"]["reduced"]["hits"][0]["fusion_ops"]


@pytest.mark.parametrize("fault", FUSED)
def test_extracted_fusion_fails_alone(bisected: dict, fault: str) -> None:
    _, result = bisected[fault]
    extracted = result["stages"]["fusion"]["extracted"]
    assert extracted["fails_alone"] is True
    # Injected faults rewrite the HLO itself, so a legal compile of it is wrong too.
    assert extracted["hlo_itself_wrong"] is True


@pytest.mark.parametrize("fault", sorted(CASES))
def test_curing_pass_is_where_plugins_run(bisected: dict, fault: str) -> None:
    # Registered HLO transformations run inside XLA's apply-xla-transforms pass.
    _, result = bisected[fault]
    assert result["stages"]["passes"]["curing_passes"] == ["apply-xla-transforms"]
    passes = result["stages"]["passes"]
    # A preset flag that cures names the cure before any pass does (issue 14).
    assert result["culprit_pass"] == (passes["curing_flags"] or ["apply-xla-transforms"])[0]


def test_a_curing_preset_flag_is_named_before_the_pass(bisected: dict) -> None:
    # fusion_bf16_rounding edits what the fusion emitters make: turning them off cures it,
    # and that flag, which a user can set, names the cure.
    _, result = bisected["fusion_bf16_rounding"]
    assert result["stages"]["passes"]["curing_flags"][0] == "xla_cpu_use_fusion_emitters=False"
    assert result["culprit_pass"] == "xla_cpu_use_fusion_emitters=False"
    _, shift = bisected["shift_right_logical"]
    assert shift["stages"]["passes"]["curing_flags"] == []
    assert shift["culprit_pass"] == "apply-xla-transforms"


@pytest.mark.parametrize("fault", sorted(CASES))
def test_reduced_to_a_handful_of_ops(bisected: dict, fault: str) -> None:
    _, result = bisected[fault]
    reduce = result["stages"]["reduce"]
    assert reduce["ops_after"] <= 3 < reduce["ops_before"]
    if CASES[fault].elementwise:
        assert result["stages"]["shrink"]["shape_after"] == [1, 1]


def test_graph_search_uses_log_many_compiles(bisected: dict) -> None:
    for _, result in bisected.values():
        graph = result["stages"]["graph"]
        assert len(graph["probes"]) <= max(1, (graph["ops"] - 1).bit_length())


def test_finding_json_records_the_culprit(bisected: dict) -> None:
    folder, result = bisected["shift_right_logical"]
    record = json.loads((folder / "finding.json").read_text())
    assert (record["culprit_op"], record["fusion_kind"], record["culprit_pass"]) == \
        (result["culprit_op"], result["fusion_kind"], result["culprit_pass"])
    assert record["evidence"]["bisect"]["status"] == "localized"
    assert record["repro"] == "repro"


def _signature(bisected: dict, name: str) -> str:
    folder, _ = bisected[name]
    return signature_of(Finding.from_json(json.loads((folder / "finding.json").read_text())))


def test_different_faults_get_different_signatures(bisected: dict) -> None:
    faults = ("select_ge_to_gt", "shift_right_logical", "fusion_bf16_rounding", "concat_off_by_one",
              "nan_dropping_max")
    assert len({_signature(bisected, name) for name in faults}) == len(faults)


@pytest.mark.parametrize("pair", [("fusion_bf16_rounding", "fusion_bf16_rounding_bf16_io"),
                                  ("concat_off_by_one", "concat_off_by_one_two")])
def test_same_fault_from_different_programs_shares_a_signature(bisected: dict,
                                                                pair: tuple[str, str]) -> None:
    assert _signature(bisected, pair[0]) == _signature(bisected, pair[1])


def test_lost_nan_is_judged_by_class_not_by_size(bisected: dict) -> None:
    _, result = bisected["nan_dropping_max"]
    assert result["stages"]["reproduce"]["verdict"] == "nan_mismatch"
