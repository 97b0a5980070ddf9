"""Operator at scale: one FuzzCampaign with 1,000 workers reporting 10,000 findings of 100
distinct signatures, through the real reporter, the real operator process and the emulated
API server (tests/k8s/apiserver.py).

Prints: the time from the last worker write to a converged status (campaign counters and
every BugSignature count exact), the operator process's peak and final memory, and the API
requests per finding made by the operator (kopf's and its own) and by the workers.

    .venv/bin/python bench/operator_scale.py [--workers 1000 --findings 10000 --signatures 100]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import hashlib
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import kmock  # noqa: E402
from xla_sentinel.k8s_report import K8sReporter  # noqa: E402

from tests.k8s.apiserver import ApiServer  # noqa: E402
from tests.k8s.workers import core_api  # noqa: E402

NS = "bench"
API = "xlasentinel.dev/v1alpha1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory_kib(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            fields[key] = int(value.split()[0])
    return fields


def run_worker(url: str, uid: str, index: int, per_worker: int, n_workers: int,
               signatures: list[str]) -> None:
    """One worker pod's lifetime: start, a finding at a time, progress, done."""
    reporter = K8sReporter(core_api(url), namespace=NS, campaign="scale", campaign_uid=uid,
                           worker=f"main-{index}", progress_interval=60.0)
    reporter.start()
    for j in range(per_worker):
        g = index * per_worker + j
        sig = signatures[g % len(signatures)]
        fid = hashlib.sha256(f"{g}".encode()).hexdigest()[:20]
        reporter.finding({"id": fid, "program": f"p{g}", "target": "default",
                          "verdict": "mismatch", "signature": sig, "culprit_op": "add",
                          "culprit_pass": None, "fusion_kind": None, "dtype": "f32",
                          "dir": f"findings/{fid}", "known_bug": None,
                          "time": "2026-11-29T10:00:00Z", "evidence": {}})
    reporter.progress({"programs": 50, "executions": 200, "findings": {}, "elapsed_s": 10.0})
    reporter.close(done=False)


def classify(server: ApiServer) -> dict[str, int]:
    counts = {"operator": 0, "workers": 0, "other": 0}
    for r in server._requests:
        agent = r.headers.get("User-Agent", "")
        if agent.startswith(("kopf", "xla-sentinel-operator")):
            counts["operator"] += 1
        elif agent.startswith("OpenAPI-Generator"):
            counts["workers"] += 1
        else:
            counts["other"] += 1
    return counts


async def converged(server: ApiServer, findings: int, n_sigs: int, workers: int) -> bool:
    fc = server.get(f"{API}/fuzzcampaigns", NS, "scale") or {}
    st = fc.get("status") or {}
    if (st.get("findingsTotal"), st.get("signatures"), (st.get("workers") or {}).get("reporting")) \
            != (findings, n_sigs, workers):
        return False
    sigs = server.all(f"{API}/bugsignatures", NS)
    return len(sigs) == n_sigs and sum((s.get("status") or {}).get("count", 0) for s in sigs) == findings


async def main(args: argparse.Namespace) -> None:
    per_worker = args.findings // args.workers
    findings = per_worker * args.workers
    signatures = [hashlib.sha256(f"sig{i}".encode()).hexdigest()[:16] for i in range(args.signatures)]
    server = ApiServer(crd_dir=str(ROOT / "crds"), namespaces={"default", NS})
    async with server, kmock.Server(server):
        url = str(server.url)
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c",
            "import sys; from xla_sentinel_operator.main import run; sys.exit(run(sys.argv[1:]))",
            "--server", url, "--namespace", NS, "--standalone", "--metrics-host", "127.0.0.1",
            "--metrics-port", str(port), "--rollup-interval", str(args.rollup_interval),
            "--log-level", "WARNING", stderr=asyncio.subprocess.DEVNULL)
        try:
            async with aiohttp.ClientSession() as http:
                for _ in range(300):
                    try:
                        if (await http.get(f"http://127.0.0.1:{port}/healthz")).status == 200:
                            break
                    except aiohttp.ClientError:
                        pass
                    await asyncio.sleep(0.1)
                created = await (await http.post(
                    f"{url.rstrip('/')}/apis/{API}/namespaces/{NS}/fuzzcampaigns",
                    json={"apiVersion": API, "kind": "FuzzCampaign",
                          "metadata": {"name": "scale", "namespace": NS},
                          "spec": {"workers": args.workers, "budget": {"continuous": True},
                                   "bisect": {"enabled": False}}})).json()
            uid = created["metadata"]["uid"]
            while not server.all("batch/v1/jobs", NS):
                await asyncio.sleep(0.1)
            base_mem = memory_kib(proc.pid)
            t0 = time.perf_counter()

            def write_all() -> None:
                with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
                    jobs = [pool.submit(run_worker, url, uid, i, per_worker, args.workers, signatures)
                            for i in range(args.workers)]
                    for j in jobs:
                        j.result()

            await asyncio.to_thread(write_all)
            t_written = time.perf_counter()
            while not await converged(server, findings, args.signatures, args.workers):
                await asyncio.sleep(0.2)
            t_done = time.perf_counter()
            mem = memory_kib(proc.pid)
            counts = classify(server)
        finally:
            proc.terminate()
            await proc.wait()

    print(f"operator_scale: {args.workers} workers, {findings} findings, {args.signatures} signatures, "
          f"rollup interval {args.rollup_interval}s")
    print(f"  workers writing (wall, {args.threads} threads): {t_written - t0:8.1f} s")
    print(f"  converged after the last write:                 {t_done - t_written:8.1f} s")
    print(f"  first write to converged status:                {t_done - t0:8.1f} s")
    print(f"  operator memory: peak {mem['VmHWM'] / 1024:.0f} MiB, now {mem['VmRSS'] / 1024:.0f} MiB "
          f"(idle before load {base_mem['VmRSS'] / 1024:.0f} MiB)")
    print(f"  API requests: operator {counts['operator']} ({counts['operator'] / findings:.2f} per finding), "
          f"workers {counts['workers']} ({counts['workers'] / findings:.2f} per finding), other {counts['other']}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=1000)
    p.add_argument("--findings", type=int, default=10000)
    p.add_argument("--signatures", type=int, default=100)
    p.add_argument("--threads", type=int, default=16, help="concurrent worker writers")
    p.add_argument("--rollup-interval", type=float, default=2.0)
    asyncio.run(main(p.parse_args()))
