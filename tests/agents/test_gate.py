"""The verification gate on its own: what it refuses, and why (reproducers are real child
processes; the real-bug checks run jax)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_fixtures import DIVIDE, EXACT_DIVISION, FUSIONS_ONLY, REGRESSION, SHIFT, SHIFT_REPRO
from xla_sentinel.agents.gate import (
    MIN_REGRESSION,
    MIN_REGRESSION_ENV,
    REGRESSION_CORPUS_ENV,
    Cure,
    Failure,
    GateError,
    Ledger,
    Trial,
    configured_corpus,
    configured_minimum,
    run_script,
    verify_fix,
    verify_judged_reproduction,
    verify_reproduction,
    verify_test,
)

ALGSIMP = Cure(disable_passes=("algsimp",))


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def test_outcomes_tell_a_bug_from_a_crash(tmp_path: Path) -> None:
    assert run_script(_script(tmp_path, "ok.py", "raise SystemExit(0)"))["outcome"] == "clean"
    assert run_script(_script(tmp_path, "bug.py", "raise SystemExit(1)"))["outcome"] == "bug"
    # An uncaught exception also exits 1: it is not a bug shown.
    assert run_script(_script(tmp_path, "raises.py", "1 / 0"))["outcome"] == "error"
    assert run_script(_script(tmp_path, "hang.py", "import time; time.sleep(30)"), timeout=1)["outcome"] == "timeout"
    cure_seen = _script(tmp_path, "env.py", "import os, sys; sys.exit(0 if 'algsimp' in os.environ['XLA_FLAGS'] else 1)")
    assert run_script(cure_seen, ALGSIMP)["outcome"] == "clean"
    with pytest.raises(GateError, match="no such reproducer"):
        run_script(tmp_path / "missing.py")


def test_bad_cures_are_refused_before_anything_runs() -> None:
    with pytest.raises(GateError, match="not an XLA flag"):
        Cure(xla_flags=("--xla_cpu_enable_fast_math=true; rm -rf /",))
    with pytest.raises(GateError, match="not an HLO pass name"):
        Cure(disable_passes=("algsimp fusion",))
    with pytest.raises(GateError, match="needs xla_flags, disable_passes or a pass plugin"):
        Cure()
    with pytest.raises(GateError, match="plugin: .* is not FILE.py"):
        Cure(plugin="relative/plugin.py:transform")
    with pytest.raises(GateError, match="plugin: .* is not FILE.py"):
        Cure(plugin=f"{Path(__file__).resolve()}:not a name")


def test_claimed_reproductions_that_do_not_reproduce_are_refused(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "agents.sqlite")
    never = verify_reproduction(ledger, _script(tmp_path, "never.py", "raise SystemExit(0)"), ALGSIMP)
    assert not never.verified and "does not show a bug" in never.reason
    always = verify_reproduction(ledger, _script(tmp_path, "always.py", "raise SystemExit(1)"), ALGSIMP)
    assert not always.verified and "not clean" in always.reason
    broken = verify_reproduction(ledger, _script(tmp_path, "broken.py", "import no_such_module"), ALGSIMP)
    assert not broken.verified and "error" in broken.reason


@pytest.mark.parametrize("before, after, cured, worse, refusal", [
    ("bug", "clean", True, False, None),
    ("clean", "clean", False, False, "R does not show a bug"),
    ("error", "clean", False, False, "R does not show a bug"),
    ("bug", "bug", False, False, "A is bug (exit 1), not clean"),
    ("bug", "error", False, True, "A is error (exit 1), not clean"),
    ("bug", "timeout", False, True, "A is timeout (exit None), not clean"),
    ("clean", "bug", False, True, "R does not show a bug"),
])
def test_one_trial_tells_a_cure_a_regression_and_why_not(before: str, after: str, cured: bool, worse: bool,
                                                         refusal: str | None) -> None:
    """The one before/after comparison every check shares (reproduction, fix, its
    regression corpus, rewrite): what it says of each pair of outcomes."""
    def run(outcome: str) -> dict:
        return {"outcome": outcome, "exit": {"clean": 0, "timeout": None}.get(outcome, 1), "output": ""}

    t = Trial(run(before), run(after))
    assert (t.cured, t.worse) == (cured, worse)
    why = t.refusal("R", "A")
    assert why is None if refusal is None else why is not None and why.startswith(refusal), why
    assert t.evidence() == {"affected": t.before, "under_cure": t.after}


def test_a_test_counts_only_once_judged() -> None:
    assert not verify_test({"status": "load_error", "error": "f does not trace", "verdicts": []}).verified
    assert not verify_test({"status": "judged", "verdicts": [{"target": "default", "verdict": "unjudged"}]}).verified
    assert verify_test({"status": "judged", "verdicts": [{"target": "default", "verdict": "pass"}]}).verified


def test_a_real_bug_reproduction_and_fix_verified_and_a_wrong_cure_refused(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "agents.sqlite")
    repro = _script(tmp_path, "repro.py", SHIFT_REPRO)
    assert verify_reproduction(ledger, repro, ALGSIMP).verified
    fix = verify_fix(ledger, SHIFT, ALGSIMP, [Path(r) for r in REGRESSION], min_regression=len(REGRESSION))
    assert fix.verified, fix.reason
    assert [Path(r["script"]).name for r in fix.evidence["also_cures"]] == ["divide_by_broadcast_reciprocal.py"]
    assert fix.evidence["regressions"] == []
    wrong = verify_fix(ledger, SHIFT, Cure(disable_passes=("cse",)), [])
    assert not wrong.verified and wrong.reason.startswith("not cured")
    # The known bugs' outcomes on this build are run once, then remembered.
    assert ledger.outcome(SHIFT, None)["cached"]


def test_a_pass_plugin_cures_a_real_bug_and_a_partial_or_broken_one_does_not(tmp_path: Path) -> None:
    """divide_by_broadcast_reciprocal (x / y compiled as x * (1 / y), flushed to 0 for large y):
    the plugin that undoes the rewrite in both of the forms XLA:CPU leaves it in cures it,
    with no regression; its draft that knows only the f32 form leaves bf16 wrong; a plugin
    that returns no module fails the compile, an error, not a cure."""
    ledger = Ledger(tmp_path / "agents.sqlite")

    def plugin(name: str, code: str) -> Cure:
        return Cure(plugin=f"{_script(tmp_path, name, code).resolve()}:transform")

    fix = verify_fix(ledger, DIVIDE, plugin("exact_division.py", EXACT_DIVISION), [Path(REGRESSION[1])],
                     min_regression=1)
    assert fix.verified, fix.reason
    assert fix.evidence["under_cure"]["outcome"] == "clean" and fix.evidence["regressions"] == []
    assert fix.evidence["regression_corpus"] == [
        {"script": REGRESSION[1], "before": "bug", "after": "bug"}]
    partial = verify_fix(ledger, DIVIDE, plugin("fusions_only.py", FUSIONS_ONLY), [])
    assert not partial.verified and partial.evidence["under_cure"]["outcome"] == "bug"
    output = partial.evidence["under_cure"]["output"]
    assert "compiled [1.0, -1.0, 0.800000011920929]" in output  # f32: cured
    assert "compiled [0.0, -0.0, 0.80078125]" in output  # bf16: still x * 0
    broken = verify_fix(ledger, DIVIDE, plugin("junk.py", "def transform(proto):\n    return b'junk'\n"), [])
    assert not broken.verified and broken.evidence["under_cure"]["outcome"] == "error"
    assert "not an HloModuleProto" in broken.evidence["under_cure"]["output"]
    # The outcome is remembered per plugin file's bytes: another plugin at the same path is run.
    edited = plugin("exact_division.py", "def transform(proto):\n    return None\n")
    assert not verify_fix(ledger, DIVIDE, edited, []).verified


def test_a_fix_verified_against_a_corpus_under_the_minimum_is_refused(tmp_path: Path) -> None:
    """An empty regression corpus (an installed package without its data, or what an agent
    once could name) verified any cure; below the server's minimum a cure is refused."""
    ledger = Ledger(tmp_path / "agents.sqlite")
    empty = verify_fix(ledger, SHIFT, ALGSIMP, [])
    assert not empty.verified and empty.evidence["cured"]
    assert f"0 of the regression corpus's 0 known bugs' reproducers ran, fewer than the server's minimum of {MIN_REGRESSION}" in empty.reason
    # The reproducer itself does not count towards the corpus.
    short = verify_fix(ledger, SHIFT, ALGSIMP, [SHIFT, Path(REGRESSION[1])], min_regression=2)
    assert not short.verified and "1 of the regression corpus's 1 known bugs' reproducers ran" in short.reason
    # Nor does a reproducer that could not run before the cure: an error is no evidence.
    broken = _script(tmp_path, "broken.py", "raise SystemExit(2)\n")
    errs = verify_fix(ledger, SHIFT, ALGSIMP, [broken, Path(REGRESSION[1])], min_regression=2)
    assert not errs.verified
    assert "1 of the regression corpus's 2 known bugs' reproducers ran" in errs.reason, errs.reason


