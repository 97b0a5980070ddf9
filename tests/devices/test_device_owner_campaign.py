"""One process per host owns each accelerator, in a real campaign.

No accelerator exists on this machine, so the CPU stands in for one: the test-only knob
XLA_SENTINEL_TEST_EXCLUSIVE_PLATFORMS=cpu (worker/devices.py) makes the CPU targets go
through the platform's owner, as TPU and GPU targets always do. Everything else is real:
worker processes, XLA compiles, the store. Two witnesses count the processes, neither of
them the engine's own bookkeeping:

- an injected pass (registered in target workers only) appends the pid of every process
  that compiles a target's program: exactly one;
- a sampler walks this test's process tree in /proc while the campaign runs (each worker
  names itself after its role, server._name_process): at most one owner alive at any time,
  while every slot's reference worker is alive beside it and they use the CPU at the same
  time (references stay parallel).
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.worker import devices
from xla_sentinel.xla.faults import fault_path

SLOTS = 3

# Records the pid, worker and device environment of each compile of a campaign program
# (not the probe a plugin gets at validation), changes nothing.
PID_PLUGIN = """import json, multiprocessing, os

def transform(proto):
    if b"xla_sentinel_probe" not in proto:
        env = {{k: os.environ.get(k) for k in ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES")}}
        with open({out!r}, "a") as f:
            f.write(f"{{os.getpid()}} {{multiprocessing.current_process().name}} {{json.dumps(env)}}\\n")
    return None
"""


def _spec(**over: object):
    return parse_spec({"seed": 11, "generator": {"version": 1, "minOps": 3, "maxOps": 8, "dtypes": ["f32"]},
                       "targets": ["default", "O0"], "references": ["f64_numpy", "eager"],
                       "workers": SLOTS, "bisect": {"enabled": False}, **over})


def _tree(root: int) -> dict[int, tuple[str, int]]:
    """pid -> (name, utime+stime ticks) of every process below `root`."""
    procs: dict[int, tuple[int, str, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # exited meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        procs[int(entry.name)] = (int(fields[1]), name, int(fields[11]) + int(fields[12]))
    below: dict[int, tuple[str, int]] = {}
    for pid, (_, name, ticks) in procs.items():
        p, seen = pid, 0
        while p in procs and p != root and seen < 64:
            p, seen = procs[p][0], seen + 1
        if p == root and pid != root:
            below[pid] = (name, ticks)
    return below


@dataclass
class Census:
    owners_at_once: int = 0
    owner_pids: set[int] = field(default_factory=set)
    references_at_once: int = 0
    reference_pids: set[int] = field(default_factory=set)
    # Sampling windows in which two or more reference workers used CPU time.
    parallel_reference_windows: int = 0
    samples: int = 0


@contextmanager
def census(platform: str, every: float = 0.05) -> Iterator[Census]:
    c = Census()
    stop = threading.Event()

    def sample() -> None:
        last: dict[int, int] = {}
        while not stop.wait(every):
            tree = _tree(os.getpid())
            owners = [p for p, (n, _) in tree.items() if n == f"owner-{platform}"]
            refs = {p: t for p, (n, t) in tree.items() if n.startswith("slot") and n.endswith("-programs")}
            c.owners_at_once = max(c.owners_at_once, len(owners))
            c.owner_pids.update(owners)
            c.references_at_once = max(c.references_at_once, len(refs))
            c.reference_pids.update(refs)
            if sum(1 for p, t in refs.items() if p in last and t > last[p]) >= 2:
                c.parallel_reference_windows += 1
            last = refs
            c.samples += 1

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield c
    finally:
        stop.set()
        thread.join()


def _compilers(pids_file: Path) -> dict[int, set[str]]:
    """pid -> worker names of the processes that compiled a target's program; each of
    them held off any GPU (a CPU target's worker, or the CPU's owner under the knob)."""
    by_pid: dict[int, set[str]] = defaultdict(set)
    for line in pids_file.read_text().splitlines():
        pid, name, env = line.split(" ", 2)
        assert json.loads(env) == {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}, line
        by_pid[int(pid)].add(name)
    return by_pid


@pytest.fixture
def cpu_as_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(devices.TEST_EXCLUSIVE_ENV, "cpu")


def test_one_process_compiles_every_target_while_references_run_in_parallel(
        tmp_path: Path, cpu_as_device: None) -> None:
    pids = tmp_path / "compiles.txt"
    plugin = tmp_path / "pids.py"
    plugin.write_text(PID_PLUGIN.format(out=str(pids)))
    with census("cpu") as seen:
        summary = run_campaign(_spec(budget={"programs": 12}), tmp_path / "out", inject_passes=[str(plugin)])
    assert summary["programs"] == 12
    compilers = _compilers(pids)
    # Both targets of all three slots compiled in one process, the platform's owner.
    assert list(compilers.values()) == [{"xla-sentinel-owner-cpu"}], compilers
    assert set(compilers) <= seen.owner_pids
    assert seen.samples > 10 and seen.owners_at_once == 1
    # Each slot kept its own reference worker, alive together and busy at the same time.
    assert seen.references_at_once == SLOTS and len(seen.reference_pids) == SLOTS
    assert seen.parallel_reference_windows >= 1
    logs = sorted(p.name for p in (tmp_path / "out" / "logs").iterdir())
    assert "owner-cpu.log" in logs and not [n for n in logs if n.endswith(("-default.log", "-O0.log"))]


def test_without_the_knob_each_slot_compiles_its_cpu_targets_itself(tmp_path: Path) -> None:
    """The CPU path as it was: a worker per CPU target per slot (what the knob changes)."""
    pids = tmp_path / "compiles.txt"
    plugin = tmp_path / "pids.py"
    plugin.write_text(PID_PLUGIN.format(out=str(pids)))
    summary = run_campaign(_spec(budget={"programs": 9}), tmp_path / "out", inject_passes=[str(plugin)])
    assert summary["programs"] == 9
    names = {n for ns in _compilers(pids).values() for n in ns}
    assert "xla-sentinel-owner-cpu" not in names
    assert names <= {f"xla-sentinel-slot{i}-{t}" for i in range(SLOTS) for t in ("default", "O0")}
    assert len(names) > 2  # more than one slot's target workers compiled


def test_an_owner_that_crashes_is_the_verdict_of_its_program_and_is_restarted(
        tmp_path: Path, cpu_as_device: None) -> None:
    spec = _spec(budget={"programs": 6}, targets=["default"],
                 generator={"version": 1, "minOps": 2, "maxOps": 4, "dtypes": ["f32"], "ops": ["atan2", "add"]})
    with census("cpu") as seen:
        summary = run_campaign(spec, tmp_path, inject_passes=[fault_path("abort_on_pattern")])
    # Every program was judged, each abort a crash finding on disk and in the store.
    assert summary["programs"] == 6
    crashes = [json.loads(f.read_text()) for f in tmp_path.glob("findings/*/finding.json")]
    crashes = [c for c in crashes if c["verdict"] == "crash"]
    assert crashes and len(crashes) == summary["findings"]["crash"]
    assert all("SIGABRT" in c["evidence"]["error"] for c in crashes)
    # A fresh owner after each death, never two at once.
    assert summary["worker_restarts"]["restarted_after_death"] >= 1
    assert seen.owners_at_once == 1 and len(seen.owner_pids) >= 2
