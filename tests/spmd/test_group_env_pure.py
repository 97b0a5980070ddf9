"""A multi-host group's host process: its command and environment for each platform
(worker/hosts.py GroupEnv.launch, worker/host_link.py host_environment), the layout's name,
and which of a host's devices the group takes (hosts.group_devices). Pure: nothing is
started. The CPU environment is written out as it was before TPU hosts existed, so a
change to it fails here. No TPU here, and none is pretended: the TPU case is the
composition only (what a TPU slice's host process would be given), and the device
selection is checked on (id, process index) pairs, as a slice's jax.devices() gives them
(4 chips per VM, ids by chip, not by process)."""

from __future__ import annotations

import json
import sys

import pytest
from xla_sentinel.campaign.multihost import LAYOUT_PLATFORM_ENV, layout
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.worker.host_link import PLATFORM_ENV, RemoteHosts, host_environment
from xla_sentinel.worker.hosts import GroupEnv, HostGroup, Layout, group_devices

HOST_ARGV = [sys.executable, "-m", "xla_sentinel.worker.host"]

# A driver's (or a pod's) own environment: a dump flag and a device count of its own, a
# platform of its own (a TPU pod's), and GKE's slice variables.
BASE = {"PATH": "/usr/bin", "HOME": "/root",
        "XLA_FLAGS": "--xla_dump_to=/tmp/d --xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "tpu", "TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "h0,h1",
        "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo"}


