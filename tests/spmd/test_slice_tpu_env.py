"""A TPU slice's pods on the pods-as-hosts path, given GKE's environment on this CPU: two
`xla-sentinel worker` processes of a TPU campaign (v6e 2x4 on 2 VMs), TPU_WORKER_ID 0 and
1, TPU_WORKER_HOSTNAMES naming both, as the operator's slice JobSet renders them
(desired._slice_env, _tpu_group_env). Host 1 serves host 0's driver over TCP
(cluster/pod.py host_role, run_host), host 0 runs the campaign with the slice's 2 hosts as
its layout (group_spec) and reports alone.

No TPU here: the pods get JAX_PLATFORMS=cpu, so cluster/pod.py group_platform picks `cpu`:
the one-process targets and the host processes run on the CPU with gloo and the layout is
`hosts2x2`; on a real slice it is `slice2x4` on the chips (docs/spmd.md, Platforms), which
is not checked here, nor what a real slice's libtpu does with this group. The driver listens on its fixed
port (host_link.DRIVER_PORT), as in a pod: the test needs it free."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from xla_sentinel.worker.host_link import DRIVER_PORT

SPEC = {
    "workers": 1,
    "seed": 5,
    "accelerator": {
        "type": "tpu",
        "tpuAccelerator": "tpu-v6e-slice",
        "tpuTopology": "2x4",
        "tpuMachineType": "ct6e-standard-4t",
        "count": 4,
    },
    "generator": {"devices": 4, "sharded": 1.0},
    "targets": [{"name": "default"}],
    "budget": {"programs": 2},
    "bisect": {"enabled": False},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_tpu_slice_from_gkes_environment_runs_one_program_stream_host_0_drives(
    tmp_path: Path,
) -> None:
    with socket.socket() as s:  # the driver's port, as a pod has it: to itself
        s.bind(("0.0.0.0", DRIVER_PORT))
    env = {
        **os.environ,
        "XLA_SENTINEL_SPEC": json.dumps(SPEC),
        "XLA_SENTINEL_REPORT": "none",
        "JAX_PLATFORMS": "cpu",
        "TPU_WORKER_HOSTNAMES": "127.0.0.1,127.0.0.1",
        "JAX_COORDINATOR_PORT": str(_free_port()),
        "XLA_SENTINEL_HOSTS": "2",
        "XLA_SENTINEL_SLICE_TOKEN": "0",
    }
    worker = [sys.executable, "-m", "xla_sentinel.cli.entry", "worker"]
    logs = {h: open(tmp_path / f"host{h}.log", "wb") for h in (0, 1)}  # noqa: SIM115 (closed below)
    try:
        hosts = {
            h: subprocess.Popen(
                [*worker, "--out", str(tmp_path / f"out{h}")],
                env={**env, "TPU_WORKER_ID": str(h)},
                stdout=logs[h],
                stderr=subprocess.STDOUT,
            )
            for h in (1, 0)
        }
        try:
            codes = {h: p.wait(240) for h, p in hosts.items()}
        finally:
            for p in hosts.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
    finally:
        for f in logs.values():
            f.close()
    log = {h: (tmp_path / f"host{h}.log").read_text(errors="replace") for h in (0, 1)}
    assert codes == {0: 0, 1: 0}, log

    summary = json.loads((tmp_path / "out0" / "summary.json").read_text())
    assert summary["programs"] == 2
    multihost = summary["multihost"]
    assert (multihost["layout"], multihost["hosts"], multihost["devices_per_host"]) == (
        "hosts2x2",
        2,
        2,
    )
    assert multihost["programs"] == 2 and multihost["group_restarts"] == 0
    # Host 1 ran no campaign of its own: it served host 0's group.
    assert not (tmp_path / "out1").exists()
    assert f"host 1: generation 1 of the group at 127.0.0.1:{DRIVER_PORT}" in log[1], log[1]
