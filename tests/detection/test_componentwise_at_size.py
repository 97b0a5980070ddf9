"""Componentwise detection at size (issue 36): one element wrong among 131,072 is caught
whatever the normwise error, through the whole judging path: a hand-built program (a
graph, so the noise model's samples reach the oracle), compiled by real XLA in worker
processes under an injected fault that changes exactly one element (xla/faults
concat_off_by_one: the first element of a concatenate's second operand is the first
operand's last), and the same program without the fault passes.

tanh(x) ++ tanh(y), x and y 65,536 f32 each in [0.5, 1.5]: the wrong element holds
tanh(x[-1]) where tanh(y[0]) belongs. With y[0] = x[-1] + 5e-4 it is 2.1e-4 off: the
normwise error is 7.8e-7, under the f32 threshold k * u = 1.9e-6, so only the
componentwise rule sees it, with a bound from the other configurations and the noise
samples (1e-5 or less). With y[0] = -x[-1] it is 1.5 off and the normwise rule flags it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from xla_sentinel.campaign.check import check_program
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.core.program import Program
from xla_sentinel.programs import evaluate
from xla_sentinel.xla.faults import fault_path

N = 65_536
GRAPH = Graph(
    values=[Value([N], "f32", False, input=0), Value([N], "f32", False, input=1),
            Value([N], "f32", True, node=0), Value([N], "f32", True, node=1),
            Value([2 * N], "f32", True, node=2)],
    nodes=[Node("tanh", [0], {}), Node("tanh", [1], {}), Node("concatenate", [2, 3], {"axis": 0})],
    outputs=[4])


def _program(folder: Path, y0: float) -> Path:
    rng = np.random.default_rng(36)
    x = rng.uniform(0.5, 1.5, N).astype(np.float32)
    y = rng.uniform(0.5, 1.5, N).astype(np.float32)
    x[-1], y[0] = 1.0, y0
    Program(folder.name, evaluate.lower_text(GRAPH), [x, y], ["f32", "f32"], graph=GRAPH).save(folder)
    return folder


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("campaign") / "campaign.yaml"
    # The campaign's default references (f64_numpy, its XLA cross-checks, eager).
    path.write_text(yaml.safe_dump({"targets": ["default"]}))
    return path


def test_one_element_slightly_off_among_131072_is_a_componentwise_mismatch(tmp_path: Path, campaign: Path) -> None:
    folder = _program(tmp_path / "near", 1.0005)
    (verdict,) = check_program(folder, campaign, [str(fault_path("concat_off_by_one"))])
    assert verdict["verdict"] == "mismatch", verdict
    ev = verdict["evidence"]
    assert ev["reason"] == "componentwise" and ev["flagged_elements"] == 1, ev
    assert ev["elements"] == 2 * N
    # Normwise it passes: the norm dilutes one element by sqrt(131072) = 362.
    assert ev["error"] < ev["threshold"] < 1e-5
    (wrong,) = ev["wrong"]
    assert wrong["index"] == [N] and abs(wrong["got"] - np.tanh(1.0)) < 1e-6
    assert abs(wrong["got"] - wrong["want"]) > 10 * wrong["bound"]
    assert ev["noise"] > 0  # the bound was widened by the noise model's samples


def test_one_element_far_off_is_flagged_normwise(tmp_path: Path, campaign: Path) -> None:
    folder = _program(tmp_path / "far", -1.0)
    (verdict,) = check_program(folder, campaign, [str(fault_path("concat_off_by_one"))])
    assert verdict["verdict"] == "mismatch" and "reason" not in verdict["evidence"], verdict
    assert verdict["evidence"]["where"] == [N] and verdict["evidence"]["max_abs"] > 1.0


def test_the_program_without_the_fault_passes(tmp_path: Path, campaign: Path) -> None:
    (verdict,) = check_program(_program(tmp_path / "clean", 1.0005), campaign, [])
    assert verdict["verdict"] == "pass", verdict
