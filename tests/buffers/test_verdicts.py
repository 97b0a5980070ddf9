"""The buffer verdicts in the shared records: one Verdict each, chosen from a run's
problems in model.BUFFER_VERDICTS order, accepted by the campaign schema and the CRDs."""

from __future__ import annotations

from pathlib import Path

import yaml
from xla_sentinel.core.model import BUFFER_VERDICTS, Finding, Verdict
from xla_sentinel.judge.assess import Outcome, buffer_verdict
from xla_sentinel.judge.targets import Target
from xla_sentinel.spec.campaign import VERDICTS
from xla_sentinel.triage import known_bugs
from xla_sentinel.triage.signature import signature_of

ROOT = Path(__file__).resolve().parents[2]


def test_the_buffer_verdicts_are_verdicts_and_the_crd_knows_them() -> None:
    assert [v.value for v in BUFFER_VERDICTS] == ["input_clobbered", "result_clobbered", "donation_mismatch",
                                                  "nondeterministic"]
    assert set(BUFFER_VERDICTS) <= set(VERDICTS)
    crd = yaml.safe_load((ROOT / "crds" / "bugsignature.yaml").read_text())
    text = yaml.safe_dump(crd)
    for v in BUFFER_VERDICTS:
        assert v.value in text


def test_a_run_with_several_problems_gets_the_first_verdict_and_all_evidence() -> None:
    problems = [{"verdict": "nondeterministic", "buffer": "output 0", "count": 1, "elements": []},
                {"verdict": "result_clobbered", "buffer": "live result 0badf00d:1", "count": 2, "elements": []},
                {"verdict": "input_clobbered", "buffer": "input 2", "count": 3, "elements": []}]
    tv = buffer_verdict(Target("default"), Outcome(outputs=[], buffers=problems))
    assert tv.verdict == "input_clobbered"
    assert tv.evidence == {"reason": "buffers", "buffer": "input 2", "buffers": problems}


def test_buffer_verdicts_have_signatures_apart_from_each_other() -> None:
    def finding(verdict: Verdict) -> Finding:
        return Finding(id="f", campaign="c", program="p", target="default", verdict=verdict,
                       dir="findings/f", time="t")

    ids = {signature_of(finding(v)) for v in BUFFER_VERDICTS}
    assert len(ids) == len(BUFFER_VERDICTS)
    assert Finding.from_json(finding(Verdict.DONATION_MISMATCH).to_json()).verdict is Verdict.DONATION_MISMATCH


def test_a_known_bug_rule_matches_a_buffer_verdict_through_the_program(tmp_path: Path) -> None:
    """No buffer bug of jaxlib 0.10.2 is known (known_bugs.yaml has none); a rule for one
    matches as a rule for any other verdict does, the program's ops included."""
    from xla_sentinel.programs.generator import generate
    from xla_sentinel.spec.campaign import GeneratorSpec

    rules = tmp_path / "known_bugs.yaml"
    rules.write_text(yaml.safe_dump({"bugs": [
        {"id": "clobber-in-loop", "title": "t", "match": {"verdict": ["input_clobbered", "result_clobbered"]},
         "program": {"through": ["loop_dus", "dynamic_update_slice", "scatter", "loop_shift",
                                 "loop_scatter_add", "while_loop", "scan"]}}]}))
    graphs = (generate(4, i, GeneratorSpec(version=1, shapes=["buffers"])) for i in range(40))
    graph = next(g for g in graphs if any(n.family == "buffers" for n in g.nodes))
    found = Finding(id="f", campaign="c", program="p", target="default", verdict=Verdict.INPUT_CLOBBERED,
                    dir="findings/f", time="t")
    assert known_bugs.match(found, rules, graph=graph) == "clobber-in-loop"
    found.verdict = Verdict.DONATION_MISMATCH
    assert known_bugs.match(found, rules, graph=graph) is None
