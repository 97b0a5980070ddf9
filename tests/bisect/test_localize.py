"""Each injected fault is localized to the op it corrupts, the fusion it lives in and the
pass that cures it, and reduced to a handful of ops; different faults sign differently."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from findings import (
    bf16_exp_inputs,
    bf16_exp_program,
    exp_inputs,
    exp_program,
    make_finding,
    select_inputs,
    select_program,
    shift_inputs,
    shift_program,
)
from shared import once
from xla_sentinel.bisect import bisect_finding
from xla_sentinel.bisect.refine import refined_signature
from xla_sentinel.faults import fault_path

# name -> (fault, program, inputs, the op the fault corrupts)
CASES = {
    "select_ge_to_gt": ("select_ge_to_gt", select_program, select_inputs,
                        "compare GE (s32,s32->bool)"),
    "shift_right_logical": ("shift_right_logical", shift_program, shift_inputs,
                            "shift_right_arithmetic (s32,s32->s32)"),
    "fusion_bf16_rounding": ("fusion_bf16_rounding", exp_program, exp_inputs,
                             "exponential (f32->f32)"),
    # The same fault reached from another program, with bf16 inputs and outputs.
    "fusion_bf16_rounding_bf16_io": ("fusion_bf16_rounding", bf16_exp_program, bf16_exp_inputs,
                                     "exponential (f32->f32)"),
}


def _bisect_all(root: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    out = {}
    for name, (fault, program, inputs, _) in CASES.items():
        folder = make_finding(root / name, program, inputs(), [fault_path(fault)])
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
    assert result["culprit_op"] == CASES[fault][3]


@pytest.mark.parametrize("fault", sorted(CASES))
def test_culprit_sits_in_a_loop_fusion(bisected: dict, fault: str) -> None:
    _, result = bisected[fault]
    hits = result["stages"]["fusion"]["reduced"]["hits"]
    assert result["fusion_kind"] == "kLoop"
    assert hits and hits[0]["fusion"] is not None


def test_fusion_neighbours_are_recorded(bisected: dict) -> None:
    # select_ge_to_gt fires only when the compare feeds a select: they share the fusion.
    _, result = bisected["select_ge_to_gt"]
    assert "select" in result["stages"]["fusion"]["reduced"]["hits"][0]["fusion_ops"]


@pytest.mark.parametrize("fault", sorted(CASES))
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
    assert result["culprit_pass"] == "apply-xla-transforms"
    assert result["stages"]["passes"]["curing_passes"] == ["apply-xla-transforms"]


def test_curing_flag_found_where_one_exists(bisected: dict) -> None:
    _, result = bisected["fusion_bf16_rounding"]
    assert "xla_cpu_use_fusion_emitters=False" in result["stages"]["passes"]["curing_flags"]
    _, shift = bisected["shift_right_logical"]
    assert shift["stages"]["passes"]["curing_flags"] == []


@pytest.mark.parametrize("fault", sorted(CASES))
def test_reduced_to_a_handful_of_ops(bisected: dict, fault: str) -> None:
    _, result = bisected[fault]
    reduce = result["stages"]["reduce"]
    assert reduce["ops_after"] <= 3 < reduce["ops_before"]
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
    return refined_signature(json.loads((folder / "finding.json").read_text()))


def test_different_faults_get_different_signatures(bisected: dict) -> None:
    faults = ("select_ge_to_gt", "shift_right_logical", "fusion_bf16_rounding")
    assert len({_signature(bisected, name) for name in faults}) == len(faults)


def test_same_fault_from_different_programs_shares_a_signature(bisected: dict) -> None:
    assert _signature(bisected, "fusion_bf16_rounding") == \
        _signature(bisected, "fusion_bf16_rounding_bf16_io")
