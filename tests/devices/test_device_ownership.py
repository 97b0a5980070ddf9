"""Which process opens an accelerator: the ownership rule as pure functions, and how many
accelerator processes a worker pod's engine starts.

No accelerator exists on this machine: these tests hold the rule and the process plan the
engine builds from it (Worker objects start no process until asked); test_device_owner_campaign.py
runs it for real with the CPU standing in for an exclusive device.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xla_sentinel.judge.assess import Slot, device_owners
from xla_sentinel.judge.targets import Target, resolve
from xla_sentinel.spec.campaign import SpecError, load_campaign
from xla_sentinel.worker import devices
from xla_sentinel.worker.client import DeviceOwner, WorkerDied, distinct
from xla_sentinel.worker.protocol import Ping
from xla_sentinel_operator import desired

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(("platform", "kind"), [
    ("tpu", "device_owner"), ("gpu", "device_owner"), ("cuda", "device_owner"), ("rocm", "device_owner"),
    ("cpu", "per_slot"), (None, "per_slot"), ("", "per_slot"),
])
def test_every_platform_but_the_cpu_has_one_owner(platform: str | None, kind: str) -> None:
    assert devices.process_kind(platform, devices.exclusive_platforms({})) == kind


def test_the_test_knob_adds_platforms_and_only_when_set() -> None:
    assert devices.exclusive_platforms({}) == devices.ACCELERATORS
    knob = devices.exclusive_platforms({devices.TEST_EXCLUSIVE_ENV: " cpu, "})
    assert knob == devices.ACCELERATORS | {"cpu"}
    assert devices.process_kind("cpu", knob) == "device_owner"


def test_a_platform_that_is_no_name_is_refused() -> None:
    with pytest.raises(TypeError, match="platform"):
        devices.process_kind(3)  # type: ignore[arg-type]


def test_a_gpu_owner_does_not_preallocate_unless_told_how() -> None:
    assert devices.owner_environment("gpu", {}) == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert devices.owner_environment("cuda", {}) == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    # An operator's own sizing wins: a capped preallocation, or preallocation asked for.
    assert devices.owner_environment("gpu", {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3"}) == {}
    assert devices.owner_environment("gpu", {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}) == {}
    # libtpu holds the chips whole; the CPU (even under the test knob) has nothing to size.
    assert devices.owner_environment("tpu", {}) == {}
    assert devices.owner_environment("cpu", {devices.TEST_EXCLUSIVE_ENV: "cpu"}) == {}


def test_a_worker_that_owns_nothing_sees_no_accelerator() -> None:
    env = devices.held_off_environment()
    assert env["JAX_PLATFORMS"] == "cpu"
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["HIP_VISIBLE_DEVICES"] == ""


TPU = [Target("default", platform="tpu"), Target("O0", {"xla_backend_optimization_level": 0}, "tpu")]


def _accelerator_processes(slots: list[Slot]) -> list[object]:
    workers = distinct([w for s in slots for w in s.workers()])
    return [w for w in workers if devices.process_kind(w.platform, devices.ACCELERATORS) == "device_owner"]


def test_slots_share_one_owner_per_platform_and_keep_their_cpu_workers() -> None:
    targets = [*TPU, Target("cpu_default")]
    owners = device_owners(targets, ["plugin.py:transform"], Path("/logs"), devices.ACCELERATORS)
    slots = [Slot(i, targets, ["plugin.py:transform"], Path("/logs"), owners=owners) for i in range(16)]
    owner = owners["tpu"]
    assert isinstance(owner, DeviceOwner) and owner.name == "owner-tpu"
    assert owner.plugins == ("plugin.py:transform",) and owner.log_path == Path("/logs/owner-tpu.log")
    assert all(s.targets["default"] is owner and s.targets["O0"] is owner for s in slots)
    assert len(_accelerator_processes(slots)) == 1
    # Each slot keeps its own program worker and CPU target worker: they stay parallel.
    assert len({id(s.programs) for s in slots}) == 16
    assert len({id(s.targets["cpu_default"]) for s in slots}) == 16
    assert len(slots[0].workers()) == 3  # programs, cpu_default, the owner once


def test_a_slot_alone_makes_its_own_owner() -> None:
    slot = Slot("check", [*TPU, Target("g", platform="gpu")], [], None)
    assert slot.targets["default"] is slot.targets["O0"] is slot.owners["tpu"]
    assert slot.targets["g"] is slot.owners["gpu"] and slot.owners["gpu"] is not slot.owners["tpu"]


def test_targets_of_one_device_under_two_interpreters_are_refused() -> None:
    other = Target("old", platform="tpu", python="/opt/jaxlib-0.9/bin/python")
    with pytest.raises(SpecError, match="targets 'default' and 'old': one process per host owns the tpu devices"):
        device_owners([TPU[0], other], [], None)


@pytest.mark.parametrize(("example", "platform", "before"), [
    ("campaign-tpu-v6e.yaml", "tpu", 80), ("campaign-gpu.yaml", "gpu", 12)])
def test_a_worker_pod_starts_one_process_per_accelerator(example: str, platform: str,
                                                        before: int | None) -> None:
    """The pod sizing (operator desired.processes: one engine slot per requested CPU) and
    the engine's process plan for those slots: one accelerator process per pod, however
    many slots. The TPU example used to start 80 (40 CPUs x 2 TPU targets)."""
    campaign = load_campaign(EXAMPLES / example)
    spec = campaign.spec
    slots_per_pod = desired.processes(spec)
    targets = [resolve(t) for t in spec.targets]
    on_device = [t for t in targets if t.platform == platform]
    assert on_device and slots_per_pod >= 1
    if before is not None:
        assert slots_per_pod * len(on_device) == before
    owners = device_owners(targets, [], None)
    slots = [Slot(i, targets, [], None, owners=owners) for i in range(slots_per_pod)]
    owning = _accelerator_processes(slots)
    assert [w.platform for w in owning] == [platform]


def test_a_request_that_waited_while_the_campaign_stopped_starts_no_owner() -> None:
    owner = DeviceOwner("owner-tpu", platform="tpu")
    owner.close()
    with pytest.raises(WorkerDied) as died:
        owner.call(Ping(), 5)
    assert died.value.log_tail == "owner-tpu: closed"
    assert owner._proc is None  # no process was started for it
