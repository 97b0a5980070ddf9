"""TPU slices on GKE: shapes from GKE's table per accelerator, single-host slices as one Indexed
Job with a pod per shard, and JAX_PLATFORMS for accelerators (multi-host slices as JobSets:
test_jobset_pure.py). Pure functions, no API."""

from __future__ import annotations

import math
from typing import Any

import pytest
from xla_sentinel.spec.campaign import SpecError, parse_spec
from xla_sentinel_operator import desired, tpu


@pytest.mark.parametrize(("accelerator", "topology", "chips", "hosts", "per_host"), [
    ("tpu-v5-lite-podslice", "4x4", 16, 4, 4),
    ("tpu-v6e-slice", "4x8", 32, 8, 4),
    ("tpu-v6e-slice", "2x4", 8, 1, 8),
    ("tpu-v6e-slice", "2x2", 4, 1, 4),
    ("tpu-v5-lite-podslice", "1x1", 1, 1, 1),
    ("tpu-v4-podslice", "2x2x1", 4, 1, 4),
    ("tpu-v4-podslice", "2x2x4", 16, 4, 4),
    ("tpu-v5-lite-podslice", "2x4", 8, 1, 8),
    ("tpu-v6e-slice", "16x16", 256, 64, 4),
    ("tpu-v5p-slice", "4x4x4", 64, 16, 4),
    ("tpu-v4-podslice", "4x4x8", 128, 32, 4),  # a large shape, past the pages' rows
])
def test_slice_arithmetic(accelerator, topology, chips, hosts, per_host):
    s = tpu.slice_of(accelerator, topology)
    assert (s.chips, s.hosts, s.chips_per_host) == (chips, hosts, per_host)


@pytest.mark.parametrize(("accelerator", "topology", "count", "message"), [
    ("tpu-v6e-slice", "4x4", 8, "accelerator.count: 8 does not fit topology 4x4"),
    ("tpu-v6e-slice", "2x2", 8, "its one host has 4 chips"),
    ("tpu-v6e-slice", "2x2x2", 4, "'2x2x2' is not a tpu-v6e-slice topology GKE offers"),
    ("tpu-v4-podslice", "4x4", 4, "'4x4' is not a tpu-v4-podslice topology"),
    ("tpu-v9-slice", "2x2", 4, "unknown TPU accelerator 'tpu-v9-slice'"),
    ("tpu-v5-lite-device", "4x4", 4, "valid: 1x1, 2x2, 2x4$"),
])
def test_impossible_slices_are_refused_with_a_clear_message(accelerator, topology, count, message):
    spec = parse_spec({"accelerator": {"type": "tpu", "tpuAccelerator": accelerator,
                                       "tpuTopology": topology, "count": count}})
    with pytest.raises(tpu.TopologyError, match=message):
        desired.tpu_slice(spec)


@pytest.mark.parametrize(("accelerator", "topology"), [
    ("tpu-v6e-slice", "2x8"),  # 16 chips, but GKE's v6e 16-chip slice is 4x4
    ("tpu-v5-lite-podslice", "1x4"),
    ("tpu-v4-podslice", "1x1x1"),
    ("tpu-v5p-slice", "3x3x3"),
])
def test_shapes_no_gke_node_pool_has_are_refused_naming_the_valid_ones(accelerator, topology):
    with pytest.raises(tpu.TopologyError) as e:
        tpu.slice_of(accelerator, topology)
    assert str(e.value).startswith(f"accelerator.tpuTopology: {topology!r} is not a {accelerator}")
    valid = tpu.CUBE_RULE if accelerator in tpu.CUBE_MACHINE_TYPES else f"{tpu.TABLE[accelerator][0].topology},"
    assert f"valid: {valid}" in str(e.value)


def test_every_row_of_the_table_is_its_topologys_chips_on_whole_vms():
    for accelerator, shapes in tpu.TABLE.items():
        for s in shapes:
            dims = [int(d) for d in s.topology.split("x")]
            assert s.chips == math.prod(dims) and s.chips % s.vms == 0, (accelerator, s)


def test_v6e_2x4_is_one_vm_unless_the_campaign_picks_the_two_vm_machine_type():
    one = tpu.slice_of("tpu-v6e-slice", "2x4")
    two = tpu.slice_of("tpu-v6e-slice", "2x4", "ct6e-standard-4t")
    assert (one.hosts, one.chips_per_host, one.machine_type) == (1, 8, "ct6e-standard-8t")
    assert (two.hosts, two.chips_per_host, two.machine_type) == (2, 4, "ct6e-standard-4t")
    with pytest.raises(tpu.TopologyError, match=r"accelerator.tpuMachineType: 'ct6e-standard-1t'"
                       r" does not offer tpu-v6e-slice 2x4; valid: ct6e-standard-8t, ct6e-standard-4t"):
        tpu.slice_of("tpu-v6e-slice", "2x4", "ct6e-standard-1t")


def node_selector(job: dict) -> dict[str, str]:
    spec = job["spec"]
    pod = (spec["template"] if "template" in spec
           else spec["replicatedJobs"][0]["template"]["spec"]["template"])
    return pod["spec"]["nodeSelector"]