def _verdicts(**by_target: str) -> list[dict]:
    return [{"target": t, "verdict": v, "status": "judged"} for t, v in by_target.items()]


@pytest.mark.parametrize("failure, before, after, reason", [
    (Failure("default", "mismatch"), _verdicts(default="mismatch", O0="pass"), _verdicts(default="pass"), None),
    # nan_mismatch and mismatch are one class of failure: wrong numbers.
    (Failure("default", "nan_mismatch"), _verdicts(default="mismatch"), _verdicts(default="pass"), None),
    (Failure("O0", "mismatch"), _verdicts(default="mismatch", O0="pass"), _verdicts(O0="pass"),
     "judged the program pass under O0"),
    (Failure("default", "compile_error"), _verdicts(default="mismatch"), _verdicts(default="pass"),
     "not the reported compile_error"),
    (Failure("gpu", "mismatch"), _verdicts(default="mismatch"), _verdicts(default="pass"), "not a target"),
    (Failure("default", "mismatch"), _verdicts(default="mismatch"), _verdicts(default="mismatch"),
     "the engine judged the program mismatch under default, not pass"),
    (Failure("default", "mismatch", "cosine"), _verdicts(default="mismatch"), _verdicts(default="pass"),
     "names the culprit op cosine"),
    (Failure("default", "mismatch", "dynamic-update-slice"), _verdicts(default="mismatch"),
     _verdicts(default="pass"), None),
])
def test_a_reproduction_is_the_engine_s_verdict_on_the_program(failure: Failure, before: list, after: list,
                                                              reason: str | None) -> None:
    """No exit code: the engine's verdicts on the submitted program, before and under the cure
    (in the targets' options), against the reported failure."""
    module = "func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n" \
             "  %0 = stablehlo.dynamic_update_slice %arg0, %arg0, %c : tensor<4xf32>\n}"
    d = verify_judged_reproduction(failure, module, before, after, ALGSIMP)
    assert d.verified == (reason is None), d.reason
    assert reason is None or reason in d.reason


