"""A pod's place in a multi-host group, read from its environment (cluster/pod.py
slice_host): GKE's TPU variables, or a JobSet's pod index and stable hostname. Pure: the
environments are what GKE and JobSet set, written out here (no cluster)."""

from __future__ import annotations

import pytest
from xla_sentinel.cluster.pod import COORDINATOR_PORT, SliceHost, slice_host
from xla_sentinel.spec.campaign import SpecError


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
