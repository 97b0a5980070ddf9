"""The `xla-sentinel` command line itself: `--version`, bad input as one line and the exit
code its error class carries, flags shared by several commands declared once, and the
triage table's layout."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from xla_sentinel import __version__
from xla_sentinel.agents.gate import GateError
from xla_sentinel.agents.runtime import AgentSetupError
from xla_sentinel.agents.tasks import QueueError
from xla_sentinel.agents.tools import ToolError
from xla_sentinel.bisect.pipeline import BisectError
from xla_sentinel.bisect.versions import VersionBisectError
from xla_sentinel.cli import main as cli
from xla_sentinel.cli.triage_view import Triage, table
from xla_sentinel.core.errors import UserError
from xla_sentinel.core.model import Signature, Verdict
from xla_sentinel.core.program import ProgramError
from xla_sentinel.core.versions import VersionError, package_versions
from xla_sentinel.judge.invariants import InvariantError
from xla_sentinel.spec.campaign import SpecError
from xla_sentinel.storage.objects import StorageError
from xla_sentinel.storage.store import StoreError
from xla_sentinel.xla.plugins import PluginError


def test_version_names_the_package_jax_and_jaxlib(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    versions = package_versions()
    assert capsys.readouterr().out == (f"xla-sentinel {__version__} (jax {versions['jax']}, "
                                       f"jaxlib {versions['jaxlib']})\n")


def test_the_console_script_answers_version_without_importing_the_engine_or_jax() -> None:
    code = ("import sys\nfrom xla_sentinel.cli.entry import main\nrc = main(['--version'])\n"
            "print(rc, sorted(m for m in ('jax', 'numpy', 'xla_sentinel.cli.main') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    version, imported = out.stdout.splitlines()
    assert version.startswith(f"xla-sentinel {__version__} (jax ") and imported == "0 []"


@pytest.mark.parametrize(("content", "named"), [
    ("seed: 1\nbudgett: {programs: 1}\n", "spec.budgett: unknown field"),
    ("seed: [1\n", "c.yaml: malformed YAML at line"),
    (None, "c.yaml: cannot read campaign file"),
])
def test_a_bad_campaign_file_exits_2_with_one_line_naming_the_field_or_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, named: str) -> None:
    campaign = tmp_path / "c.yaml"
    if content is not None:
        campaign.write_text(content)
    assert cli.main(["run", str(campaign), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("xla-sentinel: error: ") and named in err
    assert not (tmp_path / "out").exists()


def test_the_exit_code_is_the_error_class_s(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    class Refused(UserError):
        exit_code = 3

    def refuse(args: argparse.Namespace) -> int:
        raise Refused(f"{args.dir}: refused")

    monkeypatch.setattr(cli, "_cmd_triage", refuse)
    assert cli.main(["triage", "somewhere"]) == 3
    assert capsys.readouterr().err == "xla-sentinel: error: somewhere: refused\n"


@pytest.mark.parametrize("error", [
    SpecError, ProgramError, VersionError, InvariantError, StorageError, StoreError, BisectError,
    VersionBisectError, PluginError, GateError, ToolError, QueueError, AgentSetupError])
def test_the_engine_s_bad_input_errors_are_user_errors(error: type[UserError]) -> None:
    assert issubclass(error, UserError) and error("x").exit_code == 2


def test_bad_input_errors_still_are_what_their_callers_catch() -> None:
    assert issubclass(SpecError, ValueError) and issubclass(ProgramError, ValueError)
    assert issubclass(StorageError, RuntimeError) and issubclass(AgentSetupError, RuntimeError)


def _flags(parser: argparse.ArgumentParser) -> dict[str, list[tuple[str, argparse.Action]]]:
    """Per flag, the (subcommand, action) of every subcommand that takes it."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out: dict[str, list[tuple[str, argparse.Action]]] = {}
    for name, p in sub.choices.items():
        for action in p._actions:
            for flag in action.option_strings:
                out.setdefault(flag, []).append((name, action))
    return out


def test_flags_several_commands_take_read_the_same_in_each() -> None:
    flags = _flags(cli.build_parser())
    shared = {f: uses for f, uses in flags.items() if len(uses) > 1 and f not in ("-h", "--help")}
    assert {"--campaign", "--out", "--inject-pass", "--quiet"} <= set(shared)
    for flag, uses in shared.items():
        if flag == "--out":  # what the folder holds is each command's own
            continue
        described = {(a.help, a.metavar, a.type, a.required, type(a)) for _, a in uses}
        assert len(described) == 1, f"{flag} differs between {[name for name, _ in uses]}"


def _signature(sig_id: str, **fields: Any) -> Signature:
    return Signature(id=sig_id, verdict=Verdict.MISMATCH, count=2, first_seen="t0", last_seen="t1", **fields)


def test_the_triage_table_names_every_configuration_and_aligns_its_columns() -> None:
    header, first, second = table(Triage([_signature("s1", culprit_op="add"), _signature("s2", target="cpu-O0")],
                                         {"s1": ["default", "no_fusion"]})).splitlines()
    assert header.split() == ["id", "verdict", "configurations", "culprit_op", "culprit_pass", "count",
                              "first_seen", "last_seen", "known_bug", "repro"]
    assert first.split()[:4] == ["s1", "mismatch", "default,no_fusion", "add"]
    assert second.split()[:4] == ["s2", "mismatch", "cpu-O0", "-"]  # no finding: its own target
    column = header.index("culprit_op")
    assert first[column:].startswith("add ") and second[column:].startswith("- ")


def test_the_triage_table_grows_a_column_only_when_a_signature_has_it() -> None:
    sigs = [_signature("s1", introduced_in="0.10.1", last_good="0.10.0"), _signature("s2")]
    header = table(Triage(sigs, {}, fixes={"s2": {"cure": "no_ynn"}})).splitlines()[0].split()
    assert header[-3:] == ["introduced_in", "last_good", "verified_fix"]
    assert "verification" not in header
    assert table(Triage([], {})) == "no signatures"