def test_the_machine_type_selects_the_node_pool_where_a_topology_has_two():
    (single,) = desired.worker_jobs(camp("2x4", 8, workers=1), default_image="img")
    (two_vm,) = desired.worker_jobs(camp("2x4", 4, workers=1, machine="ct6e-standard-4t"),
                                    default_image="img")
    (plain,) = desired.worker_jobs(camp("4x4", 4, workers=1), default_image="img")
    assert node_selector(single)[desired.INSTANCE_TYPE] == "ct6e-standard-8t"
    assert two_vm["kind"] == "JobSet"
    assert node_selector(two_vm)[desired.INSTANCE_TYPE] == "ct6e-standard-4t"
    # One machine type offers 4x4: node pools without the label still match.
    assert desired.INSTANCE_TYPE not in node_selector(plain)


def test_an_unset_machine_type_leaves_the_campaign_revision_as_it_was():
    spec = camp("2x4", 8).spec
    assert "tpuMachineType" not in spec.to_dict()["accelerator"]


def test_a_machine_type_is_for_tpu_campaigns_only():
    with pytest.raises(SpecError, match="accelerator.tpuMachineType: applies to type tpu only"):
        parse_spec({"accelerator": {"type": "gpu", "tpuMachineType": "ct6e-standard-4t"}})


def camp(topology: str, count: int, machine: str | None = None, **spec: Any) -> desired.Campaign:
    acc: dict[str, Any] = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice",
                           "tpuTopology": topology, "count": count}
    if machine:
        acc["tpuMachineType"] = machine
    return desired.Campaign(name="tpu-nightly", namespace="fuzz", uid="u",
                            spec=parse_spec({"workers": 2, "accelerator": acc, **spec}))


def env_of(job: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom"))
            for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_a_single_host_slice_keeps_one_job_with_a_pod_per_shard():
    c = camp("2x4", 8, workers=3)
    (job,) = desired.worker_jobs(c, default_image="img")
    assert job["kind"] == "Job" and job["spec"]["completions"] == 3
    env = env_of(job)
    assert "TPU_WORKER_HOSTNAMES" not in env and env["JAX_PLATFORMS"] == "tpu"
    assert "subdomain" not in job["spec"]["template"]["spec"]


def test_gpu_workers_run_jax_on_cuda_and_cpu_workers_set_no_platform():
    gpu = desired.Campaign(name="g", namespace="fuzz", uid="u",
                           spec=parse_spec({"accelerator": {"type": "gpu", "count": 1}}))
    cpu = desired.Campaign(name="c", namespace="fuzz", uid="u", spec=parse_spec({}))
    (gjob,) = desired.worker_jobs(gpu, default_image="img")
    (cjob,) = desired.worker_jobs(cpu, default_image="img")
    assert env_of(gjob)["JAX_PLATFORMS"] == "cuda" and "JAX_PLATFORMS" not in env_of(cjob)


def test_pods_and_jobs_are_counted_per_slice():
    c = camp("4x8", 4, workers=3)
    assert desired.job_count(c.spec) == 3 and desired.pod_count(c.spec) == 24


def test_the_hosts_of_a_slice_run_the_operators_shard_and_only_host_0_reports(monkeypatch):
    from xla_sentinel.cluster import pod as worker_main

    monkeypatch.setenv("JOB_COMPLETION_INDEX", "3")  # the host within the slice
    monkeypatch.setenv("XLA_SENTINEL_SHARD_INDEX", "1")
    monkeypatch.setenv("TPU_WORKER_ID", "3")
    args = worker_main._parser().parse_args([])
    assert args.shard_index == 1
    assert worker_main.make_reporter(args, parse_spec({}), "main-1") is None



def test_a_slice_verifies_together_and_host_0_alone_writes_the_result(monkeypatch, tmp_path):
    """Every host of a verifier slice runs the reproducer (a multi-host program needs all of
    them), but only host 0 writes the result: hosts 1.. must not reach the API at all."""
    import json

    import xla_sentinel.cluster.reporter as reporter
    from xla_sentinel.cluster import pod as worker_main

    (tmp_path / "repro.py").write_text("raise SystemExit(0)\n")
    apis: list[Any] = []
    written: list[dict[str, Any]] = []
    monkeypatch.setattr(worker_main, "_custom_api", lambda args: apis.append(args) or object())
    monkeypatch.setattr(reporter, "write_result", lambda api, obj: written.append(obj))
    argv = ["--verify", str(tmp_path), "--signature", "sig-1", "--campaign", "c", "--campaign-uid", "u"]
    monkeypatch.setenv("TPU_WORKER_ID", "2")
    assert worker_main.main(argv) == worker_main.EXIT_DONE
    assert apis == [] and written == []
    monkeypatch.setenv("TPU_WORKER_ID", "0")
    assert worker_main.main(argv) == worker_main.EXIT_DONE
    (obj,) = written
    assert json.loads(obj["spec"]["result"])["result"] == "verified"
