"""Operator at scale on the real control plane (tests/controlplane: kube-apiserver, etcd,
kube-controller-manager): one FuzzCampaign with 1,000 workers reporting 10,000 findings of 100
distinct signatures through the real reporter (as the chart's worker ServiceAccount), and the
real operator process (as the chart's operator ServiceAccount).

With --real-node the operator runs as the chart's pod from the image `make images` built, on
the real node (tests/controlplane/node.py: kubelet, containerd), installed with `helm
install`; its memory is read from its container's process on this host. The campaign's worker
pods are kept off the node (a nodeSelector no node has): their writes come from this script's
threads in both modes, as 1,000 runner pods cannot run on one test machine.

Prints: the time from the last worker write to a converged status (campaign counters and every
BugSignature count exact), the operator process's peak and final memory, API requests per
finding made by the operator and by the workers (counted from kube-apiserver's audit log), the
bytes etcd took in per finding, and etcd's database size at the end.

    .venv/bin/python bench/operator_scale.py [--workers 1000 --findings 10000 --signatures 100]
                                             [--real-node]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from controlplane.cluster import ControlPlane, free_port  # noqa: E402
from controlplane.kit import (  # noqa: E402
    OPERATOR_SA,
    RELEASE_NS,
    Api,
    helm_install,
    install_chart,
    kubectl,
)
from controlplane.node import RealNode, built_images, chart_image_values  # noqa: E402
from k8s.workers import reports_api  # noqa: E402
from xla_sentinel.cluster.report import writer_name  # noqa: E402
from xla_sentinel.cluster.reporter import K8sReporter  # noqa: E402

NS = "bench"
WORKER_SA = "xs-xla-sentinel-worker"  # the chart's worker ServiceAccount of release xs
API = "xlasentinel.dev/v1alpha1"


def memory_kib(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            fields[key] = int(value.split()[0])
    return fields


def run_worker(kubeconfig: Path, uid: str, index: int, per_worker: int,
               signatures: list[str], pod: str) -> None:
    """One worker pod's lifetime: start, a finding at a time, progress, done; written with
    a token bound to the Job's pod of this index, under the one report name the chart's
    WorkerReport policy lets that pod write."""
    reporter = K8sReporter(reports_api(kubeconfig), namespace=NS, campaign="scale",
                           campaign_uid=uid, worker=f"main-{index}", progress_interval=60.0,
                           name=writer_name(pod))
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


def worker_pods(api: Api, workers: int, timeout: float = 600) -> dict[int, dict]:
    """Index -> the campaign Job's pod of that index, once the Job controller made them all."""
    deadline = time.monotonic() + timeout
    while True:
        pods = {int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]): p
                for p in api.all("v1/pods", NS, {"xlasentinel.dev/role": "worker"})
                if not p["metadata"].get("deletionTimestamp")}
        if len(pods) >= workers:
            return pods
        if time.monotonic() > deadline:
            raise SystemExit(f"the Job controller made {len(pods)} of {workers} worker pods in {timeout:.0f} s")
        time.sleep(1)


