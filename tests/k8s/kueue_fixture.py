"""The `kueue` fixture: Kueue's real controller manager and webhooks for the test's namespace
(tests/controlplane/kueue.py), beside the control plane of conftest.py. A test module takes
it with `from .kueue_fixture import kueue_controller` (registered under the name `kueue`);
conftest.py's `jobset` fixture is its model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import kueue as kueue_cp
from controlplane.cluster import ControlPlane
from controlplane.kit import Api
from controlplane.kueue import WORKLOADS, KueueController

skip_unbuilt = pytest.mark.skipif(not kueue_cp.built(),
                                  reason="Kueue not built: run `make kueue`")


@pytest.fixture(name="kueue")
def kueue_controller(control_plane: ControlPlane, ns: str) -> Iterator[KueueController]:
    """Kueue for `ns`; what the test makes through `kueue.create`, the namespace's queued
    Jobs and their Workloads are removed after it. A test names `kueue` before
    `start_operator`, so the operator stops first (pytest tears fixtures down in reverse):
    a running operator would make its worker Jobs again, and Kueue their Workloads."""
    controller = KueueController(control_plane, [ns]).start()
    yield controller
    controller.stop()


def workload_for(api: Api, ns: str, kind: str, name: str) -> dict[str, Any] | None:
    """The Workload Kueue made for the `kind` (Job, JobSet) named `name`: it owns it."""
    return next((w for w in api.all(WORKLOADS, ns)
                 if any(o["kind"] == kind and o["name"] == name
                        for o in w["metadata"].get("ownerReferences") or [])), None)
