"""A replayed module whose float64 jit reference shares the bug (issue 36): numpy's float64
answer, the XLA float64 one and the op-by-op evaluation at the program's own precision are
three opinions; where the last agrees with numpy far more closely than the XLA float64
reference does, that reference is wrong (a finding against it), not the program
ill-conditioned, and the targets are judged (docs/detection.md, "A reference that shares
the bug"). Before, a module without a graph had no noise model, every such disagreement
read as ill-conditioning, and the dynamic_slice-of-dynamic_slice traces of the real-bug
corpus ended `references_disagree` under the campaign's default references."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from xla_sentinel.core.dtypes import UNIT_ROUNDOFF
from xla_sentinel.judge.assess import (
    _deciding,
    _hides_ops,
    cross_check_spread,
    literal_spread,
    reference_disagreement,
)
from xla_sentinel.judge.noise import NoiseModel
from xla_sentinel.judge.oracle import OutputInfo

F32 = OutputInfo("f32", True)
CORPUS = Path(__file__).resolve().parents[1] / "bisect" / "data" / "corpus"


def _no_samples() -> NoiseModel:
    return NoiseModel.of(lambda: None, None)


def test_an_op_by_op_evaluation_near_numpy_makes_a_far_reference_wrong() -> None:
    truth = np.linspace(-2.0, 3.0, 64)
    op_by_op = truth.astype(np.float32)  # one f32 rounding off float64: ~6e-8 normwise
    shared_bug = truth.copy()
    shared_bug[5:9] = truth[40:44]  # a slice taken at the wrong start, as the bug does
    spread = cross_check_spread(_no_samples(), [truth], [F32], None, [op_by_op])
    assert UNIT_ROUNDOFF["f32"] <= spread(0) < 1e-7
    verdict, ill = reference_disagreement([truth], [shared_bug], [F32], spread)
    assert verdict is not None and not ill
    assert (verdict[0], verdict[2]["reason"]) == ("mismatch", "reference")


def test_an_op_by_op_evaluation_that_shares_the_bug_leaves_it_ill_conditioned() -> None:
    """The op-by-op evaluation is XLA too: where it is as far off as the reference (a bug
    in one op, which each op compiled alone keeps), nothing tells the two apart, and the
    output has no truth, as before."""
    truth = np.linspace(-2.0, 3.0, 64)
    shared_bug = truth.copy()
    shared_bug[5:9] = truth[40:44]
    spread = cross_check_spread(_no_samples(), [truth], [F32], None, [shared_bug.astype(np.float32)])
    assert reference_disagreement([truth], [shared_bug], [F32], spread) == (None, {0})


def test_no_op_by_op_evaluation_or_another_nan_pattern_gives_no_spread() -> None:
    truth = np.array([1.0, 2.0, np.inf])
    assert cross_check_spread(_no_samples(), [truth], [F32], None, None)(0) is None
    # NaN where the truth is infinite: its normwise error says nothing of the rest.
    assert literal_spread([np.array([1.0, 2.0, np.nan], np.float32)], [truth], [F32], None, 0) is None
    # Never less than one rounding of the program's precision, even where it is exact.
    exact = [np.array([1.0, 2.0, 4.0])]
    assert literal_spread([exact[0].astype(np.float16)], exact, [OutputInfo("f16")], None, 0) == UNIT_ROUNDOFF["f16"]


def test_the_noise_models_samples_come_first_where_there_are_any() -> None:
    truth = np.linspace(-2.0, 3.0, 8)
    sample = [truth * (1 + 1e-3)]
    noise = NoiseModel.of(lambda: [sample])
    spread = cross_check_spread(noise, [truth], [F32], None, [truth.astype(np.float32)])
    assert spread(0) == pytest.approx(1e-3, rel=1e-6)


def test_a_reduce_that_sums_or_a_select_on_integer_positions_flips_no_tie() -> None:
    """What made the decoder trace discrete (and its op-by-op spread refused): softmax's
    reduces, whose regions hid their one op, and a select that moves floats by an
    integer predicate."""
    add = {"name": "stablehlo.reduce", "regions": 1, "operands": ["%1", "%2"],
           "text": "%8 = stablehlo.reduce(%7 init: %cst) applies stablehlo.add across dimensions = [0]"}
    assert not _hides_ops(add)
    assert not _hides_ops({**add, "text": add["text"].replace("add", "maximum")})
    # A reduce that chooses by a compare in its body, or written out in full, may flip.
    assert _hides_ops({**add, "text": add["text"].replace("add", "compare")})
    assert _hides_ops({**add, "text": '%8:2 = "stablehlo.reduce"(%7, %9, %c, %d) ({'})
    assert _hides_ops({"name": "func.call", "regions": 0, "operands": [], "text": ""})
    assert _hides_ops({"name": "stablehlo.while", "regions": 2, "operands": [], "text": "stablehlo.while"})
    assert _deciding({"name": "stablehlo.select", "operands": ["%p", "%a", "%b"]}) == ["%p"]
    assert _deciding({"name": "stablehlo.compare", "operands": ["%a", "%b"]}) == ["%a", "%b"]


def _judged(trace: str) -> list[tuple[str, str, str]]:
    import subprocess

    script = (
        "import sys, tempfile\n"
        "from pathlib import Path\n"
        "from xla_sentinel.campaign.check import check_program\n"
        "if __name__ == '__main__':\n"
        "    c = Path(tempfile.mkdtemp()) / 'c.yaml'\n"
        "    c.write_text('targets: [default, O0]\\nbisect: {enabled: false}\\n')\n"
        "    for v in check_program(Path(sys.argv[1]), c, ()):\n"
        "        print('VERDICT', v['target'], v['status'].value, v['verdict'].value)\n")
    done = subprocess.run([sys.executable, "-c", script, str(CORPUS / trace)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [tuple(line.split()[1:]) for line in done.stdout.splitlines()  # type: ignore[misc]
            if line.startswith("VERDICT")]


def test_a_replayed_trace_whose_float64_jit_shares_the_bug_is_judged_under_default_references() -> None:
    """window_slice of the corpus: the outer dynamic_slice in a jitted helper (func.call);
    f64_jit (the promoted module, compiled whole) shares the bug, 0.46 normwise off numpy;
    the op-by-op evaluation is 6e-8 off. With the campaign's default references it was
    `references_disagree`; now both targets are found wrong."""
    assert _judged("window_slice") == [("default", "judged", "mismatch"), ("O0", "judged", "mismatch")]
