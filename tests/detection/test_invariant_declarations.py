"""A trace's meta.json `invariants` (docs/detection.md, "Invariants") is checked where the
trace is read: a malformed declaration, or one that fits none of the module's outputs, is
an error naming the file, the entry and what is wrong. `xla-sentinel replay` on such a
trace exits 2; a campaign over several traces refuses that one (counted in summary.json
as any unreadable trace is) and runs the others. Nothing is mocked: jax lowers the
modules, the real workers load and judge them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.judge import invariants
from xla_sentinel.judge.invariants import InvariantError
from xla_sentinel.spec.campaign import parse_spec

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / ".venv/bin/xla-sentinel")
EXIT_BAD_INPUT = 2
X = np.random.default_rng(5).normal(size=(4, 8)).astype(np.float32)


def _module() -> str:
    return jax.jit(lambda x: (jax.nn.softmax(x, axis=-1), jax.numpy.argmax(x, axis=-1))).lower(X).as_text()


def _trace(folder: Path, declared: Any) -> Path:
    folder.mkdir(parents=True)
    (folder / "module.mlir").write_text(_module())
    np.savez(folder / "inputs.npz", arg0=X)
    (folder / "meta.json").write_text(json.dumps({"invariants": declared}))
    return folder


@pytest.mark.parametrize(("declared", "needle"), [
    ({"kind": "sum"}, r"invariants: must be a list, got dict"),
    ([{"kind": "finite", "output": 0}, {"kind": "sum", "output": 0}],
     r'invariants\[1\] \{"kind": "sum", "output": 0\}: invariant sum: needs an axis'),
    ([{"kind": "sums", "output": 0}], r"invariants\[0\] .*kind 'sums': must be one of"),
    ([{"kind": "finite", "output": 0, "rows": 2}], r"invariants\[0\] .*unknown field\(s\) rows"),
    ([{"kind": "finite", "output": 2}], r"invariants\[0\] .*output 2: the module returns 2 output"),
    ([{"kind": "finite", "output": 1}], r"invariants\[0\] .*output 1 is s32: invariants judge float"),
    ([{"kind": "sum", "output": 0, "axis": 2}], r"invariants\[0\] .*axis 2: out of range for a rank-2"),
    ([{"kind": "sum", "output": 0, "axis": "last"}], r"invariants\[0\] .*axis must be an integer"),
    ([{"kind": "range", "output": 0, "low": "0"}], r"invariants\[0\] .*low must be a number"),
    ([{"kind": "sign", "output": 0, "sign": 2}], r"invariants\[0\] .*sign must be 1 or -1"),
    ([{"kind": "logsumexp", "output": 0, "axis": 1, "other": 1}],
     r"invariants\[0\] .*other 1: the module takes 1 argument"),
    ([7], r"invariants\[0\] 7: an invariant must be an object, got int"),
    ([{"kind": "finite"}], r"invariants\[0\] .*invariant: needs output"),
])
def test_each_malformed_declaration_names_its_entry_and_what_is_wrong(declared: Any, needle: str) -> None:
    with pytest.raises(InvariantError, match=needle):
        invariants.for_module({"invariants": declared}, _module())


def test_a_declaration_that_fits_the_module_is_kept() -> None:
    found = invariants.for_module({"invariants": [{"kind": "sum", "output": 0, "axis": -1},
                                                  {"kind": "logsumexp", "output": 0, "axis": 1, "other": 0}]},
                                  _module())
    assert [(d.kind, d.source) for d in found] == [("sum", "meta.json"), ("logsumexp", "meta.json")]
    assert invariants.for_module({}, _module()) == []


def test_replay_of_a_trace_with_a_malformed_declaration_exits_2_naming_it(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "bad", [{"kind": "finite", "output": 0}, {"kind": "sum", "output": 0}])
    proc = subprocess.run([CLI, "replay", str(trace), "--out", str(tmp_path / "out"), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stdout + proc.stderr[-2000:]
    assert f"{trace / 'meta.json'}: invariants[1]" in proc.stderr
    assert "needs an axis" in proc.stderr


def test_a_campaign_refuses_the_misdeclared_trace_and_runs_the_others(tmp_path: Path) -> None:
    good = [_trace(tmp_path / f"good{k}", [{"kind": "sum", "output": 0, "axis": -1}]) for k in range(2)]
    bad = _trace(tmp_path / "bad", [{"kind": "range", "output": 0}])
    spec = parse_spec({"traces": [str(good[0]), str(bad), str(good[1])], "targets": ["default"],
                       "budget": {"programs": 3}, "workers": 1, "bisect": {"enabled": False}})
    summary = run_campaign(spec, tmp_path / "out")
    assert summary["program_status"] == {"judged": 2, "trace_error": 1}, summary["program_status"]
    (error,) = summary["trace_errors"]
    assert error["error"].startswith(f"{bad / 'meta.json'}: invariants[0]")
    assert "range: needs low or high" in error["error"]
    assert summary["findings"] == {}


def test_check_of_a_program_folder_with_a_malformed_declaration_exits_2_naming_it(tmp_path: Path) -> None:
    """A program folder (what findings hold) whose meta.json was edited by hand."""
    from xla_sentinel.core.program import Program

    folder = tmp_path / "program"
    Program("p", _module(), [X], ["f32"], {"source": "trace", "invariants": [{"kind": "sum", "output": 0}]}).save(folder)
    proc = subprocess.run([CLI, "check", str(folder)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stdout + proc.stderr[-2000:]
    assert f"{folder / 'meta.json'}: invariants[0]" in proc.stderr and "needs an axis" in proc.stderr
