"""A regression range found on an injected version difference, and fixes verified.

What is simulated: the "releases" 0.90.0 .. 0.96.0 are fake environments whose interpreter
is this one (the current jaxlib); from 0.94.0 on, each registers the odd_tail_multiply
fault (runners/xla_sentinel/xla/faults/) when its interpreter starts, and 0.93.0's interpreter exits at once
(an environment that cannot tell). What is real: the campaign, the workers under those
interpreters, the modules crossing as VHLO portable artifacts, every compile and the search.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from xla_sentinel.bisect.versions import bisect_versions
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.cli import main as cli
from xla_sentinel.core import versions
from xla_sentinel.core.program import save_arrays
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.storage.store import Store

from .conftest import fake_release

RELEASES = ("0.90.0", "0.91.0", "0.92.0", "0.93.0", "0.94.0", "0.95.0", "0.96.0")
FIRST_BAD = "0.94.0"
BROKEN = "0.93.0"


@pytest.fixture
def fake_envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "envs"
    for v in RELEASES:
        faulty = versions.parse_version(v) >= versions.parse_version(FIRST_BAD)
        fake_release(root, v, fault="odd_tail_multiply.py" if faulty else None, broken=v == BROKEN)
    monkeypatch.setenv(versions.ENVS_VARIABLE, str(root))
    return root


@pytest.fixture
def odd_trace(tmp_path: Path) -> Path:
    """x * y + 1 over f32[4, 7]: a multiply in a loop fusion whose minor dimension is odd,
    where the fault leaves the last element of each row unmultiplied."""
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(1, 2, (4, 7)).astype(np.float32) for _ in range(2))
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "module.mlir").write_text(jax.jit(lambda a, b: a * b + jnp.float32(1)).lower(x, y).as_text())
    save_arrays(folder / "inputs.npz", [x, y], ["f32", "f32"])
    return folder


def _finding(out: Path, target: str) -> Path:
    for p in out.glob("findings/*/finding.json"):
        if json.loads(p.read_text())["target"] == target:
            return p.parent
    raise AssertionError(f"no finding of {target} in {out}")


def test_the_first_release_with_the_fault_is_found_and_fixes_are_verified(
        fake_envs: Path, odd_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = parse_spec({"traces": [str(odd_trace)],
                       "targets": ["default", {"name": "faulty",
                                               "python": str(fake_envs / "jaxlib-0.95.0/bin/python")}],
                       "references": ["f64_numpy"], "budget": {"programs": 1}, "workers": 1,
                       "bisect": {"enabled": False}})
    summary = run_campaign(spec, tmp_path / "out")
    assert summary["findings"] == {"mismatch": 1}  # the faulty "release", not default
    folder = _finding(tmp_path / "out", "faulty")

    result = bisect_versions(folder, f"{RELEASES[0]}..{RELEASES[-1]}")
    assert (result["status"], result["introducedIn"]) == ("found", FIRST_BAD)
    # 0.93.0 cannot tell (its interpreter exits), so the newest good release is 0.92.0.
    assert result["lastGood"] == "0.92.0"
    probes = {p["jaxlib"]: p for p in result["probes"]}
    assert probes[BROKEN]["shows"] is None and probes[BROKEN]["verdict"] == "no_worker"
    assert probes[FIRST_BAD]["shows"] is True and "normwise error" in probes[FIRST_BAD]["detail"]
    assert probes[RELEASES[0]]["shows"] is False
    assert len(result["probes"]) <= 5  # ends, 0.93.0 skipped, then log2 of what is left
    recorded = json.loads((folder / "finding.json").read_text())["versions"]["bisection"]
    assert (recorded["introducedIn"], recorded["lastGood"]) == (FIRST_BAD, "0.92.0")
    # The campaign's store records it in the finding's signature, which triage lists.
    signature = json.loads((folder / "finding.json").read_text())["signature"]
    assert result["store"]["signature"] == signature and result["store"]["recorded"]
    assert _stored(tmp_path / "out", signature)[:2] == (FIRST_BAD, "0.92.0")

    # A fix verified, and one not: the command line exits 0 where the bug does not show
    # on the release asked about, 1 where it still does.
    assert cli.main(["bisect", "--versions", "0.91.0", str(folder)]) == 0
    assert _stored(tmp_path / "out", signature) == (FIRST_BAD, "0.92.0", "verified", "0.91.0")
    assert cli.main(["bisect", "--versions", "0.96.0", str(folder)]) == 1
    recorded = json.loads((folder / "finding.json").read_text())["versions"]
    assert (recorded["verification"]["verify"], recorded["verification"]["status"]) == (
        "0.96.0", "still_failing")
    assert recorded["bisection"]["introducedIn"] == FIRST_BAD  # kept beside it
    assert _stored(tmp_path / "out", signature) == (FIRST_BAD, "0.92.0", "still_failing", "0.96.0")
    capsys.readouterr()
    assert cli.main(["triage", str(tmp_path / "out")]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[-3:] == ["introduced_in", "last_good", "verification"]
    (row,) = [r for r in rows if r.startswith(signature)]
    assert row.split()[-5:] == [FIRST_BAD, "0.92.0", "still_failing", "on", "0.96.0"]


def _stored(out: Path, signature: str) -> tuple[str | None, ...]:
    store = Store(out / "campaign.sqlite")
    try:
        (sig,) = [s for s in store.signatures() if s.id == signature]
    finally:
        store.close()
    return sig.introduced_in, sig.last_good, sig.verification, sig.verification_jaxlib


def test_a_range_without_an_environment_is_refused_naming_it(
        fake_envs: Path, odd_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "finding"
    (folder / "program").mkdir(parents=True)
    for name in ("module.mlir", "inputs.npz"):
        (folder / "program" / name).write_bytes((odd_trace / name).read_bytes())
    save_arrays(folder / "expected.npz", [np.zeros((4, 7))], ["f64"])
    (folder / "finding.json").write_text(json.dumps({
        "format": 1, "id": "x", "verdict": "mismatch", "target": "default",
        "evidence": {"output": 0, "threshold": 1e-6, "target_options": {}}}))
    assert cli.main(["bisect", "--versions", "0.80.0..0.96.0", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "no environment for jaxlib 0.80.0" in err and "jaxlib-0.80.0" in err
    assert "make version-envs VERSION_ENVS=0.80.0" in err
    assert cli.main(["bisect", "--versions", "0.96.0..0.90.0", str(folder)]) == 2
    assert "0.96.0 is not older than 0.90.0" in capsys.readouterr().err
    (folder / "finding.json").write_text("{")
    assert cli.main(["bisect", "--versions", "0.90.0..0.96.0", str(folder)]) == 2
    assert "finding.json: unreadable JSON" in capsys.readouterr().err


def test_a_repro_bundle_is_bisected_as_its_repro_py_judges_it(
        fake_envs: Path, odd_trace: Path, tmp_path: Path) -> None:
    """A bundle as bundle.py writes one (repro.py from repro_template.render, the module,
    inputs and float64 expectations), bisected over the simulated releases; the result goes
    to its versions.json."""
    from xla_sentinel.bisect import repro_template
    from xla_sentinel.core.program import load_arrays

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for name in ("module.mlir", "inputs.npz"):
        (bundle / name).write_bytes((odd_trace / name).read_bytes())
    x, y = load_arrays(odd_trace / "inputs.npz", ["f32", "f32"])
    save_arrays(bundle / "expected.npz", [x.astype(np.float64) * y.astype(np.float64) + 1], ["f64"])
    (bundle / "repro.py").write_text(repro_template.render(
        "bundle", "wrong_result", {}, [], ["f32", "f32"],
        [{"dtype": "f32", "float": True, "threshold": 32 * 2.0**-24}]))
    result = bisect_versions(bundle, "0.90.0..0.96.0")
    assert (result["status"], result["introducedIn"], result["lastGood"]) == ("found", FIRST_BAD, "0.92.0")
    saved = json.loads((bundle / "versions.json").read_text())["bisection"]
    assert saved["introducedIn"] == FIRST_BAD


def test_a_campaign_with_bisect_versions_records_the_range_in_its_signatures(
        fake_envs: Path, odd_trace: Path, tmp_path: Path) -> None:
    """spec.bisect.versions: each bisection the campaign makes also searches the releases,
    and the finding's signature (the refined one when the bisector localized it) keeps it."""
    spec = parse_spec({"traces": [str(odd_trace)],
                       "targets": ["default", {"name": "faulty",
                                               "python": str(fake_envs / "jaxlib-0.95.0/bin/python")}],
                       "references": ["f64_numpy"], "budget": {"programs": 1}, "workers": 1,
                       "bisect": {"versions": f"{RELEASES[0]}..{RELEASES[-1]}"}})
    run_campaign(spec, tmp_path / "out")
    folder = _finding(tmp_path / "out", "faulty")
    record = json.loads((folder / "finding.json").read_text())
    assert record["versions"]["bisection"]["status"] == "found"
    assert _stored(tmp_path / "out", record["signature"])[:2] == (FIRST_BAD, "0.92.0")
