"""cluster/oom.py's reading of a container's memory cgroup, on folders laid out as runc
mounts them (v2: the container's cgroup at /sys/fs/cgroup; v1: its memory cgroup at
/sys/fs/cgroup/memory); the kernel's side is tests/node/test_chart.py's OOM test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from xla_sentinel.cluster import oom

PID = 4242


def cgroup(root: Path, v1: bool, limit: str, kills: int, pids: tuple[int, ...] = (1, PID)) -> Path:
    folder = root / "memory" if v1 else root
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))
    (folder / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(f"{limit}\n")
    counter = folder / ("memory.oom_control" if v1 else "memory.events")
    counter.write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n" if v1 else
                       f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {kills}\noom_group_kill 0\n")
    return counter


def test_counter_of_a_limited_container_cgroup_v1_and_v2(tmp_path: Path) -> None:
    v1 = cgroup(tmp_path / "v1", True, "671088640", 2)
    v2 = cgroup(tmp_path / "v2", False, "671088640", 1)
    assert oom.counter_file(tmp_path / "v1", PID) == v1 and oom.oom_kills(v1) == 2
    assert oom.counter_file(tmp_path / "v2", PID) == v2 and oom.oom_kills(v2) == 1


def test_no_counter_outside_a_memory_limited_cgroup_that_holds_the_process(tmp_path: Path) -> None:
    # The host's root cgroup (no limit) counts every OOM kill on the machine: not ours.
    cgroup(tmp_path / "root1", True, str(0x7FFFFFFFFFFFF000), 5)
    cgroup(tmp_path / "root2", False, "max", 5)
    cgroup(tmp_path / "other", False, "671088640", 5, pids=(1, 2))
    for root in ("root1", "root2", "other", "missing"):
        assert oom.counter_file(tmp_path / root, PID) is None, root


def test_watcher_exits_137_at_the_first_oom_kill_counted(tmp_path: Path) -> None:
    """A process whose (fake) container cgroup counts a kill stops with 137 within a poll."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from xla_sentinel.cluster import oom\n"
        f"root = Path({str(tmp_path)!r})\n"
        "import os\n"
        "(root / 'cgroup.procs').write_text(f'{os.getpid()}\\n')\n"
        "assert oom.stop_on_oom_kill(0.05, root) is not None\n"
        "print('watching', flush=True)\n"
        "time.sleep(30)\n"
        "sys.exit(3)\n")
    counter = cgroup(tmp_path, False, "671088640", 0)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "watching\n"
    counter.write_text(counter.read_text().replace("oom_kill 0", "oom_kill 1"))
    assert proc.wait(10) == oom.EXIT_OOM_KILLED
    assert "OOM-killed 1 process(es)" in (proc.stderr.read() if proc.stderr else "")
