"""A broken `--inject-pass` plugin is reported as the plugin's error, never as XLA's:
refused before a campaign starts when a small module shows it, `plugin_error` per
program when only some programs do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel.xla import plugins
from xla_sentinel.xla.faults import fault_path

BROKEN = {
    "raises.py": ("def transform(proto):\n    return 1 / 0\n", "raised ZeroDivisionError: division by zero"),
    "text.py": ("def transform(proto):\n    return 'HloModule m'\n", "returned str, not bytes or None"),
    "garbage.py": ("def transform(proto):\n    return b'garbage'\n", "returned 7 bytes that are not an HloModuleProto"),
    "truncated.py": ("def transform(proto):\n    return proto[:-5]\n", "that are not an HloModuleProto"),
    "exits.py": ("import sys\ndef transform(proto):\n    sys.exit(3)\n", "raised SystemExit: 3"),
    "imports.py": ("import no_such_module\n", "importing"),
    "nofunc.py": ("def other(proto):\n    return None\n", "has no function 'transform'"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_probe_refuses_a_broken_plugin_naming_it(tmp_path: Path, name: str) -> None:
    source, needle = BROKEN[name]
    (tmp_path / name).write_text(source)
    with pytest.raises(SpecError) as e:
        plugins.probe(str(tmp_path / name))
    message = str(e.value)
    assert message.startswith("injectPasses: ") and needle in message and name in message, message
    assert "\n" not in message


def test_probe_gives_up_on_a_plugin_that_hangs(tmp_path: Path) -> None:
    # Sleeps rather than spins: the abandoned thread must not eat a core for the rest of the run.
    (tmp_path / "slow.py").write_text("import time\ndef transform(proto):\n    time.sleep(3)\n")
    with pytest.raises(SpecError, match=r"slow\.py hung \(no result within 0 s"):
        plugins.probe(str(tmp_path / "slow.py"), timeout=0.2)


@pytest.mark.parametrize("ref", [fault_path("fusion_bf16_rounding"), "SAME"])
def test_probe_accepts_working_plugins(tmp_path: Path, ref: str) -> None:
    if ref == "SAME":
        (tmp_path / "same.py").write_text("def transform(proto):\n    return bytearray(proto)\n")
        ref = str(tmp_path / "same.py")
    plugins.probe(ref)


def test_run_refuses_a_plugin_that_returns_no_module_before_writing(tmp_path: Path) -> None:
    (tmp_path / "garbage.py").write_text(BROKEN["garbage.py"][0])
    (tmp_path / "c.yaml").write_text("budget: {programs: 1}\n")
    r = subprocess.run([sys.executable, "-m", "xla_sentinel.cli.main", "run", "c.yaml", "--out", "out",
                        "--quiet", "--inject-pass", "garbage.py"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("xla-sentinel: error:")]
    assert len(lines) == 1 and "garbage.py:transform returned 7 bytes that are not an HloModuleProto" in lines[0], r.stderr
    assert not (tmp_path / "out").exists()


def test_a_plugin_that_breaks_on_some_programs_is_a_plugin_error_not_a_finding(tmp_path: Path) -> None:
    # Passes the probe (its module is jit_xla_sentinel_probe), then breaks on every campaign program:
    # one with a result XLA would abort the process on, one with a result XLA cannot parse.
    for name, result in (("text.py", "'HloModule m'"), ("garbage.py", "b'garbage'")):
        (tmp_path / name).write_text("def transform(proto):\n"
                                     f"    return None if b'xla_sentinel_probe' in proto else {result}\n")
    spec = parse_spec({"seed": 1, "generator": {"version": 1, "maxOps": 4, "dtypes": ["f32"]}, "targets": ["default"],
                       "references": ["f64_jit"], "budget": {"programs": 2}, "workers": 1,
                       "bisect": {"enabled": False}})
    for name in ("text.py", "garbage.py"):
        summary = run_campaign(spec, tmp_path / f"out-{name}", inject_passes=[str(tmp_path / name)])
        assert summary["program_status"] == {"plugin_error": 2}, (name, summary["program_status"])
        assert summary["findings"] == {} and summary["signatures"] == []
