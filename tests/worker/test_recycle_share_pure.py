"""worker/memory.py: the bound a worker recycles at, from its container's memory cgroup as
runc lays it out (v2: the container's cgroup at /sys/fs/cgroup; v1: its memory cgroup at
/sys/fs/cgroup/memory), and the count of the engine processes that share it (engine_workers,
which the pod's entrypoint, cluster/pod.py, and the campaign engine both set it from)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xla_sentinel.cluster.pod import engine_workers
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.worker import devices, memory

MiB, GiB = 1 << 20, 1 << 30
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def cgroup(root: Path, v1: bool, limit: str) -> Path:
    folder = root / "memory" if v1 else root
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(f"{limit}\n")
    (folder / "cgroup.procs").write_text("1\n")
    return root


def test_the_limit_of_a_v1_or_v2_container_and_none_without_one(tmp_path: Path) -> None:
    v1 = memory.memory_cgroup(cgroup(tmp_path / "v1", True, str(640 * MiB)))
    v2 = memory.memory_cgroup(cgroup(tmp_path / "v2", False, str(640 * MiB)))
    assert v1 is not None and (v1.limit, v1.oom_counter.name) == (640 * MiB, "memory.oom_control")
    assert v2 is not None and (v2.limit, v2.oom_counter.name) == (640 * MiB, "memory.events")
    # No limit: v2 "max", v1's number near 2^63 (a host's root cgroup), nothing mounted.
    cgroup(tmp_path / "max", False, "max")
    cgroup(tmp_path / "huge", True, str(0x7FFFFFFFFFFFF000))
    for root in ("max", "huge", "missing"):
        assert memory.memory_cgroup(tmp_path / root) is None, root
    # With a pid, only a cgroup that holds it (cluster/oom.py's counter).
    assert memory.memory_cgroup(tmp_path / "v2", pid=1) is not None
    assert memory.memory_cgroup(tmp_path / "v2", pid=4242) is None


def test_the_threshold_is_a_share_of_the_limit_over_the_workers_capped_at_1_5_gb() -> None:
    assert memory.recycle_threshold(None, 4) == memory.RECYCLE_CAP == 1_500_000_000
    # 640 MiB over the hungry campaign's 3 processes (a program worker and two targets).
    assert memory.recycle_threshold(640 * MiB, 3) == int(640 * MiB * memory.RECYCLE_SHARE) // 3
    assert memory.recycle_threshold(640 * MiB, 3) == 111_848_106
    assert memory.recycle_threshold(4 * GiB, 1) == memory.RECYCLE_CAP  # never above the cap
    assert memory.recycle_threshold(4 * GiB, 8) == 268_435_456
    assert memory.recycle_threshold(2 * GiB, 0) == memory.recycle_threshold(2 * GiB, 1)


def test_tiny_limits_give_tiny_thresholds_never_zero() -> None:
    # Below a fresh worker's own memory every request recycles: bounded, if slow
    # (cluster/pod.py warns); a limit of a few bytes still leaves a positive bound.
    assert memory.recycle_threshold(64 * MiB, 4) == 8 * MiB < memory.FRESH_WORKER_BYTES
    assert memory.recycle_threshold(1, 16) == 1


def test_the_variable_wins_then_the_cgroup_over_the_engine_workers(tmp_path: Path) -> None:
    root = cgroup(tmp_path, False, str(1 * GiB))
    assert memory.recycle_bytes({}, root) == GiB // 2
    assert memory.recycle_bytes({memory.WORKERS_ENV: "4"}, root) == GiB // 8
    assert memory.recycle_bytes({memory.WORKERS_ENV: "4", memory.RECYCLE_ENV: "123"}, root) == 123
    assert memory.recycle_bytes({}, tmp_path / "missing") == memory.RECYCLE_CAP


def test_own_memory_is_at_most_the_resident_size() -> None:
    rss = 1 << 40
    assert 0 < memory.own_bytes(rss) < rss


def test_engine_workers_count_a_slot_s_processes_and_one_per_accelerator(monkeypatch) -> None:
    monkeypatch.delenv(devices.TEST_EXCLUSIVE_ENV, raising=False)

    def spec(**fields):
        return parse_spec({"targets": [{"name": "default"}, {"name": "O0"}], **fields})

    # Per slot: the program worker and one per CPU target.
    assert engine_workers(spec(workers=1)) == 3
    assert engine_workers(spec(workers=4)) == 12
    # The interpreter reference has a worker of its own in each slot.
    refs = ["f64_eager", "interpreter"]
    assert engine_workers(spec(workers=2, references=refs)) == 8
    # TPU targets share one owner process per pod, whatever the slots.
    tpu = parse_spec({"targets": [{"name": "O0"}, {"name": "default", "platform": "tpu"},
                                  {"name": "no_fusion", "platform": "tpu"}],
                      "accelerator": {"type": "tpu", "count": 4, "tpuAccelerator": "tpu-v5-lite-podslice",
                                      "tpuTopology": "2x2"}, "workers": 2})
    assert engine_workers(tpu) == 2 * 2 + 1


def test_the_pod_entrypoint_tells_its_engine_how_many_processes_share_the_limit(
        tmp_path: Path, monkeypatch) -> None:
    """cluster/pod.py's main up to the engine (run_campaign stands in for it: the engine's
    own run is tests/fuzz's): the environment its worker processes start with."""
    import json
    import os

    from xla_sentinel.campaign import engine
    from xla_sentinel.cluster import pod

    seen: dict[str, str | None] = {}

    def run_campaign(spec, out, **_):
        seen["workers"] = os.environ.get(memory.WORKERS_ENV)
        return {"programs": spec.budget.programs}

    monkeypatch.setattr(engine, "run_campaign", run_campaign)
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k != memory.WORKERS_ENV})
    os.environ["XLA_SENTINEL_SPEC"] = json.dumps(
        {"targets": [{"name": "default"}, {"name": "O0"}], "budget": {"programs": 2}})
    argv = ["--report", "none", "--out", str(tmp_path), "--processes", "2"]
    assert pod.main(argv) == pod.EXIT_DONE and seen["workers"] == "6"
    # Set in the pod's environment, it stands.
    os.environ[memory.WORKERS_ENV] = "9"
    assert pod.main(argv) == pod.EXIT_DONE and seen["workers"] == "9"


