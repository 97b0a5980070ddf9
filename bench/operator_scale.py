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

With --kwok-nodes N (tests/controlplane/kwok.py: kwok from its Go module, `make kwok`), N
nodes in GKE-like pools (a fifth TPU: v6e 2x2 and v5e 2x2 pools, tainted google.com/tpu; the
rest CPU) and the real kube-scheduler: the campaign's worker pods are placed by the scheduler
and run (Running and Ready) by kwok's stages, beside a TPU campaign of --tpu-workers v6e 2x2
workers on the v6e pool. Then, for each of --revisions revisions (a spec change makes the
next: new Jobs, new pods, new reports), every worker's reporter writes as a worker does in a
long campaign: the findings once (first revision), then progress every second, written at the
interval the operator sets in the pod (XLA_SENTINEL_REPORT_INTERVAL) for --steady-seconds,
then its last report. Prints per revision: the time until every pod ran, API writes per
second in steady state (audit log, by writer), the operator's CPU and memory, etcd's bytes,
the roll-up's latency after the last write; and after them an operator upgrade whose release
adds a defaulted spec field (the Jobs kept, by uid). Goals (issue 38): under 50 writes/s at
4,096 workers in steady state, operator under 300 MiB, converged within 10 s.

    .venv/bin/python bench/operator_scale.py --kwok-nodes 1000 --workers 4096 \
        [--tpu-workers 100 --revisions 3 --steady-seconds 300]

With --restart N,N,... (no kwok: the worker pods stay Pending), a freshly started operator (an
upgrade, a failover) facing many reports (issue 38): per stage a campaign of N workers, its pods
made by the Job controller and each worker's report written; then the operator is restarted,
its memory sampled every 0.1 s for 30 s, the campaign's spec changed and the time until its
status shows the new observedGeneration measured, with how many reports the new operator had
ingested by then (and how many still waited in its backlog). Stages add up, so the memory per
1,000 reports is the slope between them. --trace-memory runs the restarted operator under
tracemalloc and writes its largest allocation sites to a file. Either way the operator writes
Python's allocator statistics (sys._debugmallocstats) to its log before it is restarted, 30 s
after the restart and once every report is ingested: the bytes live objects fill against the
arenas held, i.e. how much of the memory is live and how much is free space the heap keeps.

    .venv/bin/python bench/operator_scale.py --restart 750,750 [--trace-memory]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

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
from controlplane.kwok import Kwok, NodePool, cpu_pool, tpu_pool  # noqa: E402
from controlplane.node import RealNode, built_images, chart_image_values  # noqa: E402
from k8s.workers import reports_api  # noqa: E402
from xla_sentinel.cluster.report import writer_name  # noqa: E402
from xla_sentinel.cluster.reporter import K8sReporter, report_interval  # noqa: E402

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


def worker_pods(api: Api, workers: int, timeout: float = 600) -> dict[int, dict[str, Any]]:
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


# --- With --kwok-nodes: many nodes, placed and running pods, steady state over revisions ---

TPU_CAMPAIGN = "tpu"
V6E_2X2 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x2", "count": 4}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
READ_VERBS = (b'"verb":"get"', b'"verb":"list"', b'"verb":"watch"')
POD_NAME_CLAIM = "authentication.kubernetes.io/pod-name"
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def kwok_pools(nodes: int) -> list[NodePool]:
    """A fifth TPU (three quarters v6e 2x2, a quarter v5e 2x2), the rest CPU."""
    tpu = nodes // 5
    v6e = tpu * 3 // 4
    return [tpu_pool("v6e-2x2", v6e, "tpu-v6e-slice", "2x2", 4, "ct6e-standard-4t"),
            tpu_pool("v5e-2x2", tpu - v6e, "tpu-v5-lite-podslice", "2x2", 4, "ct5lp-hightpu-4t"),
            cpu_pool("cpu", nodes - tpu)]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


