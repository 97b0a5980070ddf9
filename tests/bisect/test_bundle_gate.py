"""The bundle gate (bisect/bundle.py): repro.py is run before a bundle stands, and a bundle
whose repro.py does not show the finding's failure is not written; the bisection's
evidence says why, and the finding keeps its culprit with no reproducer (issue 36)."""

from __future__ import annotations

import json
from pathlib import Path

from findings import exp_inputs, exp_program, make_finding
from xla_sentinel.bisect import bisect_finding

WORKER_ONLY = str(Path(__file__).with_name("worker_only_fault.py"))


def test_a_bundle_whose_repro_does_not_fail_is_not_written(tmp_path: Path) -> None:
    """The fault shows in the workers (the bisection localizes it) and not in repro.py,
    which then exits 0 under the finding's own options: no bundle."""
    folder = make_finding(tmp_path / "gate", exp_program, exp_inputs(), [WORKER_ONLY])
    result = bisect_finding(folder, timeout=120)
    bundle = result["stages"]["bundle"]
    assert result["status"] == "localized" and result["culprit_op"], result["stages"]
    assert bundle["written"] is False and bundle["folder"] is None, bundle
    assert bundle["repro_exit"] == 0 and "OK: outputs agree" in bundle["repro_output"], bundle
    assert bundle["why"] == "repro.py exits 0 under the finding's own options, not 1", bundle
    assert "cured_exit" not in bundle  # the cure is not tried on a repro that does not fail
    assert result["repro"] is None and not (folder / "repro").exists()
    record = json.loads((folder / "finding.json").read_text())
    assert record["culprit_op"] == result["culprit_op"] and record["repro"] is None
