"""Findings that must not be reduced (nondeterministic, no longer failing), bad finding
folders, and the `xla-sentinel bisect` command's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from findings import exp_inputs, exp_program, make_finding
from xla_sentinel.bisect import BisectError, bisect_finding
from xla_sentinel.cli.main import main

FLAKY = str(Path(__file__).with_name("flaky_fault.py"))


@pytest.fixture
def exp_finding(tmp_path: Path) -> Path:
    return make_finding(tmp_path / "exp", exp_program, exp_inputs())


def test_nondeterministic_failure_is_reported_not_reduced(tmp_path: Path) -> None:
    folder = make_finding(tmp_path / "flaky", exp_program, exp_inputs(), [FLAKY])
    result = bisect_finding(folder, timeout=60)
    assert result["status"] == "nondeterministic"
    assert result["stages"]["reproduce"]["deterministic"] is False
    assert (result["culprit_op"], result["repro"]) == (None, None)
    assert "graph" not in result["stages"] and "reduce" not in result["stages"]
    assert not (folder / "repro").exists()
    assert json.loads((folder / "finding.json").read_text())["culprit_op"] is None


def test_finding_flagged_nondeterministic_by_the_campaign_is_not_reduced(tmp_path: Path) -> None:
    from xla_sentinel.xla.faults import fault_path

    folder = make_finding(tmp_path / "nd", exp_program, exp_inputs(),
                          [fault_path("fusion_bf16_rounding")], verdict="nondeterministic")
    result = bisect_finding(folder, timeout=60)
    assert result["status"] == "nondeterministic" and result["repro"] is None


def test_cli_exit_1_when_the_bug_reproduces(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = make_finding(tmp_path / "flaky", exp_program, exp_inputs(), [FLAKY])
    assert main(["bisect", str(folder), "--timeout", "60"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "nondeterministic"


def test_finding_that_no_longer_fails_is_not_reproduced(exp_finding: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    # No plugin: nothing is wrong with this program any more.
    assert main(["bisect", str(exp_finding), "--timeout", "60"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["status"], result["reproduces"], result["culprit_op"]) == \
        ("not_reproduced", False, None)


def test_folder_without_finding_json(tmp_path: Path) -> None:
    with pytest.raises(BisectError, match=f"{tmp_path}: not a finding folder"):
        bisect_finding(tmp_path)


def test_corrupt_finding_json(exp_finding: Path) -> None:
    (exp_finding / "finding.json").write_text("{not json")
    with pytest.raises(BisectError, match="finding.json: unreadable JSON"):
        bisect_finding(exp_finding)


def test_missing_inputs(exp_finding: Path) -> None:
    (exp_finding / "program" / "inputs.npz").unlink()
    with pytest.raises(BisectError, match="inputs.npz: missing"):
        bisect_finding(exp_finding)


def test_missing_plugin(exp_finding: Path, tmp_path: Path) -> None:
    record = json.loads((exp_finding / "finding.json").read_text())
    record["evidence"]["plugins"] = [f"{tmp_path}/gone.py:transform"]
    (exp_finding / "finding.json").write_text(json.dumps(record))
    with pytest.raises(BisectError, match="gone.py does not exist"):
        bisect_finding(exp_finding)


def test_unparseable_module_names_the_file(exp_finding: Path, capsys: pytest.CaptureFixture) -> None:
    module = exp_finding / "program" / "module.mlir"
    module.write_text(module.read_text().replace("stablehlo.exponential", "stablehlo.exponentia1"))
    assert main(["bisect", str(exp_finding), "--timeout", "60"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{module}:" in err and "does not parse" in err
