"""A pod's place in a multi-host group, read from its environment (cluster/pod.py
slice_host, host_role): GKE's TPU variables, or a JobSet's pod index and stable hostname;
host 0's driver and coordinator addresses; the spec host 0's engine runs. Pure: the
environments are what GKE and JobSet set, written out here (no cluster, no TPU: a TPU
slice's pods were never run here)."""

from __future__ import annotations

from typing import Any

import pytest
from xla_sentinel.campaign.multihost import LAYOUT_PLATFORM_ENV, layout
from xla_sentinel.cluster.pod import (
    COORDINATOR_PORT,
    SliceHost,
    driver_environment,
    group_platform,
    group_spec,
    host_role,
    slice_host,
    tpu_slice_host,
)
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel.worker.host_link import DRIVER_PORT, RemoteHosts
from xla_sentinel.worker.hosts import Layout


def test_a_tpu_slice_host_reads_gke_s_worker_variables() -> None:
    env = {"TPU_WORKER_ID": "2", "TPU_WORKER_HOSTNAMES": "t-0.s,t-1.s,t-2.s,t-3.s"}

    assert slice_host(env) == SliceHost(2, 4, f"t-0.s:{COORDINATOR_PORT}")
    assert slice_host({**env, "JAX_COORDINATOR_PORT": "9000"}) == SliceHost(2, 4, "t-0.s:9000")


def test_a_jobset_host_finds_pod_0_through_the_headless_service() -> None:
    env = {"JOB_COMPLETION_INDEX": "1", "XLA_SENTINEL_HOSTS": "2", "HOSTNAME": "camp-hosts-0-1",
           "XLA_SENTINEL_SUBDOMAIN": "camp"}

    assert slice_host(env) == SliceHost(1, 2, f"camp-hosts-0-0.camp:{COORDINATOR_PORT}")
    assert slice_host({**env, "XLA_SENTINEL_COORDINATOR": "h0:1234"}) == SliceHost(1, 2, "h0:1234")


def test_one_host_is_no_group_and_a_foreign_hostname_is_refused() -> None:
    assert slice_host({}) is None
    assert slice_host({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "only"}) is None  # a one-host slice
    assert slice_host({"JOB_COMPLETION_INDEX": "0", "XLA_SENTINEL_HOSTS": "1"}) is None
    with pytest.raises(SpecError, match="XLA_SENTINEL_COORDINATOR"):
        slice_host({"JOB_COMPLETION_INDEX": "1", "XLA_SENTINEL_HOSTS": "2", "HOSTNAME": "laptop"})