class AuditWrites:
    """Counts the API writes in kube-apiserver's audit log, read on from where it left off:
    by writer (operator, the workers of each campaign by their token's pod, kwok, scheduler,
    controllers, this bench as admin) and, for a time window, per second."""

    def __init__(self, log: Path) -> None:
        self.log, self.offset, self.inode = log, 0, 0
        self.events: list[tuple[float, str]] = []  # (received, writer)

    def read(self, chunk: int = 64 << 20) -> None:
        inode = self.log.stat().st_ino
        if self.inode and inode != self.inode:
            # kube-apiserver rotated the log (lumberjack: at 100 MB unless told otherwise,
            # renamed to audit-<time>.log): the rest of the old file is its newest backup,
            # and the new file is read from its start. Read on from the old offset in the
            # new file, a reader lands mid-line.
            backups = sorted(self.log.parent.glob(f"{self.log.stem}-*{self.log.suffix}"),
                             key=lambda b: b.stat().st_mtime)
            if backups:
                self._read_from(backups[-1], chunk)
            self.offset = 0
        self.inode = inode
        self._read_from(self.log, chunk)

    def _read_from(self, path: Path, chunk: int) -> None:
        with open(path, "rb") as f:
            f.seek(self.offset)
            while data := f.read(chunk):
                end = data.rfind(b"\n") + 1
                if not end:
                    break
                self.offset += end
                f.seek(self.offset)
                self._lines(data[:end].splitlines())

    def _lines(self, lines: list[bytes]) -> None:
        for line in lines:
            if any(v in line for v in READ_VERBS):  # most of the log; skipped unparsed
                continue
            event = json.loads(line)
            if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
                continue
            when = datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()
            self.events.append((when, self.writer(event.get("user") or {})))

    @staticmethod
    def writer(user: dict[str, Any]) -> str:
        name = user.get("username", "")
        if name.endswith(f":{OPERATOR_SA}"):
            return "operator"
        if name.endswith(f":{WORKER_SA}"):
            pod = ((user.get("extra") or {}).get(POD_NAME_CLAIM) or [""])[0]
            return f"workers:{TPU_CAMPAIGN}" if pod.startswith(f"{TPU_CAMPAIGN}-") else "workers:scale"
        return {"kwok": "kwok", "system:kube-scheduler": "scheduler",
                "system:kube-controller-manager": "controllers", "xs:kwok-node-lifecycle": "node-lifecycle",
                "admin": "bench"}.get(name, "other")

    def per_second(self, start: float, end: float) -> dict[str, float]:
        counts = Counter(w for t, w in self.events if start <= t < end)
        return {w: n / (end - start) for w, n in sorted(counts.items())}


class Writer:
    """One worker pod's reporter, as the runner builds it in the pod (cluster/pod.py): its
    revision and report interval from the pod's env, its report name from the pod's name,
    logged in with a token bound to the pod."""

    def __init__(self, api: Any, pod: dict[str, Any], uid: str) -> None:
        env = {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}
        name = pod["metadata"]["name"]
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        self.reporter = K8sReporter(
            api, namespace=NS, campaign=env["XLA_SENTINEL_CAMPAIGN"], campaign_uid=uid,
            worker=f"{env['XLA_SENTINEL_WORKER_GROUP']}-{index}",
            revision=env["XLA_SENTINEL_REVISION"], name=writer_name(name),
            progress_interval=report_interval(5.0, env))
        self.programs = 0

    def counters(self, programs: int) -> dict[str, Any]:
        self.programs = programs
        return {"programs": programs, "executions": 4 * programs, "findings": {},
                "elapsed_s": float(programs)}


def writer_apis(configs: list[Path], pool_size: int) -> list[Any]:
    """The workers' kubernetes clients, one per pod token. They share one connection pool:
    the token is a header, the TLS setup (the cluster CA) the same for all, and 4,096 pools
    in one process would hold 4,096 TLS connections open to one API server."""
    apis = [reports_api(c) for c in configs]
    shared = apis[0].api_client.rest_client.pool_manager
    shared.connection_pool_kw["maxsize"] = pool_size
    for a in apis[1:]:
        a.api_client.rest_client.pool_manager = shared
    return apis


def campaign_pods(api: Api, campaign: str, revision: str, want: int, running: bool,
                  timeout: float) -> list[dict[str, Any]]:
    """The campaign's worker pods of `revision`, once there are `want` (and all Running and
    Ready, when kwok runs them)."""
    deadline = time.monotonic() + timeout
    selector = f"xlasentinel.dev/campaign={campaign},xlasentinel.dev/role=worker," \
               f"xlasentinel.dev/revision={revision}"
    while True:
        try:
            found = list_pods(api, selector)
        except OSError:  # a busy API server answering a list of thousands late: look again
            found = []
        pods = [p for p in found if not p["metadata"].get("deletionTimestamp")
                and p["status"].get("phase") not in ("Failed", "Succeeded")]
        ready = [p for p in pods if p["status"].get("phase") == "Running" and any(
            c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])]
        done = ready if running else pods
        if len(done) >= want:
            return sorted(done, key=lambda p: p["metadata"]["name"])
        if time.monotonic() > deadline:
            raise SystemExit(f"{campaign} revision {revision}: {len(pods)} pods, {len(ready)} running "
                             f"of {want} after {timeout:.0f} s")
        time.sleep(10)  # each look lists thousands of pods


