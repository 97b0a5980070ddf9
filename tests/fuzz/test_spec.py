"""Campaign specs: defaults, and one clear line naming the field for every bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xla_sentinel.spec.campaign import SpecError, campaign_from_data, load_campaign, parse_spec

REPO = Path(__file__).resolve().parents[2]


def test_defaults_fill_a_minimal_spec() -> None:
    spec = parse_spec({"budget": {"programs": 5}})
    assert [t.name for t in spec.targets] == ["default", "O0", "no_fusion_emitters"]
    assert spec.budget.programs == 5 and spec.workers == 2


def test_custom_targets_say_what_they_test() -> None:
    spec = parse_spec({"targets": ["default", {"name": "mine", "options": {"xla_cpu_enable_fast_math": True}},
                                   {"name": "old_jaxlib", "image": "runner:0.4.30"}],
                       "references": ["f64_eager"]})
    assert [t.name for t in spec.targets] == ["default", "mine", "old_jaxlib"]
    # In a GPU campaign, a CPU target at default options is a comparison, not a typo.
    spec = parse_spec({"targets": [{"name": "default", "platform": "gpu"}, {"name": "cpu", "platform": "cpu"}],
                       "accelerator": {"type": "gpu"}})
    assert spec.targets[1].platform == "cpu"


def test_the_preset_table_is_the_one_targets_compile_with() -> None:
    from xla_sentinel.judge import targets
    from xla_sentinel.ops import table as ops
    from xla_sentinel.spec import campaign

    assert targets.PRESETS is campaign.PRESETS
    # campaign.OP_NAMES mirrors the op table, so that the operator validates specs without the
    # ops package; a new op must be added to both.
    assert sorted(campaign.OP_NAMES) == sorted(ops.OPS)


@pytest.mark.parametrize(("manifest", "message"), [
    ({"kind": "FuzzCampaign", "apiVersion": "xlasentinel.dev/v1alpha1", "metadata": ["x"]}, "metadata: expected a mapping"),
    ({"kind": "FuzzCampaign", "apiVersion": "xlasentinel.dev/v1alpha1", "metadata": {"name": "Bad Name"}},
     "metadata.name: must be a lowercase DNS name"),
    ({"kind": "FuzzCampaign", "apiVersion": "v1"}, "apiVersion: expected xlasentinel.dev/v1alpha1"),
    ({"kind": "BugSignature", "apiVersion": "xlasentinel.dev/v1alpha1"}, "kind: expected FuzzCampaign"),
    ([1, 2], "campaign: expected a mapping at the top level"),
])
def test_bad_manifests_name_the_field(manifest: object, message: str) -> None:
    with pytest.raises(SpecError) as e:
        campaign_from_data(manifest)
    assert str(e.value).startswith(message), str(e.value)


def test_a_fuzzcampaign_manifest_is_accepted() -> None:
    c = campaign_from_data({"apiVersion": "xlasentinel.dev/v1alpha1", "kind": "FuzzCampaign",
                            "metadata": {"name": "nightly"}, "spec": {"seed": 3}})
    assert c.name == "nightly" and c.spec.seed == 3


@pytest.mark.parametrize(("data", "message"), [
    ({"budgett": {}}, "spec.budgett: unknown field"),
    ({"generator": {"maxOps": "many"}}, "spec.generator.maxOps: expected an integer"),
    ({"generator": {"minOps": 5, "maxOps": 2}}, "spec.generator.minOps: must be >= 1 and <= maxOps"),
    ({"generator": {"dtypes": ["f32", "f8"]}}, "spec.generator.dtypes[1]: unknown dtype 'f8'"),
    ({"targets": [{"name": "O0"}, {"name": "O0"}]}, "spec.targets[1].name: duplicate target name"),
    ({"targets": [{"name": "x", "options": {"fast": True}}]}, "spec.targets[0].options.fast"),
    ({"references": ["oracle"]}, "spec.references[0]: unknown reference 'oracle'"),
    ({"budget": {"programs": 0}}, "spec.budget.programs: must be >= 1"),
    ({"budget": {}}, "spec.budget: set programs, seconds or continuous"),
    ({"workers": True}, "spec.workers: expected an integer"),
    ({"tolerances": {"s32": 4}}, "spec.tolerances.s32: tolerances are per float dtype"),
    ({"accelerator": {"type": "tpu"}}, "spec.accelerator: type tpu needs tpuAccelerator"),
    ({"targets": ["default"], "references": []}, "spec.targets: the oracle needs at least two"),
    # Issue 17: a misspelled preset used to become a target with default options.
    ({"targets": ["defualt"]}, "spec.targets[0].name: unknown target preset 'defualt'; did you mean 'default'?"),
    ({"targets": [{"name": "mine"}]}, "spec.targets[0].name: unknown target preset 'mine'; known: default"),
    # Issue 17: a negative seed used to be accepted, then every program failed to generate.
    ({"seed": -7}, "spec.seed: must be >= 0"),
    ({"references": ["f64eager"]}, "spec.references[0]: unknown reference 'f64eager'; did you mean 'f64_eager'?"),
    ({"generator": {"dtypes": ["F32"]}}, "spec.generator.dtypes[0]: unknown dtype 'F32'; did you mean 'f32'?"),
    ({"generator": {"ops": ["tanhh"]}}, "spec.generator.ops[0]: unknown op 'tanhh'; did you mean 'tanh'?"),
    ({"generator": {"excludeOps": ["sort"], "ops": ["sort"]}}, "spec.generator.excludeOps: excludes every op"),
    ({"targets": [{"name": "O0", "platform": "cpuu"}]}, "spec.targets[0].platform: unknown platform 'cpuu'; did"),
    ({"accelerator": {"type": "GPU"}}, "spec.accelerator.type: unknown accelerator 'GPU'; did you mean 'gpu'?"),
    ({"tolerances": {"f3": 2}}, "spec.tolerances.f3: tolerances are per float dtype"),
    ({"budgett": {}}, "spec.budgett: unknown field; did you mean 'budget'?"),
    ({"budget": {"seconds": float("inf")}}, "spec.budget.seconds: must be a finite number"),
    ({"timeouts": {"programSeconds": float("nan")}}, "spec.timeouts.programSeconds: must be a finite number"),
    ({"resources": {"limits": {"cpu": float("inf")}}}, "spec.resources.limits.cpu: must be a finite number"),
    ({"injectPasses": ["plugin.txt"]}, "spec.injectPasses[0]: must be FILE.py[:FUNC]"),
    ({"artifacts": {"bucketURI": "http://x"}}, "spec.artifacts.bucketURI: must be gs://... or s3://..."),
    ({"accelerator": {"type": "gpu", "tpuTopology": "2x4"}}, "spec.accelerator: tpuAccelerator and tpuTopology"),
])
def test_bad_specs_name_the_field(data: dict, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    assert str(e.value).startswith(message), str(e.value)


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("seed: 1\ngenerator: [unclosed\n")
    with pytest.raises(SpecError, match=r"c\.yaml: malformed YAML at line \d+"):
        load_campaign(f)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xla_sentinel.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("content", "extra", "needle"), [
    ("seed: [1\n", [], "malformed YAML"),
    ("seed: 1\nbudgett: {programs: 1}\n", [], "spec.budgett: unknown field"),
    ("seed: one\n", [], "spec.seed: expected an integer"),
    ("budget: {programs: -3}\n", [], "spec.budget.programs: must be >= 1"),
    ("budget: {programs: 1}\n", ["--inject-pass", "missing_plugin.py"], "plugin file missing_plugin.py does not exist"),
    ("budget: {programs: 1}\ntargets: [{name: bad, options: {xla_no_such_option: 1}}, default]\n", [],
     "spec.targets[0].options (bad): XLA rejected them"),
    ("seed: -7\n", [], "spec.seed: must be >= 0"),
    ("targets: [defualt]\n", [], "did you mean 'default'?"),
    ("budget: {programs: 1}\n", ["--workers", "0"], "--workers: must be between 1 and 4096"),
    ("budget: {programs: 1}\n", ["--budget-seconds", "inf"], "--budget-seconds: must be a finite number"),
])
def test_cli_bad_input_exits_2_with_one_line_and_writes_nothing(
        tmp_path: Path, content: str, extra: list[str], needle: str) -> None:
    (tmp_path / "c.yaml").write_text(content)
    r = _cli("run", "c.yaml", "--out", "out", "--quiet", *extra, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("xla-sentinel: error:")]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert not (tmp_path / "out").exists()


def test_cli_missing_campaign_file(tmp_path: Path) -> None:
    r = _cli("run", "nope.yaml", "--out", "out", cwd=tmp_path)
    assert r.returncode == 2 and "nope.yaml: cannot read campaign file" in r.stderr


def test_corrupt_store_and_missing_program_are_bad_input(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "campaign.sqlite").write_text("garbage")
    (tmp_path / "c.yaml").write_text("budget: {programs: 1}\n")
    r = _cli("run", "c.yaml", "--out", "out", "--quiet", cwd=tmp_path)
    assert r.returncode == 2 and "campaign.sqlite: not a usable xla-sentinel store" in r.stderr
    assert (tmp_path / "out" / "campaign.sqlite").read_text() == "garbage"  # left as found
    r = _cli("check", "no-such-program", cwd=tmp_path)
    assert r.returncode == 2 and "not a program folder" in r.stderr


@pytest.mark.parametrize("command", ["worker", "operator"])
def test_entrypoints_take_their_own_flags(tmp_path: Path, command: str) -> None:
    r = _cli(command, "--help", cwd=tmp_path)
    assert r.returncode == 0 and "usage:" in r.stdout and "unrecognized" not in r.stderr
