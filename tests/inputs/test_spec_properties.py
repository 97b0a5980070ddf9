"""The campaign schema against inputs drawn from the schema itself (tests/inputs/specgen.py):
every invalid value of every field is refused with one line naming the field and why, and
every valid spec round-trips through to_dict."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xla_sentinel.spec import campaign
from xla_sentinel.spec.campaign import SpecError, parse_spec

from inputs import specgen

BOUNDED = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
INVALID = specgen.invalid_cases()


def test_every_field_has_a_strategy() -> None:
    nested = specgen.NESTED
    missing = [f"{cls.__name__}.{name}" for cls, name in specgen.schema_fields()
               if (cls, name) not in specgen.VALUES and (cls, name) not in nested]
    assert not missing, f"add valid values for {missing} to tests/inputs/specgen.py"


@pytest.mark.parametrize(("spec", "path", "why"), INVALID, ids=[f"{p}:{w}" for _, p, w in INVALID])
def test_every_invalid_value_is_refused_naming_the_field(spec: dict, path: str, why: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec(spec)
    message = str(e.value)
    assert message.startswith(path.replace("spec.tolerances.f32.k", "spec.tolerances.f32")), (path, message)
    assert why in message and "\n" not in message, (why, message)


@BOUNDED
@given(specgen.valid_specs())
def test_every_valid_spec_round_trips(data: dict) -> None:
    spec = parse_spec(data)
    again = parse_spec(spec.to_dict())
    assert again == spec
    # YAML is how specs arrive: the same mapping through a file parses to the same value.
    assert parse_spec(yaml.safe_load(yaml.safe_dump(spec.to_dict()))) == spec


@BOUNDED
@given(specgen.valid_specs(crd=True))
def test_the_resource_form_parses_too(data: dict) -> None:
    assert all(isinstance(t, dict) for t in data.get("targets", []))
    parse_spec(data)


@BOUNDED
@given(st.integers(max_value=-1), st.integers(min_value=campaign.INT64_MAX + 1))
def test_seeds_outside_int64_nonnegative_are_refused(negative: int, huge: int) -> None:
    for seed in (negative, huge):
        with pytest.raises(SpecError, match=r"^spec\.seed: must be >= 0"):
            parse_spec({"seed": seed})


@BOUNDED
@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not 0 <= x <= 1 or math.isnan(x)))
def test_probabilities_outside_0_1_are_refused(p: float) -> None:
    with pytest.raises(SpecError, match=r"^spec\.generator\.specialValues: must be in \[0, 1\]"):
        parse_spec({"generator": {"specialValues": p}})


@BOUNDED
@given(st.text(min_size=1, max_size=12).filter(lambda s: s not in campaign.PRESETS))
def test_a_target_named_outside_the_presets_needs_options(name: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec({"targets": [name], "references": ["f64_eager"]})
    assert str(e.value).startswith("spec.targets[0].name: ") and "\n" not in str(e.value)


@pytest.mark.parametrize(("spec", "path", "why"), [INVALID[i] for i in (0, len(INVALID) // 2, -1)])
def test_run_refuses_invalid_specs_with_exit_2_and_one_line(tmp_path: Path, spec: dict, path: str,
                                                            why: str) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    r = subprocess.run([sys.executable, "-m", "xla_sentinel.cli.main", "run", "c.yaml", "--out", "out", "--quiet"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"xla-sentinel: error: {path}"), r.stderr
    assert not (tmp_path / "out").exists()