def list_pods(api: Api, selector: str, page: int = 500) -> list[dict[str, Any]]:
    """Pods by label selector, a page at a time (one list of 4,096 pods outlasts the
    client's timeout on a loaded API server)."""
    out: list[dict[str, Any]] = []
    token = ""
    while True:
        query = f"?labelSelector={selector}&limit={page}" + (f"&continue={token}" if token else "")
        code, body = api.request("GET", f"/api/v1/namespaces/{NS}/pods{query}")
        if code != 200:
            raise OSError(f"listing pods: {code} {body.get('message')}")
        out += body.get("items") or []
        token = (body.get("metadata") or {}).get("continue") or ""
        if not token:
            return out


def current_revision(api: Api, campaign: str, generation: int, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while True:
        st = (api.get(f"{API}/fuzzcampaigns", NS, campaign) or {}).get("status") or {}
        if st.get("observedGeneration") == generation and st.get("revision"):
            return str(st["revision"])
        if time.monotonic() > deadline:
            raise SystemExit(f"{campaign}: generation {generation} not rolled up in {timeout:.0f} s")
        time.sleep(0.5)


def rolled_up(api: Api, campaign: str, workers: int, programs: int, findings: int | None) -> bool:
    """The campaign's status counts every current worker's last report (and, given, the
    findings all of them reported)."""
    st = (api.get(f"{API}/fuzzcampaigns", NS, campaign) or {}).get("status") or {}
    stats = st.get("workerStats") or {}
    return (stats.get("workers"), stats.get("programsMin"), stats.get("programsMax")) \
        == (workers, programs, programs) and findings in (None, st.get("findingsTotal"))


def steady_state(writers: list[Writer], seconds: float, threads: int, t0: float) -> None:
    """Every worker's engine reports progress each second for `seconds` (its reporter writes
    when its interval is due), split over `threads` threads."""
    stop = time.monotonic() + seconds

    def loop(part: list[Writer]) -> None:
        while time.monotonic() < stop:
            tick = time.monotonic()
            programs = int(10 * (time.monotonic() - t0))
            for w in part:
                w.reporter.progress(w.counters(programs))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(loop, writers[i::threads]) for i in range(threads)]:
            f.result()


def in_parallel(fn: Any, items: list[Any], threads: int) -> list[Any]:
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, items))


UPGRADED_OPERATOR = """
import dataclasses, sys
from xla_sentinel.spec.campaign import CampaignSpec
from xla_sentinel_operator import runtime
from xla_sentinel_operator.main import run
# The next release: its CampaignSpec has one more field, defaulted (tests/k8s/test_upgrades.py).
newer = dataclasses.make_dataclass("CampaignSpec", [("retryPolicy", str, dataclasses.field(default="auto"))],
                                   bases=(CampaignSpec,), frozen=True)
parse = runtime.parse_spec
def parse_spec(data, path="spec"):
    spec = parse(data, path)
    return newer(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})
runtime.parse_spec = parse_spec
sys.exit(run(sys.argv[1:]))
"""
# The operator, which on SIGUSR1 writes Python's allocator statistics to its log (stderr):
# how much of its memory live objects fill and how much is free in pymalloc's arenas.
OPERATOR = ("import signal, sys; signal.signal(signal.SIGUSR1, lambda *_: sys._debugmallocstats()); "
            "from xla_sentinel_operator.main import run; sys.exit(run(sys.argv[1:]))")
