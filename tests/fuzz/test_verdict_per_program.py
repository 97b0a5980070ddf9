"""The same programs get the same verdict per program when the overhead around the targets
is cut (issue 39): examples/smoke.yaml's settings on a sample of seed 5, and the same with
every shape family drawn, against the verdicts recorded before the cut (bench/throughput.py
--account, 2026-12-06, one worker slot). Run here with two slots: which slot judges a
program, and what its workers judged before, must not change its verdict either."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import SHAPE_FAMILIES, parse_spec

SMOKE = Path(__file__).resolve().parents[2] / "examples" / "smoke.yaml"

# Programs with findings, (target, verdict) sorted; every other program of the sample was
# judged with none. s5-i16: an f32 bug every target shares, f64_jit included (numpy's
# float64 truth caught it); s5-i6 (every family): a NaN pattern no target gets right.
SMOKE_FINDINGS = {"s5-i16": [["O0", "mismatch"], ["default", "mismatch"], ["f64_jit", "mismatch"],
                             ["no_fusion_emitters", "mismatch"]]}
FAMILIES_FINDINGS = {"s5-i6": [["O0", "nan_mismatch"], ["default", "nan_mismatch"],
                               ["no_fusion_emitters", "nan_mismatch"]]}


def _verdicts(out: Path) -> dict[str, list[Any]]:
    con = sqlite3.connect(out / "campaign.sqlite")
    try:
        found: dict[str, list[list[str]]] = {}
        for pid, target, verdict in con.execute("select program, target, verdict from findings"):
            found.setdefault(pid, []).append([target, verdict])
        return {pid: [status, sorted(found.get(pid, []))]
                for pid, status in con.execute("select id, status from programs")}
    finally:
        con.close()


@pytest.mark.parametrize(("families", "programs", "findings"), [
    (False, 18, SMOKE_FINDINGS), (True, 8, FAMILIES_FINDINGS)], ids=["smoke", "every_family"])
def test_same_verdict_per_program(tmp_path: Path, families: bool, programs: int,
                                  findings: dict[str, list[list[str]]]) -> None:
    data = yaml.safe_load(SMOKE.read_text())
    data.update(seed=5, budget={"programs": programs}, workers=2, bisect={"enabled": False})
    if families:
        data["generator"] = {**data["generator"], "shapes": list(SHAPE_FAMILIES)}
    run_campaign(parse_spec(data), tmp_path)
    expected = {f"s5-i{i}": ["judged", findings.get(f"s5-i{i}", [])] for i in range(programs)}
    assert _verdicts(tmp_path) == expected
