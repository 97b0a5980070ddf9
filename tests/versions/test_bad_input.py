"""Bad input across versions: a target whose environment is missing, an interpreter that
is not there, an artifact the other side cannot read, a StableHLO version the serializer
cannot write; each one clear error naming it. Real workers and jaxlib (the "other"
interpreter is a simulated release: this one, see conftest.fake_release)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from xla_sentinel.core import versions
from xla_sentinel.judge.targets import resolve
from xla_sentinel.spec.campaign import SpecError, TargetSpec, parse_spec
from xla_sentinel.worker.client import NoInterpreter, Worker
from xla_sentinel.worker.protocol import RequestFailed, Run, ToPortable, WhichVersions

from .conftest import fake_release

MODULE = """module @m {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.exponential %a : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}"""


def test_a_target_of_a_release_without_an_environment_names_it_and_the_make_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(versions.ENVS_VARIABLE, str(tmp_path / "envs"))
    spec = parse_spec({"targets": ["default", {"name": "old", "jaxlib": "0.3.99"}]})
    with pytest.raises(SpecError) as e:
        resolve(spec.targets[1])
    msg = str(e.value)
    assert "target 'old'" in msg and str(tmp_path / "envs" / "jaxlib-0.3.99") in msg
    assert "make version-envs VERSION_ENVS=0.3.99" in msg
    # The current release needs no environment: it runs in this one.
    assert resolve(TargetSpec("now", jaxlib=versions.current_jaxlib())).python is None


def test_a_missing_interpreter_is_named(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"target 'x': python /no/such/python: no such interpreter"):
        resolve(TargetSpec("x", python="/no/such/python"))
    with pytest.raises(SpecError, match=r"spec.targets\[1\].jaxlib: must be a released jaxlib version"):
        parse_spec({"targets": ["default", {"name": "x", "jaxlib": "latest"}]})
    with pytest.raises(NoInterpreter, match="/no/such/python"):
        Worker("w", python="/no/such/python").start()


def test_what_does_not_cross_is_named_and_is_no_verdict(tmp_path: Path) -> None:
    env = fake_release(tmp_path / "envs", "0.90.0")
    current, other = Worker("current"), Worker("other", python=str(env / "bin" / "python"))
    try:
        info = other.call(WhichVersions(), 120)
        assert info.jaxlib == versions.current_jaxlib()  # simulated: it is this jaxlib
        art = current.call(ToPortable(MODULE, info.stablehlo_current), 60)
        assert other.call(Run(art.data, [np.ones(3, np.float32)], {}), 60).outputs[0][0] \
            == pytest.approx(2.7182817)
        # Bytes that are no artifact: the other side says it cannot read them.
        with pytest.raises(RequestFailed, match="^NotPortable: this jaxlib cannot read the artifact"):
            other.call(Run(b"MLIR garbage", [np.ones(3, np.float32)], {}), 60)
        # A StableHLO version older than any VHLO the serializer writes.
        with pytest.raises(RequestFailed, match=r"^NotPortable: not portable to StableHLO 0\.1\.0"):
            current.call(ToPortable(MODULE, "0.1.0"), 60)
    finally:
        current.close()
        other.close()


def test_an_option_the_targets_own_release_does_not_know_is_one_error_at_campaign_start(
        with_old_env: versions.Environment, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """xla_cpu_ftz is new in XLA 0.10.2: jaxlib 0.10.1 (the real environment) refuses it.
    Before, its target ran anyway and every program was a compile_error there; now `run`
    names the target, the release and the option before any program, and writes nothing.
    The current release takes the same option, and 0.10.1 takes one it knows."""
    from xla_sentinel.cli import main as cli
    from xla_sentinel.judge.targets import release_option_errors

    spec = {"generator": {"version": 1, "minOps": 2, "maxOps": 4}, "budget": {"programs": 1}, "workers": 1,
            "targets": [{"name": "ftz", "options": {"xla_cpu_ftz": False}},
                        {"name": "old_ftz", "jaxlib": with_old_env.jaxlib, "options": {"xla_cpu_ftz": False}}]}
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(json.dumps(spec))
    assert cli.main(["run", str(campaign), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"xla-sentinel: error: spec.targets[1].options (old_ftz): jaxlib {with_old_env.jaxlib} "
                   "does not take them: INVALID_ARGUMENT: No such compile option: 'xla_cpu_ftz'"]
    assert not (tmp_path / "out" / "campaign.sqlite").exists()
    known = parse_spec({"targets": ["default", {"name": "old_o0", "jaxlib": with_old_env.jaxlib,
                                                "options": {"xla_backend_optimization_level": 0}}]})
    assert release_option_errors(known.targets) == []