def test_a_cpu_host_gets_todays_environment_exactly() -> None:
    group = GroupEnv(1, 2, "127.0.0.1:4321", 2, 10, ("inject.py:run",))

    argv, env = group.launch(BASE)

    assert argv == HOST_ARGV
    assert env == {
        "PATH": "/usr/bin", "HOME": "/root",
        "XLA_FLAGS": "--xla_dump_to=/tmp/d --xla_force_host_platform_device_count=2",
        "JAX_PLATFORMS": "cpu", "TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "h0,h1",
        "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
        "XLA_SENTINEL_HOST": "1", "XLA_SENTINEL_HOSTS": "2", "XLA_SENTINEL_COORDINATOR": "127.0.0.1:4321",
        "XLA_SENTINEL_HOST_DEVICES": "2", "XLA_SENTINEL_HEARTBEAT_S": "10",
        "XLA_SENTINEL_HOST_PLUGINS": json.dumps(["inject.py:run"]), "XLA_SENTINEL_COORDINATOR_BIND": ""}
    assert PLATFORM_ENV not in env  # the CPU's group environment gained nothing
    # A driver with no flags of its own: the host's virtual devices alone.
    _, bare = group.launch({"PATH": "/usr/bin"})
    assert bare["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert bare["JAX_PLATFORMS"] == "cpu"


def test_a_tpu_host_gets_no_cpu_setting_and_keeps_gkes_slice_variables() -> None:
    group = GroupEnv(1, 2, "h0:8482", 4, 10, (), "", "tpu")

    argv, env = group.launch(BASE)

    assert argv == HOST_ARGV
    assert env == {
        "PATH": "/usr/bin", "HOME": "/root",
        "XLA_FLAGS": "--xla_dump_to=/tmp/d",  # the pod's own flags, no forced device count
        "JAX_PLATFORMS": "tpu",  # no host process falls back to the VM's CPU
        "TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "h0,h1",  # libtpu reads the slice here
        "XLA_SENTINEL_HOST": "1", "XLA_SENTINEL_HOSTS": "2", "XLA_SENTINEL_COORDINATOR": "h0:8482",
        "XLA_SENTINEL_HOST_DEVICES": "4", "XLA_SENTINEL_HEARTBEAT_S": "10",
        "XLA_SENTINEL_HOST_PLUGINS": "[]", "XLA_SENTINEL_COORDINATOR_BIND": "",
        PLATFORM_ENV: "tpu"}
    # Only a forced count in XLA_FLAGS: no XLA_FLAGS at all, and a CPU pod's
    # JAX_PLATFORMS=cpu does not hold.
    _, env = group.launch({"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"})
    assert "XLA_FLAGS" not in env and env["JAX_PLATFORMS"] == "tpu"


@pytest.mark.parametrize("platform", ["cpu", "tpu"])
def test_a_remote_hosts_supervisor_composes_what_the_driver_would(platform: str) -> None:
    """host_link._serve_once builds its host's environment from the start frame's group
    variables (the platform among them) and its pod's own: the same as a local launch."""
    group = GroupEnv(1, 2, "10.0.0.5:8482", 4, 10, (), "", platform)
    frame_env = group.environment()

    supervised = host_environment(frame_env.get(PLATFORM_ENV, "cpu"), BASE, frame_env, 4)

    assert supervised == group.launch(BASE)[1]
    assert GroupEnv.from_environ(supervised) == group


def test_the_group_environment_reads_back_and_refuses_an_unknown_platform() -> None:
    for group in (GroupEnv(0, 4, "a:1", 2, 7, ("p.py",), "0.0.0.0:1"),
                  GroupEnv(3, 4, "a:1", 1, 10, (), "", "tpu")):
        assert GroupEnv.from_environ(group.environment()) == group
    env = {**GroupEnv(0, 2, "a:1", 2).environment(), PLATFORM_ENV: "gpu"}
    with pytest.raises(ValueError, match=f"{PLATFORM_ENV}='gpu'"):
        GroupEnv.from_environ(env)
    with pytest.raises(ValueError, match="host platform 'gpu'"):
        host_environment("gpu", {}, {}, 2)


def test_the_layouts_name_says_its_platform() -> None:
    assert Layout(2, 2) == Layout(2, 2, "cpu")
    assert (Layout(2, 2).name, Layout(2, 2).describe()) == ("hosts2x2", "2 processes x 2 devices")
    tpu = Layout(2, 4, "tpu")
    assert (tpu.name, tpu.describe(), tpu.devices) == ("slice2x4", "2 TPU hosts x 4 chips", 8)


def test_the_campaigns_layout_takes_the_platform_its_pod_names() -> None:
    spec = parse_spec({"accelerator": {"type": "cpu", "hosts": 2}, "generator": {"devices": 8}})

    assert layout(spec, {}) == Layout(2, 4, "cpu")
    assert layout(spec, {LAYOUT_PLATFORM_ENV: "tpu"}) == Layout(2, 4, "tpu")
    with pytest.raises(ValueError, match=LAYOUT_PLATFORM_ENV):
        layout(spec, {LAYOUT_PLATFORM_ENV: "cuda"})


def test_a_tpu_group_never_runs_its_hosts_on_loopback() -> None:
    with pytest.raises(ValueError, match="slice2x4: a tpu group's hosts run in their own pods"):
        HostGroup(Layout(2, 4, "tpu"))
    remote = RemoteHosts("127.0.0.1:0", "127.0.0.1:8482", "127.0.0.1:8482", "t")
    group = HostGroup(Layout(2, 4, "tpu"), remote=remote)  # no process yet: start() forms it
    try:
        assert group.name == "slice2x4" and group.listen_port
    finally:
        group.close()


def test_a_group_takes_each_hosts_first_devices_in_jaxs_order() -> None:
    # The CPU: each process has exactly its forced count, numbered from 2048 x its index.
    cpu = [(0, 0), (1, 0), (2048, 1), (2049, 1)]
    assert group_devices(cpu, 2, 2) == [0, 1, 2048, 2049]
    # A 2-VM slice of 4 chips each, ids by chip and interleaved across the VMs: 2 per host.
    tpu = [(0, 0), (1, 0), (2, 1), (3, 1), (4, 0), (5, 0), (6, 1), (7, 1)]
    assert group_devices(tpu, 2, 2) == [0, 1, 2, 3]
    assert group_devices(tpu, 2, 4) == [0, 1, 2, 3, 4, 5, 6, 7]
    with pytest.raises(ValueError, match="process 0 has 4 devices, the layout needs 5 per host"):
        group_devices(tpu, 2, 5)
    with pytest.raises(ValueError, match=r"processes \[0, 1\], expected 0..2"):
        group_devices(tpu, 3, 1)