def test_a_tpu_slice_host_finds_the_driver_beside_the_coordinator() -> None:
    env = {"TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "js-hosts-0-0.js,js-hosts-0-1.js"}

    place = slice_host(env)
    assert place == SliceHost(1, 2, f"js-hosts-0-0.js:{COORDINATOR_PORT}")
    assert place.driver == f"js-hosts-0-0.js:{DRIVER_PORT}"
    assert SliceHost(0, 2, "[fd00::1]:8482").driver == f"[fd00::1]:{DRIVER_PORT}"


@pytest.mark.parametrize(("env", "message"), [
    ({"TPU_WORKER_HOSTNAMES": "a,b"}, "TPU_WORKER_ID: not set"),
    ({"TPU_WORKER_ID": "one", "TPU_WORKER_HOSTNAMES": "a,b"}, "TPU_WORKER_ID='one': not a host index"),
    ({"TPU_WORKER_ID": "-1", "TPU_WORKER_HOSTNAMES": "a,b"}, "not a host index"),
    ({"TPU_WORKER_ID": "2", "TPU_WORKER_HOSTNAMES": "a,b"}, r"TPU_WORKER_ID=2: not a host of a slice of 2"),
    ({"TPU_WORKER_ID": "1"}, r"TPU_WORKER_ID=1: not a host of a slice of 1"),
    ({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": " , "}, "TPU_WORKER_HOSTNAMES: empty"),
    ({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": ""}, "TPU_WORKER_HOSTNAMES: empty"),
    # Host h is at position h: an empty one in the middle would move the others.
    ({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "a,,c"}, "hostname 1 is empty"),
])
def test_a_malformed_tpu_environment_is_refused_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        tpu_slice_host(env)


V6E_4X4 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4}


def tpu_spec(devices: int = 8) -> Any:
    return parse_spec({"accelerator": V6E_4X4, "generator": {"devices": devices}})


def test_a_tpu_slice_takes_the_pods_as_hosts_path() -> None:
    """Host 0 runs the campaign with the slice's hosts as its layout; hosts 1..3 serve it,
    as a CPU/GPU group's pods do, from GKE's variables rather than JOB_COMPLETION_INDEX."""
    names = ",".join(f"js-hosts-0-{h}.js" for h in range(4))
    spec = tpu_spec()
    assert spec.accelerator.hosts == 1  # a TPU spec leaves hosts to the topology
    for h in range(4):
        place = host_role(spec, {"TPU_WORKER_ID": str(h), "TPU_WORKER_HOSTNAMES": names,
                                 "XLA_SENTINEL_HOSTS": "4"})
        assert place == SliceHost(h, 4, f"js-hosts-0-0.js:{COORDINATOR_PORT}")
    assert place is not None
    driven = group_spec(spec, place)
    assert driven.accelerator.hosts == 4 and driven.generator.device_count() == 8
    # Host 0's pod runs the layout on the slice's chips: the engine's target slice4x2.
    zero = SliceHost(0, 4, f"js-hosts-0-0.js:{COORDINATOR_PORT}")
    env = driver_environment(zero, {}, group_platform(spec, {"JAX_PLATFORMS": "tpu"}))
    assert env[LAYOUT_PLATFORM_ENV] == "tpu"
    assert RemoteHosts.from_environ(env) == RemoteHosts(
        f"0.0.0.0:{DRIVER_PORT}", zero.coordinator, f"0.0.0.0:{COORDINATOR_PORT}")
    slice_layout = layout(driven, env)
    assert slice_layout == Layout(4, 2, "tpu") and slice_layout.name == "slice4x2"
    assert layout(spec, env) is None


def test_the_layouts_platform_is_the_tpu_on_a_slice_the_cpu_elsewhere() -> None:
    cpu_group = parse_spec({"accelerator": {"type": "cpu", "hosts": 2}, "generator": {"devices": 4}})
    gpu_group = parse_spec({"accelerator": {"type": "gpu", "hosts": 2}, "generator": {"devices": 4}})
    assert group_platform(tpu_spec(), {}) == "tpu"  # the pod's jax picks its TPU
    assert group_platform(tpu_spec(), {"JAX_PLATFORMS": "tpu"}) == "tpu"  # as the operator sets it
    assert group_platform(tpu_spec(), {"JAX_PLATFORMS": "tpu,cpu"}) == "tpu"
    # A TPU campaign's pod kept off its TPU runs its one-process targets on the CPU, and
    # the layout with them.
    assert group_platform(tpu_spec(), {"JAX_PLATFORMS": "cpu"}) == "cpu"
    # A GPU group's hosts run on the CPU (NCCL between pods is not built).
    for spec in (cpu_group, gpu_group):
        assert group_platform(spec, {"JAX_PLATFORMS": "tpu"}) == "cpu"
    place = SliceHost(0, 2, f"camp-hosts-0-0.camp:{COORDINATOR_PORT}")
    env = driver_environment(place, {}, group_platform(cpu_group, {}))
    assert layout(group_spec(cpu_group, place), env) == Layout(2, 2, "cpu")


def test_a_tpu_slice_that_is_no_group_of_the_spec_is_refused() -> None:
    names = "a,b,c,d"
    assert host_role(tpu_spec(), {}) is None  # outside GKE: the shard as every worker runs it
    assert host_role(tpu_spec(), {"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "only"}) is None
    with pytest.raises(SpecError, match="XLA_SENTINEL_HOSTS=2: the slice's TPU_WORKER_HOSTNAMES names 4"):
        host_role(tpu_spec(), {"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": names, "XLA_SENTINEL_HOSTS": "2"})
    with pytest.raises(SpecError, match="generator.devices: 6 is not a multiple of the slice's 4 hosts"):
        host_role(tpu_spec(6), {"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": names})
    with pytest.raises(SpecError, match="TPU_WORKER_ID: not set"):
        host_role(tpu_spec(), {"TPU_WORKER_HOSTNAMES": names})


def test_a_cpu_group_keeps_reading_the_jobsets_variables() -> None:
    spec = parse_spec({"accelerator": {"type": "cpu", "hosts": 2}, "generator": {"devices": 4}})
    env = {"JOB_COMPLETION_INDEX": "1", "XLA_SENTINEL_HOSTS": "2", "HOSTNAME": "camp-hosts-0-1",
           "XLA_SENTINEL_SUBDOMAIN": "camp"}
    place = host_role(spec, env)
    assert place == SliceHost(1, 2, f"camp-hosts-0-0.camp:{COORDINATOR_PORT}")
    assert place.driver == f"camp-hosts-0-0.camp:{DRIVER_PORT}"
    assert group_spec(spec, place) is spec