@pytest.mark.parametrize("example", ["campaign-tpu-v5e.yaml", "k8s-quickstart.yaml"])
@pytest.mark.parametrize("interpreter", [False, True])
def test_engine_workers_is_the_engines_own_process_plan(example: str, interpreter: bool,
                                                         monkeypatch) -> None:
    """The count agrees with the Slots the engine builds (no process is started: a Worker
    starts at its first request)."""
    import dataclasses

    import yaml
    from xla_sentinel.judge.assess import Slot, device_owners
    from xla_sentinel.judge.targets import resolve
    from xla_sentinel.worker.client import distinct

    monkeypatch.delenv(devices.TEST_EXCLUSIVE_ENV, raising=False)
    (doc,) = [d for d in yaml.safe_load_all((EXAMPLES / example).read_text())
              if d and d.get("kind") == "FuzzCampaign"]
    spec = parse_spec(doc["spec"])
    if interpreter:
        spec = dataclasses.replace(spec, references=[*spec.references, "interpreter"])
    targets = [resolve(t) for t in spec.targets]
    owners = device_owners(targets, [], None)
    slots = [Slot(i, targets, [], None, "interpreter" in spec.references, owners)
             for i in range(spec.workers)]
    assert engine_workers(spec) == len(distinct([w for s in slots for w in s.workers()]))


@pytest.mark.parametrize("fields", [
    {"targets": [{"name": "default"}, {"name": "O0"}]},
    {"targets": [{"name": "default"}, {"name": "O0"}], "workers": 4,
     "references": ["f64_eager", "interpreter"]},
    {"targets": [{"name": "O0"}, {"name": "default", "platform": "tpu"},
                 {"name": "no_fusion", "platform": "tpu"}], "workers": 2,
     "accelerator": {"type": "tpu", "count": 4, "tpuAccelerator": "tpu-v5-lite-podslice",
                     "tpuTopology": "2x2"}},
])
def test_a_local_run_counts_the_processes_as_the_pod_does_and_the_pod_s_count_stands(
        fields: dict, monkeypatch) -> None:
    """campaign/engine.py's default for a run started without the pod's entrypoint (a local
    `xla-sentinel run` in a memory-limited container): the pod's count, not 1."""
    from xla_sentinel.campaign.engine import memory_share_environment

    monkeypatch.delenv(devices.TEST_EXCLUSIVE_ENV, raising=False)
    spec = parse_spec(fields)
    assert memory_share_environment(spec, {}) == {memory.WORKERS_ENV: str(engine_workers(spec))}
    assert engine_workers(spec) > 1
    assert memory_share_environment(spec, {memory.WORKERS_ENV: "9"}) == {}
