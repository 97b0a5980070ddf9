"""Targets on an accelerator (`platform: gpu`/`tpu`): their worker alone sees the device and
compiles for it; on a machine without that platform the campaign says so once and goes on
with the other targets. This machine has no GPU (a GKE GPU node cannot exist here): what is
tested is the absent case, and that a target's platform reaches its compile at all (before,
a gpu target compiled and ran on the CPU without a word)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel.worker.client import Worker, wait_ready
from xla_sentinel.worker.protocol import Run

MODULE = """module @m {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"""


def _spec(targets: list) -> object:
    return parse_spec({"seed": 3, "generator": {"version": 1, "minOps": 2, "maxOps": 4}, "targets": targets,
                       "budget": {"programs": 2}, "workers": 1, "bisect": {"enabled": False}})


def _gpu_here() -> bool:
    import numpy as np

    worker = Worker("probe-gpu", platform="gpu")
    try:
        wait_ready([worker], timeout=300)
        worker.call(Run(MODULE, [np.ones(4, np.float32)], {}, platform="gpu"), 300)
        return True
    except Exception as e:  # noqa: BLE001 - RequestFailed naming the missing backend
        assert "gpu" in str(e).lower() or "backend" in str(e).lower(), e
        return False
    finally:
        worker.close()


@pytest.fixture(scope="module")
def gpu_here() -> bool:
    return _gpu_here()


def test_a_target_on_a_platform_this_machine_lacks_is_left_out_and_said_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gpu_here: bool) -> None:
    summary = run_campaign(_spec(["default", {"name": "gpu_default", "platform": "gpu"}]), tmp_path)
    assert summary["programs"] == 2
    said = [line for line in capsys.readouterr().err.splitlines() if "target gpu_default" in line]
    if gpu_here:
        assert summary["unavailable_targets"] == {} and not said
        assert [t["name"] for t in summary["targets"]] == ["default", "gpu_default"]
        return
    assert list(summary["unavailable_targets"]) == ["gpu_default"]
    assert summary["unavailable_targets"]["gpu_default"].startswith("platform gpu is not available here")
    assert [t["name"] for t in summary["targets"]] == ["default"]
    assert summary["program_status"] == {"judged": 2}
    assert len(said) == 1 and said[0].endswith("the campaign goes on without it")


def test_a_campaign_of_only_unavailable_targets_is_refused(tmp_path: Path, gpu_here: bool) -> None:
    if gpu_here:
        pytest.skip("this machine has a GPU: the gpu target runs")
    with pytest.raises(SpecError, match="spec.targets: none can run on this machine"):
        run_campaign(_spec([{"name": "gpu_default", "platform": "gpu"}]), tmp_path)
    assert not (tmp_path / "campaign.sqlite").exists()