def requests_by_user(audit_log: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        user = event.get("user", {}).get("username", "")
        if user.endswith(f":{OPERATOR_SA}"):
            counts["operator"] += 1
        elif f":{WORKER_SA}" in user:
            counts["workers"] += 1
        else:
            counts["other"] += 1
    return counts


def converged(api: Api, findings: int, n_sigs: int, workers: int) -> bool:
    st = (api.get(f"{API}/fuzzcampaigns", NS, "scale") or {}).get("status") or {}
    if (st.get("findingsTotal"), st.get("signatures"), (st.get("workers") or {}).get("reporting")) \
            != (findings, n_sigs, workers):
        return False
    sigs = api.all(f"{API}/bugsignatures", NS)
    return len(sigs) == n_sigs and sum((s.get("status") or {}).get("count", 0) for s in sigs) == findings


@contextlib.contextmanager
def operator_process(cp: ControlPlane, api: Api, args: argparse.Namespace) -> Iterator[int]:
    """The chart's objects installed and the operator running, standalone, watching NS;
    yields the host PID of the operator's process (whose memory is measured)."""
    if not args.real_node:
        install_chart(cp, f"operator.watchNamespaces={{{NS}}}")
        op_config = cp.write_kubeconfig(f"system:serviceaccount:{RELEASE_NS}:{OPERATOR_SA}",
                                        token=api.token(RELEASE_NS, OPERATOR_SA))
        proc = subprocess.Popen(
            [sys.executable, "-c",
             "import sys; from xla_sentinel_operator.main import run; sys.exit(run(sys.argv[1:]))",
             "--kubeconfig", str(op_config), "--namespace", NS, "--standalone",
             "--service-account", WORKER_SA,
             "--metrics-host", "127.0.0.1", "--metrics-port", str(free_port()),
             "--rollup-interval", str(args.rollup_interval), "--log-level", "WARNING"],
            stderr=subprocess.DEVNULL)
        try:
            yield proc.pid
        finally:
            proc.terminate()
            proc.wait(30)
        return
    images = built_images()
    with RealNode(cp, [Path(images[t]["archive"]) for t in ("operator", "runner-cpu")]) as node:
        sets = [*chart_image_values(images), f"operator.watchNamespaces={{{NS}}}",
                "operator.replicas=1", "operator.logLevel=warning",
                "operator.extraArgs[0]=--standalone",
                f"operator.extraArgs[1]=--rollup-interval={args.rollup_interval}"]
        helm_install(cp, sets)
        deadline = time.monotonic() + 300
        while True:
            pods = api.all("v1/pods", RELEASE_NS, {"app.kubernetes.io/component": "operator"})
            statuses = [s for p in pods for s in p["status"].get("containerStatuses") or []]
            if statuses and statuses[0].get("ready"):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the operator pod is not Ready within 300 s: {statuses}")
            time.sleep(1)
        yield node.container_pid(statuses[0]["containerID"])


def main(args: argparse.Namespace) -> None:
    per_worker = args.findings // args.workers
    findings = per_worker * args.workers
    signatures = [hashlib.sha256(f"sig{i}".encode()).hexdigest()[:16] for i in range(args.signatures)]
    spec = {"workers": args.workers, "budget": {"continuous": True}, "bisect": {"enabled": False}}
    if args.real_node:  # see the module docstring: the workers' writes come from threads
        spec["nodeSelector"] = {"xlasentinel.dev/bench": "no-such-node"}
    with ControlPlane(audit=True) as cp:
        api = Api(cp)
        for ns in (RELEASE_NS, NS):
            kubectl(cp, "create", "namespace", ns)
        with operator_process(cp, api, args) as pid:
            created = api.create(f"{API}/fuzzcampaigns", NS, {
                "apiVersion": API, "kind": "FuzzCampaign", "metadata": {"name": "scale"},
                "spec": spec})
            uid = created["metadata"]["uid"]
            while not api.all("batch/v1/jobs", NS):
                time.sleep(0.2)
            # The Job controller's pods (Pending: no node runs them), one per index; each
            # simulated worker writes with a token bound to its pod, as the kubelet mounts it.
            pods = worker_pods(api, args.workers)
            configs = [cp.write_kubeconfig(f"worker-{i}", namespace=NS, token=api.token(
                NS, WORKER_SA, pod=pods[i])) for i in range(args.workers)]
            base_mem = memory_kib(pid)
            etcd_before = cp.etcd_metrics()
            t0 = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
                for job in [pool.submit(run_worker, configs[i], uid, i, per_worker, signatures,
                                        pods[i]["metadata"]["name"])
                            for i in range(args.workers)]:
                    job.result()
            t_written = time.perf_counter()
            while not converged(api, findings, args.signatures, args.workers):
                time.sleep(0.5)
            t_done = time.perf_counter()
            mem = memory_kib(pid)
            time.sleep(2)  # the audit log is written in batches
            etcd_after = cp.etcd_metrics()
            counts = requests_by_user(cp.audit_log)

    received = (etcd_after.get("etcd_network_client_grpc_received_bytes_total", 0)
                - etcd_before.get("etcd_network_client_grpc_received_bytes_total", 0))
    where = "as the chart's pod on the real node" if args.real_node else "as a process on the host"
    print(f"operator_scale (real kube-apiserver + etcd; operator {where}): {args.workers} workers, {findings} findings, "
          f"{args.signatures} signatures, rollup interval {args.rollup_interval}s")
    print(f"  workers writing (wall, {args.threads} threads): {t_written - t0:8.1f} s")
    print(f"  converged after the last write:                 {t_done - t_written:8.1f} s")
    print(f"  first write to converged status:                {t_done - t0:8.1f} s")
    print(f"  operator memory: peak {mem['VmHWM'] / 1024:.0f} MiB, now {mem['VmRSS'] / 1024:.0f} MiB "
          f"(idle before load {base_mem['VmRSS'] / 1024:.0f} MiB)")
    print(f"  API requests: operator {counts['operator']} ({counts['operator'] / findings:.2f} per "
          f"finding), workers {counts['workers']} ({counts['workers'] / findings:.2f} per finding), "
          f"others {counts['other']}")
    print(f"  bytes etcd received from kube-apiserver: {received / 1e6:.1f} MB "
          f"({received / findings / 1024:.1f} KiB per finding)")
    print(f"  etcd database at the end: {etcd_after.get('etcd_mvcc_db_total_size_in_bytes', 0) / 1e6:.1f} MB, "
          f"in use {etcd_after.get('etcd_mvcc_db_total_size_in_use_in_bytes', 0) / 1e6:.1f} MB")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=1000)
    p.add_argument("--findings", type=int, default=10000)
    p.add_argument("--signatures", type=int, default=100)
    p.add_argument("--threads", type=int, default=16, help="concurrent worker writers")
    p.add_argument("--rollup-interval", type=float, default=2.0)
    p.add_argument("--real-node", action="store_true",
                   help="run the operator as the chart's pod from its image on the real node")
    main(p.parse_args())