def test_a_failure_must_be_a_failing_verdict_and_a_cure_becomes_compile_options() -> None:
    with pytest.raises(GateError, match="no failing verdict"):
        Failure("default", "pass")
    with pytest.raises(GateError, match="no failing verdict"):
        Failure("default", "exit 1")
    cure = Cure(xla_flags=("--xla_cpu_enable_fast_math=false", "--xla_backend_optimization_level=0",
                           "--xla_cpu_use_thunk_runtime"), disable_passes=("algsimp",))
    assert cure.options({"xla_disable_hlo_passes": "fusion"}) == {
        "xla_disable_hlo_passes": "fusion,algsimp", "xla_cpu_enable_fast_math": False,
        "xla_backend_optimization_level": 0, "xla_cpu_use_thunk_runtime": True}


def test_the_verdicts_doc_agents_read_names_every_verdict_the_engine_gives() -> None:
    """sentinel://docs/verdicts is how an agent learns what a verdict means; it had fallen
    behind the buffer and invariant verdicts. Each Verdict value must be in it."""
    import re

    from xla_sentinel.agents.mcp_server import VERDICTS_DOC
    from xla_sentinel.core.model import Verdict

    named = set(re.findall(r"[a-z_]+", VERDICTS_DOC))
    assert {v.value for v in Verdict} - named == set()


def test_the_corpus_and_minimum_an_operator_sets_are_read_and_bad_values_refused(tmp_path: Path) -> None:
    # An agent pod's MCP server is started by the agent runtime, not by the operator: the
    # operator's choice reaches it through the pod's environment, out of the model's reach.
    (tmp_path / "a.py").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert configured_corpus({REGRESSION_CORPUS_ENV: str(tmp_path)}) == [tmp_path / "a.py"]
    assert configured_corpus({}) is None
    with pytest.raises(GateError, match="not a folder"):
        configured_corpus({REGRESSION_CORPUS_ENV: str(tmp_path / "missing")})
    assert configured_minimum({MIN_REGRESSION_ENV: "3"}) == 3
    assert configured_minimum({}) == MIN_REGRESSION
    with pytest.raises(GateError, match="not a count"):
        configured_minimum({MIN_REGRESSION_ENV: "-1"})