# --restart --trace-memory: the restarted operator under tracemalloc; its largest allocation
# sites (by line, the live ones at the peak of traced memory, and 30 s after the start) go to
# the file in $XS_TRACE. Snapshots are taken in the operator's event loop, from its start
# (Runtime.start) on. Under tracemalloc the operator takes tens of seconds to import and
# start on a loaded machine: the bench waits for its /metrics before the 30 s begin.
TRACED_OPERATOR = """
import asyncio, os, signal, sys, time, tracemalloc
tracemalloc.start(6)
signal.signal(signal.SIGUSR1, lambda *_: sys._debugmallocstats())
from xla_sentinel_operator import runtime
def write(f, title, snap, size):
    f.write(f"{title}: {size / 2**20:.0f} MiB traced\\n")
    for group, n in (("filename", 12), ("lineno", 25)):
        f.write(f"by {group}:\\n")
        for stat in snap.statistics(group)[:n]:
            f.write(f"{stat.size / 2**20:7.1f} MiB {stat.count:8d} blocks  {stat.traceback[0]}\\n")
    f.write("by traceback (innermost first):\\n")
    for stat in snap.statistics("traceback")[:15]:
        f.write(f"{stat.size / 2**20:7.1f} MiB {stat.count:8d} blocks\\n")
        for frame in stat.traceback:
            f.write(f"      {frame}\\n")
async def watch():
    best, snap = 0, None
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30:
        now = tracemalloc.get_traced_memory()[0]
        if now > best * 1.05:
            best, snap = now, tracemalloc.take_snapshot()
        await asyncio.sleep(0.5)
    late = tracemalloc.take_snapshot()
    with open(os.environ["XS_TRACE"], "w") as f:
        f.write(f"traced peak {tracemalloc.get_traced_memory()[1] / 2**20:.0f} MiB\\n")
        write(f, "at the largest snapshot", snap, best)
        write(f, "30 s after the start", late, tracemalloc.get_traced_memory()[0])
_start = runtime.Runtime.start
async def start(self):
    await _start(self)
    self.spawn(asyncio.create_task(watch()))
runtime.Runtime.start = start
from xla_sentinel_operator.main import run
sys.exit(run(sys.argv[1:]))
"""


def start_operator(cp: ControlPlane, api: Api, args: argparse.Namespace,
                   code: str = OPERATOR, metrics_port: int = 0) -> subprocess.Popen[bytes]:
    op_config = cp.write_kubeconfig(f"system:serviceaccount:{RELEASE_NS}:{OPERATOR_SA}",
                                    token=api.token(RELEASE_NS, OPERATOR_SA))
    return subprocess.Popen(
        [sys.executable, "-c", code, "--kubeconfig", str(op_config), "--namespace", NS,
         "--standalone", "--service-account", WORKER_SA, "--metrics-host", "127.0.0.1",
         "--metrics-port", str(metrics_port or free_port()),
         "--rollup-interval", str(args.rollup_interval),
         "--log-level", "WARNING"], stderr=operator_log())


def operator_log() -> IO[bytes]:
    """The operator's warnings, kept after the control plane's folder is removed."""
    fd, name = tempfile.mkstemp(prefix="xs-bench-operator-", suffix=".log")
    print(f"  (operator log: {name})", flush=True)
    return os.fdopen(fd, "ab")


