"""The Argo CD health check (deploy/argocd/health.lua) on FuzzCampaign statuses, run in a
real Lua runtime with the sandbox Argo CD gives custom checks (no io, os, require)."""

from __future__ import annotations

from typing import Any

import lupa
import pytest
from tools import REPO_ROOT
from xla_sentinel_operator import rollup

SCRIPT = (REPO_ROOT / "deploy" / "argocd" / "health.lua").read_text()


def health(obj: dict[str, Any]) -> tuple[str, str]:
    lua = lupa.LuaRuntime(register_eval=False, register_builtins=False)
    for unsafe in ("io", "os", "require", "dofile", "loadfile", "package", "debug"):
        lua.globals()[unsafe] = None
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(SCRIPT)
    return result["status"], result["message"]


def campaign(status: dict[str, Any] | None, generation: int = 1, **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "xlasentinel.dev/v1alpha1", "kind": "FuzzCampaign",
                           "metadata": {"name": "nightly", "generation": generation},
                           "spec": {"workers": 2, **spec}}
    if status is not None:
        obj["status"] = status
    return obj


def cond(kind: str, status: str, message: str = "", generation: int = 1) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": kind, "message": message,
            "observedGeneration": generation}


def test_new_campaign_without_status_is_progressing() -> None:
    assert health(campaign(None)) == ("Progressing", "Waiting for the operator to pick up the campaign")


def test_running_and_ready_is_healthy_even_with_signatures() -> None:
    status = {"phase": "Running", "observedGeneration": 1, "signatures": 3,
              "conditions": [cond("Ready", "True", "8/8 workers reporting"),
                             cond("Reconciling", "False"), cond("Stalled", "False")]}
    assert health(campaign(status)) == ("Healthy", "8/8 workers reporting")


def test_completed_campaign_is_healthy() -> None:
    status = {"phase": "Completed", "observedGeneration": 1,
              "conditions": [cond("Ready", "True", "Budget spent: 10000 programs")]}
    assert health(campaign(status)) == ("Healthy", "Budget spent: 10000 programs")


def test_scaling_up_workers_is_progressing() -> None:
    status = {"phase": "Running", "observedGeneration": 1,
              "conditions": [cond("Ready", "False", "2/8 workers reporting"),
                             cond("Reconciling", "True", "Creating 6 workers")]}
    assert health(campaign(status)) == ("Progressing", "Creating 6 workers")


def test_stalled_campaign_is_degraded_with_the_operator_message() -> None:
    status = {"phase": "Stalled", "observedGeneration": 1,
              "conditions": [cond("Ready", "False"),
                             cond("Stalled", "True", "Workers failed 5 times: ImagePullBackOff")]}
    assert health(campaign(status)) == ("Degraded", "Workers failed 5 times: ImagePullBackOff")


def test_suspended_campaign_is_suspended() -> None:
    status = {"phase": "Suspended", "observedGeneration": 1,
              "conditions": [cond("Ready", "False", "Suspended")]}
    assert health(campaign(status, suspend=True))[0] == "Suspended"


def test_spec_change_not_yet_observed_is_progressing() -> None:
    # A Ready condition from generation 1 says nothing about the edited spec (generation 2).
    status = {"phase": "Running", "observedGeneration": 1, "conditions": [cond("Ready", "True")]}
    assert health(campaign(status, generation=2)) == (
        "Progressing", "Waiting for the operator to observe generation 2")


def test_stalled_wins_over_suspend() -> None:
    # A campaign that cannot run must show as broken even when someone also paused it.
    status = {"phase": "Stalled", "observedGeneration": 1, "conditions": [cond("Stalled", "True", "quota")]}
    assert health(campaign(status, suspend=True)) == ("Degraded", "quota")


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_phase_without_conditions_is_progressing(phase: str) -> None:
    assert health(campaign({"phase": phase})) == ("Progressing", f"Campaign is {phase}")


def test_a_campaign_waiting_for_kueue_is_suspended_not_progressing() -> None:
    # Waiting for quota can last days: the app must not stay Progressing on it.
    status = {"phase": "Pending", "observedGeneration": 1,
              "conditions": [cond("Ready", "False", "waiting for Kueue to admit the workers (queue q)"),
                             cond("Reconciling", "False"), cond("Stalled", "False")]}
    status["conditions"][0]["reason"] = "Queued"
    assert health(campaign(status, queueName="q")) == (
        "Suspended", "waiting for Kueue to admit the workers (queue q)")


@pytest.mark.parametrize("phase,reason,suspend,expected", [
    ("Pending", "CreatingWorkers", False, "Progressing"),
    ("Pending", "Queued", False, "Suspended"),
    ("Pending", "WaitingForWorkers", False, "Progressing"),
    ("Running", "Running", False, "Healthy"),
    ("Running", "RollingWorkers", False, "Progressing"),
    ("Completed", "BudgetSpent", False, "Healthy"),
    ("Suspended", "Suspended", True, "Suspended"),
    ("Stalled", "WorkersFailing", False, "Degraded"),
])
def test_statuses_the_operator_writes_map_to_argo_health(
        phase: str, reason: str, suspend: bool, expected: str) -> None:
    written = rollup.Health(phase, reason, f"{reason} message")
    status = {"phase": phase, "observedGeneration": 3,
              "conditions": rollup.conditions(written, 3, [], "2026-11-29T19:00:00Z")}
    state, message = health(campaign(status, generation=3, suspend=suspend))
    assert state == expected
    if phase != "Suspended":  # the suspended message is the check's own
        assert message == f"{reason} message"
