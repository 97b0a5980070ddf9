"""External programs: a corpus folder runs through the same targets and oracle; malformed
submissions are reported per file and do not stop the campaign. Also the report command
on that campaign."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.cli import main as cli
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel.xla.faults import fault_path

GOOD = {
    "softmax.py": '''import jax
INPUTS = [("f32", (4, 8)), ("bf16", (8,))]
def f(x, b):
    return jax.nn.softmax(x + b.astype(x.dtype), axis=-1)
''',
    "nested/ties.py": '''from jax import lax
INPUTS = [("s32", (16,)), ("s32", (16,))]
def f(x, y):
    return lax.select(x >= y, x, y)
''',
    "exp.mlir": '''module @m {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<8xf32>
    %1 = stablehlo.add %0, %arg0 : tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}
''',
}
BAD = {
    "syntax.py": ('INPUTS = [("f32", (4,))\ndef f(x): return x\n', "syntax error at line 1"),
    "no_f.py": ('INPUTS = [("f32", (4,))]\ndef g(x): return x\n', "defines no function f(*args)"),
    "no_inputs.py": ("def f(x): return x\n", "defines no INPUTS"),
    "bad_dtype.py": ('INPUTS = [("f31", (4,))]\ndef f(x): return x\n', "unknown dtype 'f31'"),
    "bad_shape.py": ('INPUTS = [("f32", (4,))]\ndef f(x): return x.reshape(3, 3)\n',
                     "does not trace at INPUTS (line 2)"),
    "raises.py": ('import nonexistent_module_xyz\n', "raised ModuleNotFoundError while loading"),
    "exits.py": ("import os\nos._exit(3)\n", "crashed or hung the worker"),
    "garbage.mlir": ("this is not mlir\n", "garbage.mlir"),
}
BASE = {"seed": 4, "targets": ["default"], "references": ["f64_eager", "f64_jit", "eager"],
        "workers": 1, "bisect": {"enabled": False}}


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("corpus")
    _write(root / "corpus", GOOD)
    _write(root / "corpus", {k: v[0] for k, v in BAD.items()})
    n = len(GOOD) + len(BAD)
    spec = parse_spec({**BASE, "corpus": [str(root / "corpus")], "budget": {"programs": n + 2}})
    return root / "out", run_campaign(spec, root / "out")


def test_malformed_files_get_one_clear_error_each_and_the_campaign_goes_on(campaign) -> None:
    _, summary = campaign
    errors = {Path(e["program"]).name: e["error"] for e in summary["corpus_errors"]}
    assert set(errors) == set(BAD)
    for e in summary["corpus_errors"]:
        assert e["error"].startswith(e["program"] + ":"), e  # the message names the file
        assert "\n" not in e["error"]
    for name, (_, expected) in BAD.items():
        assert expected in errors[name], errors[name]
    # The good files and the two generated programs after them were all judged.
    assert summary["program_status"] == {"corpus_error": len(BAD), "judged": len(GOOD) + 2}
    assert summary["findings"] == {}



def test_corpus_modules_are_judged_when_f64_eager_is_the_only_float64_reference(tmp_path: Path) -> None:
    """A module without a generator graph has no ops to run one by one in float64: its
    f64_eager is the promoted module (as f64_jit's is). Naming f64_eager alone made every
    corpus program reference_failed with no evidence (seen through the agents' run_test)."""
    _write(tmp_path / "corpus", GOOD)
    spec = parse_spec({**BASE, "references": ["f64_eager", "eager"], "corpus": [str(tmp_path / "corpus")],
                       "budget": {"programs": len(GOOD)}})
    summary = run_campaign(spec, tmp_path / "out")
    assert summary["program_status"] == {"judged": len(GOOD)}, summary["program_status"]


def test_corpus_programs_carry_coverage_into_the_summary(campaign) -> None:
    _, summary = campaign
    cov = summary["coverage"]
    assert cov["programs"] == len(GOOD) + 2 and cov["programs_with_hlo"] == len(GOOD) + 2
    # StableHLO op names from the corpus modules, generator op names from the rest.
    assert cov["ops"]["exponential"] >= 2 and cov["ops"]["select"] >= 1
    assert {"f32", "bf16", "s32"} <= set(cov["dtypes"])


def test_report_prints_tables_and_writes_the_chart(campaign, capsys: pytest.CaptureFixture) -> None:
    out, _ = campaign
    assert cli.main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"| corpus_error | {len(BAD)} |" in text
    assert "### Fusions in the first target's optimized HLO" in text
    assert "### Generator ops never drawn" in text
    png = out / "coverage.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_a_folder_without_a_campaign_is_bad_input(tmp_path: Path, capsys) -> None:
    assert cli.main(["report", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


# The middle element of an odd-length vector ties with itself reversed: a compare GE
# feeding a select (not the max idiom, which XLA rewrites away) decides differently
# there when GE becomes GT. Float outputs: an integer computed from floats may flip
# legally, which the oracle cannot confirm without a noise model (a module has none).
FLOAT_TIES = '''from jax import lax
INPUTS = [("f32", (17,))]
def f(x):
    r = lax.rev(x, (0,))
    return lax.select(x >= r, x * 2.0, r - 1.0)
'''


def test_a_miscompiled_corpus_program_is_a_finding(tmp_path: Path) -> None:
    _write(tmp_path / "corpus", {"ties.py": FLOAT_TIES})
    spec = parse_spec({**BASE, "corpus": [str(tmp_path / "corpus")], "budget": {"programs": 1},
                       "injectPasses": [fault_path("select_ge_to_gt")]})
    summary = run_campaign(spec, tmp_path / "out")
    assert summary["findings"] == {"mismatch": 1}
    (finding,) = (tmp_path / "out" / "findings").iterdir()
    record = json.loads((finding / "finding.json").read_text())
    assert record["program"].startswith("corpus-ties-")
    assert record["evidence"]["where"] == [8]
    # Each path of the select rounds once: IEEE 754 fixes the output bitwise, and a module
    # without a graph is judged so by its own dataflow (issue 28), against its ops
    # compiled one at a time, value for value.
    assert record["evidence"]["reason"] == "bitwise"
    assert record["evidence"]["against"] == "eager_module"


def test_a_missing_corpus_folder_is_refused_before_the_campaign(tmp_path: Path) -> None:
    spec = parse_spec({**BASE, "corpus": [str(tmp_path / "nope")], "budget": {"programs": 1}})
    with pytest.raises(Exception, match="no such corpus folder"):
        run_campaign(spec, tmp_path / "out")


def test_guided_must_be_a_boolean() -> None:
    with pytest.raises(SpecError, match=r"spec\.generator\.guided: expected a boolean"):
        parse_spec({"generator": {"guided": "yes"}})
    assert parse_spec({"generator": {"guided": True}}).generator.guided is True
