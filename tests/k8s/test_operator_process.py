"""The operator as deployed: two peered replicas (only one acts), and `run(argv)` in its own
process with JSON logs, /healthz and /metrics, stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys

import aiohttp

from .conftest import API, campaign, create, eventually
from .workers import Worker, finding


async def test_two_peered_replicas_never_both_act(api, ns, client, start_operator, worker_kubeconfig):
    # The chart renders the KopfPeering object of each watched namespace (applied by `ns`).
    leader = await start_operator(peering={"standalone": False, "priority": 100})
    await eventually(lambda: len((api.get("kopf.dev/v1/kopfpeerings", ns, "xla-sentinel") or {})
                                 .get("status") or {}) == 1)
    follower = await start_operator(peering={"standalone": False, "priority": 10})
    await eventually(lambda: len(api.get("kopf.dev/v1/kopfpeerings", ns, "xla-sentinel")["status"]) == 2)

    fc = await create(client, campaign(ns, workers=2))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding("00000000000000aa", 1))
    await eventually(lambda: (s := api.get(f"{API}/bugsignatures", ns, "sig-00000000000000aa"))
                     and s.get("status", {}).get("alertKey") == "new")
    await eventually(lambda: api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status", {}).get("findingsTotal") == 1)

    assert leader.runtime.metrics.reports_ingested._value.get() >= 1
    assert follower.runtime.metrics.reports_ingested._value.get() == 0
    assert follower.runtime.ingested == {}
    assert len(api.all("batch/v1/jobs", ns)) == 2  # one worker Job, one bisector: made once


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_operator_process_serves_health_metrics_and_json_logs(api, ns, client,
                                                                   operator_kubeconfig):
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; from xla_sentinel_operator.main import run; sys.exit(run(sys.argv[1:]))",
        "--kubeconfig", str(operator_kubeconfig), "--namespace", ns, "--standalone", "--metrics-host", "127.0.0.1",
        "--metrics-port", str(port), "--rollup-interval", "0.5",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with aiohttp.ClientSession() as http:
            async def healthy() -> bool:
                try:
                    return (await http.get(f"http://127.0.0.1:{port}/healthz")).status == 200
                except aiohttp.ClientError:
                    return False
            await eventually(healthy, timeout=30)
            await create(client, campaign(ns, workers=1))
            await eventually(lambda: api.all("batch/v1/jobs", ns))
            metrics = await (await http.get(f"http://127.0.0.1:{port}/metrics")).text()
        assert "xlasentinel_alerts_sent_total" in metrics
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0
    records = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    created = [r for r in records if r.get("event") == "workers.created"]
    assert created and created[0]["campaign"] == "nightly" and created[0]["namespace"] == ns
    assert all("level" in r and "timestamp" in r for r in records)


async def test_operator_refuses_a_bad_flag_with_exit_2():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; from xla_sentinel_operator.main import run; sys.exit(run(sys.argv[1:]))",
        "--rollup-interval", "soon", stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert "--rollup-interval" in err.decode()