def stop_operator(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:  # under tracemalloc kopf's shutdown can take longer
        proc.kill()
        proc.wait(30)


def upgrade(cp: ControlPlane, api: Api, args: argparse.Namespace, proc: subprocess.Popen[bytes],
            campaigns: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """Replace the operator by the next release, whose spec adds a defaulted field: no Job
    may be replaced, no revision change. Returns the new operator and what was seen."""
    before = {j["metadata"]["name"]: j["metadata"]["uid"] for j in api.all("batch/v1/jobs", NS)}
    revs = {n: (api.get(f"{API}/fuzzcampaigns", NS, n) or {})["status"]["revision"] for n in campaigns}
    stop_operator(proc)
    t_up = time.perf_counter()
    proc = start_operator(cp, api, args, UPGRADED_OPERATOR)
    time.sleep(max(30.0, 10 * args.rollup_interval))
    after = {j["metadata"]["name"]: j["metadata"]["uid"] for j in api.all("batch/v1/jobs", NS)}
    replaced = sorted(n for n in before if after.get(n) != before[n])
    same_rev = all((api.get(f"{API}/fuzzcampaigns", NS, n) or {})["status"]["revision"] == revs[n]
                   for n in campaigns)
    up = memory_kib(proc.pid)
    return proc, (f"operator upgrade (a release whose spec adds a defaulted field), "
                  f"{time.perf_counter() - t_up:.0f} s after it: {len(replaced)} of {len(before)} Jobs "
                  f"replaced, revisions {'unchanged' if same_rev else 'CHANGED'}; its memory "
                  f"{up['VmRSS'] / 1024:.0f} MiB (peak {up['VmHWM'] / 1024:.0f} MiB); the next "
                  f"revisions run on it")


def scale(args: argparse.Namespace) -> None:
    """The --kwok-nodes bench (module docstring)."""
    signatures = [hashlib.sha256(f"sig{i}".encode()).hexdigest()[:16] for i in range(args.signatures)]
    per_worker = args.findings // args.workers
    cp = ControlPlane(audit=True)
    # A large cluster's controller manager: the Job controller makes 4,096 pods per revision,
    # which at client-go's default 20 requests/s takes minutes on its own.
    cp.controller_manager.argv += ["--kube-api-qps=300", "--kube-api-burst=600"]
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    with cp, Kwok(cp, client_qps=300, parallelism=32, delete_nodes=False) as kw:
        api = Api(cp)
        audit = AuditWrites(cp.audit_log)
        t = time.perf_counter()
        for pool in kwok_pools(args.kwok_nodes):
            kw.add_pool(pool, timeout=900)
        say(f"kwok: {args.kwok_nodes} nodes Ready in {time.perf_counter() - t:.0f} s "
            f"({', '.join(f'{p.name} {p.count}' for p in kwok_pools(args.kwok_nodes))})")
        for ns in (RELEASE_NS, NS):
            kubectl(cp, "create", "namespace", ns)
        install_chart(cp, f"operator.watchNamespaces={{{NS}}}")
        proc = start_operator(cp, api, args)
        campaigns = {"scale": {"workers": args.workers, "nodeSelector": {"type": "kwok"}},
                     TPU_CAMPAIGN: {"workers": args.tpu_workers, "accelerator": V6E_2X2}}
        campaigns = {n: c for n, c in campaigns.items() if c["workers"]}
        uids = {}
        for name, spec in campaigns.items():
            uids[name] = api.create(f"{API}/fuzzcampaigns", NS, {
                "apiVersion": API, "kind": "FuzzCampaign", "metadata": {"name": name},
                "spec": {**spec, "budget": {"continuous": True}, "bisect": {"enabled": False}}
            })["metadata"]["uid"]
        rss_after: list[float] = []
        try:
            for rev in range(args.revisions):
                if rev:
                    for name in campaigns:
                        api.patch(f"{API}/fuzzcampaigns", NS, name, {"spec": {"seed": rev}})
                t_rev = time.perf_counter()
                revisions = {n: current_revision(api, n, rev + 1) for n in campaigns}
                pods = {n: campaign_pods(api, n, revisions[n], c["workers"], True, 1800)
                        for n, c in campaigns.items()}
                t_running = time.perf_counter() - t_rev
                nodes = Counter(kw_pool(p["spec"]["nodeName"]) for ps in pods.values() for p in ps)
                all_pods = [(n, p) for n, ps in pods.items() for p in ps]
                configs = in_parallel(lambda np: cp.write_kubeconfig(
                    f"worker-{np[1]['metadata']['name']}", namespace=NS,
                    token=api.token(NS, WORKER_SA, pod=np[1])), all_pods, args.threads)
                writers = [Writer(a, p, uids[n]) for a, (n, p) in
                           zip(writer_apis(configs, args.threads + 4), all_pods, strict=True)]
                say(f"revision {rev + 1}: {len(all_pods)} pods Running after {t_running:.0f} s, "
                    f"their tokens and clients after {time.perf_counter() - t_rev:.0f} s")
                t_start = time.perf_counter()

                def begin(iw: tuple[int, Writer], rev: int = rev) -> None:
                    i, w = iw
                    w.reporter.start()
                    for j in range(per_worker if rev == 0 and i < args.workers else 0):
                        g = i * per_worker + j
                        fid = hashlib.sha256(f"{g}".encode()).hexdigest()[:20]
                        w.reporter.finding({
                            "id": fid, "program": f"p{g}", "target": "default",
                            "verdict": "mismatch", "signature": signatures[g % len(signatures)],
                            "culprit_op": "add", "culprit_pass": None, "fusion_kind": None,
                            "dtype": "f32", "dir": f"findings/{fid}", "known_bug": None,
                            "time": "2026-11-29T10:00:00Z", "evidence": {}})

                in_parallel(begin, list(enumerate(writers)), args.threads)
                t_started = time.perf_counter() - t_start
                cpu0, wall0 = cpu_seconds(proc.pid), time.time()
                peak = 0.0
                steady_state(writers, args.steady_seconds, args.threads, time.monotonic())
                wall1, cpu1 = time.time(), cpu_seconds(proc.pid)
                mem = memory_kib(proc.pid)
                etcd_mid = cp.etcd_metrics()
                final = max(w.programs for w in writers) + 1
                in_parallel(lambda w, last=final: (w.reporter.progress(w.counters(last)),
                                                   w.reporter.close(done=False)),
                            writers, args.threads)
                t_last = time.perf_counter()
                found = {"scale": per_worker * args.workers} if rev == 0 else {}
                while not all(rolled_up(api, n, c["workers"], final, found.get(n))
                              for n, c in campaigns.items()):
                    if time.perf_counter() - t_last > 600:
                        raise SystemExit(f"revision {rev}: not rolled up 600 s after the last write")
                    time.sleep(0.2)
                latency = time.perf_counter() - t_last
                peak = max(peak, memory_kib(proc.pid)["VmHWM"] / 1024)
                rss_after.append(memory_kib(proc.pid)["VmRSS"] / 1024)
                time.sleep(3)  # the audit log is written in batches
                audit.read()
                rates = audit.per_second(wall0, wall1)
                workers_rate = sum(v for k, v in rates.items() if k.startswith("workers"))
                say(f"revision {rev + 1} ({', '.join(f'{n} {revisions[n]}' for n in campaigns)}):")
                say(f"  {len(all_pods)} worker pods placed by kube-scheduler and Running (kwok) "
                    f"{t_running:6.0f} s after the {'campaigns' if rev == 0 else 'spec change'}; "
                    f"by pool: {dict(sorted(nodes.items()))}")
                say(f"  reporters started (first write{', findings' if rev == 0 else ''}): {t_started:.0f} s; "
                    f"steady state {wall1 - wall0:.0f} s at report intervals "
                    f"{sorted({w.reporter.progress_interval for w in writers})} s")
                say(f"  steady-state API writes/s: workers {workers_rate:.1f} "
                    f"({', '.join(f'{k} {v:.1f}' for k, v in rates.items())})")
                say(f"  operator: CPU {100 * (cpu1 - cpu0) / (wall1 - wall0):.1f}% of a core in steady "
                    f"state; memory {mem['VmRSS'] / 1024:.0f} MiB in steady state, peak {peak:.0f} MiB, "
                    f"{rss_after[-1]:.0f} MiB after the roll-up")
                say(f"  converged {latency:.1f} s after the last write")
                say(f"  etcd: database {etcd_mid.get('etcd_mvcc_db_total_size_in_bytes', 0) / 1e6:.1f} MB "
                    f"(in use {etcd_mid.get('etcd_mvcc_db_total_size_in_use_in_bytes', 0) / 1e6:.1f} MB), "
                    f"took in {etcd_mid.get('etcd_network_client_grpc_received_bytes_total', 0) / 1e6:.0f} MB so far")
                if rev == 0:  # in steady operation, so that a short run measures it too
                    proc, seen = upgrade(cp, api, args, proc, list(campaigns))
                    say(seen)
            say(f"operator memory after each revision's roll-up: "
                f"{', '.join(f'{m:.0f}' for m in rss_after)} MiB")
        finally:
            stop_operator(proc)


# --- With --restart: a freshly started operator (upgrade, failover) facing many reports ---

def metric(port: int, name: str) -> float:
    """One sample of the operator's /metrics (0 when absent)."""
    import urllib.request
    # 60 s: an operator under tracemalloc (--trace-memory) stalls while it takes a snapshot.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def report_object(campaign: str, uid: str, revision: str, index: int,
                  signatures: list[str]) -> dict[str, Any]:
    """A worker's last report as its reporter writes it (K8sReporter._object): two findings,
    progress, one per worker; written as the admin in one request."""
    from xla_sentinel.cluster.report import (
        CAMPAIGN_LABEL,
        REPORT_LABEL,
        REVISION_LABEL,
        WORKER_LABEL,
        WorkerReport,
        label_value,
        report_name,
    )
    worker = f"main-{index}"
    report = WorkerReport(worker=worker, revision=revision, attempts=1, programs=50,
                          executions=200, elapsed_s=10.0, updated="2026-11-29T10:00:00Z")
    for j in range(2):
        g = 2 * index + j
        fid = hashlib.sha256(f"{campaign}/{g}".encode()).hexdigest()[:20]
        report.add_finding({"id": fid, "program": f"p{g}", "target": "default",
                            "verdict": "mismatch", "signature": signatures[g % len(signatures)],
                            "culprit_op": "add", "culprit_pass": None, "fusion_kind": None,
                            "dtype": "f32", "dir": f"findings/{fid}", "known_bug": None,
                            "time": "2026-11-29T10:00:00Z", "evidence": {}})
    return {"apiVersion": API, "kind": "WorkerReport",
            "metadata": {"name": report_name(campaign, worker, revision),
                         "labels": {CAMPAIGN_LABEL: label_value(campaign), REPORT_LABEL: "true",
                                    WORKER_LABEL: label_value(worker),
                                    REVISION_LABEL: label_value(revision)},
                         "ownerReferences": [{"apiVersion": API, "kind": "FuzzCampaign",
                                              "name": campaign, "uid": uid,
                                              "blockOwnerDeletion": False, "controller": False}]},
            "spec": {"campaign": campaign, "worker": worker, "revision": revision,
                     "report": report.to_json()}}


class RssSampler:
    """A process's RSS sampled every 0.1 s in a thread: the peak (MiB) and when (s after the
    start) it was reached."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every = pid, every
        self.peak, self.at, self.t0 = 0.0, 0.0, time.monotonic()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            rss = memory_kib(self.pid)["VmRSS"] / 1024
            if rss > self.peak:
                self.peak, self.at = rss, time.monotonic() - self.t0
            time.sleep(self.every)

    def stop(self) -> tuple[float, float]:
        self._stop = True
        self._thread.join()
        return self.peak, self.at


def restart(args: argparse.Namespace) -> None:
    """The --restart bench: campaigns of --restart worker counts (cumulative), each worker's
    pod made by the Job controller (Pending: no node) and its report written; after each,
    the operator is restarted and its memory sampled (peak, and 30 s on), then the campaign's
    spec changed and the time to observedGeneration measured, beside how many reports the
    new operator had ingested by then."""
    stages = [int(n) for n in args.restart.split(",")]
    signatures = [hashlib.sha256(f"sig{i}".encode()).hexdigest()[:16] for i in range(args.signatures)]
    cp = ControlPlane(audit=False)
    cp.controller_manager.argv += ["--kube-api-qps=300", "--kube-api-burst=600"]
    rows: list[str] = []
    with cp:
        api = Api(cp)
        for ns in (RELEASE_NS, NS):
            kubectl(cp, "create", "namespace", ns)
        install_chart(cp, f"operator.watchNamespaces={{{NS}}}")
        port = free_port()
        proc = start_operator(cp, api, args, metrics_port=port)
        total = 0
        try:
            for i, n in enumerate(stages):
                name = f"r{i}"
                uid = api.create(f"{API}/fuzzcampaigns", NS, {
                    "apiVersion": API, "kind": "FuzzCampaign", "metadata": {"name": name},
                    "spec": {"workers": n, "budget": {"continuous": True},
                             "bisect": {"enabled": False},
                             "nodeSelector": {"xlasentinel.dev/bench": "no-such-node"}}
                })["metadata"]["uid"]
                rev = current_revision(api, name, 1)
                campaign_pods(api, name, rev, n, False, 900)
                t = time.perf_counter()
                in_parallel(lambda k, name=name, uid=uid, rev=rev: api.create(
                    f"{API}/workerreports", NS, report_object(name, uid, rev, k, signatures)),
                    list(range(n)), args.threads)
                total += n
                while not (api.get(f"{API}/fuzzcampaigns", NS, name) or {}).get(
                        "status", {}).get("workerStats", {}).get("workers") == n \
                        or metric(port, "xlasentinel_reports_ingested_total") < n:
                    time.sleep(0.5)
                steady = memory_kib(proc.pid)["VmRSS"] / 1024
                print(f"stage {i + 1}: {n} workers' pods and reports written, rolled up and ingested "
                      f"in {time.perf_counter() - t:.0f} s; operator {steady:.0f} MiB", flush=True)
                proc.send_signal(signal.SIGUSR1)  # the grown operator's allocator, for comparison
                time.sleep(1)
                stop_operator(proc)
                port = free_port()
                if args.trace_memory:
                    os.environ["XS_TRACE"] = trace = f"/tmp/xs-bench-trace-{total}.txt"
                    print(f"  (allocation sites of the restarted operator: {trace})")
                proc = start_operator(cp, api, args, TRACED_OPERATOR if args.trace_memory else OPERATOR,
                                      metrics_port=port)
                sampler = RssSampler(proc.pid)
                while args.trace_memory:
                    with contextlib.suppress(OSError):
                        metric(port, "xlasentinel_reports_ingested_total")
                        break
                    if proc.poll() is not None:
                        break
                    time.sleep(0.5)
                time.sleep(30)
                if proc.poll() is not None:
                    raise SystemExit(f"the restarted operator exited ({proc.returncode}); its log is above")
                after = memory_kib(proc.pid)["VmRSS"] / 1024
                proc.send_signal(signal.SIGUSR1)  # the allocator's statistics 30 s on, in its log
                ingested_30 = metric(port, "xlasentinel_reports_ingested_total")
                gen = int(api.patch(f"{API}/fuzzcampaigns", NS, name,
                                    {"spec": {"seed": 1}})["metadata"]["generation"])
                t = time.perf_counter()
                current_revision(api, name, gen, timeout=600)
                observed = time.perf_counter() - t
                ingested = metric(port, "xlasentinel_reports_ingested_total")
                backlog = metric(port, "xlasentinel_report_backlog")
                t = time.perf_counter()
                while metric(port, "xlasentinel_reports_ingested_total") < total \
                        or metric(port, "xlasentinel_report_backlog") > 0:
                    if time.perf_counter() - t > 600:
                        raise SystemExit(f"the restarted operator did not ingest {total} reports in 600 s")
                    time.sleep(0.5)
                peak, at = sampler.stop()
                drained = memory_kib(proc.pid)["VmRSS"] / 1024
                proc.send_signal(signal.SIGUSR1)  # and once every report is ingested
                rows.append(f"| {total} | {steady:.0f} | {after:.0f} | {peak:.0f} (at {at:.0f} s) | "
                            f"{drained:.0f} | {observed:.1f} s | {ingested_30:.0f}, {ingested:.0f} "
                            f"({backlog:.0f} waiting) |")
                print(f"  restarted: {after:.0f} MiB 30 s on, peak {peak:.0f} MiB at {at:.1f} s until every "
                      f"report was ingested, {drained:.0f} MiB then; "
                      f"observedGeneration {gen} {observed:.1f} s after the spec change "
                      f"(reports ingested by the new operator: {ingested_30:.0f} at 30 s, "
                      f"{ingested:.0f} then, {backlog:.0f} waiting)", flush=True)
        finally:
            stop_operator(proc)
    print("| reports held | steady MiB | restarted: 30 s on MiB | peak MiB (until ingested) | "
          "ingested MiB | observedGeneration after spec change | reports ingested by it at 30 s, then |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def kw_pool(node: str) -> str:
    return node.rpartition("-")[0]


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=1000)
    p.add_argument("--findings", type=int, default=10000)
    p.add_argument("--signatures", type=int, default=100)
    p.add_argument("--threads", type=int, default=16, help="concurrent worker writers")
    p.add_argument("--rollup-interval", type=float, default=2.0)
    p.add_argument("--real-node", action="store_true",
                   help="run the operator as the chart's pod from its image on the real node")
    p.add_argument("--kwok-nodes", type=int, default=0,
                   help="run the workers' pods on this many kwok nodes, placed by kube-scheduler, "
                        "and measure steady state over revisions (module docstring)")
    p.add_argument("--tpu-workers", type=int, default=100,
                   help="with --kwok-nodes: workers of a second, TPU v6e 2x2 campaign")
    p.add_argument("--revisions", type=int, default=3, help="with --kwok-nodes")
    p.add_argument("--steady-seconds", type=float, default=300.0, help="with --kwok-nodes, per revision")
    p.add_argument("--restart", default="", metavar="N,N,...",
                   help="restart bench: campaigns of these worker counts (pods Pending, one report "
                        "each), the operator restarted after each (module docstring)")
    p.add_argument("--trace-memory", action="store_true",
                   help="with --restart: the restarted operator under tracemalloc (its memory "
                        "figures then include tracemalloc's own)")
    a = p.parse_args()
    if a.restart:
        restart(a)
        sys.exit(0)
    if a.kwok_nodes and a.real_node:
        p.error("--kwok-nodes runs the operator as a process; --real-node is the burst bench's")
    if a.kwok_nodes and a.tpu_workers > len(kwok_pools(a.kwok_nodes)[0].names):
        p.error(f"--tpu-workers {a.tpu_workers}: the v6e pool of {a.kwok_nodes} nodes has "
                f"{kwok_pools(a.kwok_nodes)[0].count} VMs, one worker each")
    if a.workers < 1 or a.revisions < 1 or a.steady_seconds <= 0:
        p.error("--workers and --revisions must be at least 1, --steady-seconds positive")
    scale(a) if a.kwok_nodes else main(a)
