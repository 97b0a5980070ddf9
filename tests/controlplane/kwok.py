"""Many nodes without machines: kwok (sigs.k8s.io/kwok, built by `make kwok` from its Go
module into the control plane's cache folder, with its stage manifests beside it) and the
real kube-scheduler, against a ControlPlane.

kwok plays the kubelet of every Node annotated `kwok.x-k8s.io/node: fake` (and of no other:
a FakeNode or the real node of the same control plane stays theirs), driven by kwok's own
Stage manifests from the module's kustomize/stage folder: a Node becomes Ready and keeps its
heartbeat and Lease; a pod the scheduler bound there becomes Running and Ready (pod/fast's
pod-ready), Failed with an exit code and reason taken from its annotations once it carries
the chaos label (pod/chaos's pod-container-running-failed, see `fail_pod`), and is deleted
once nothing holds it (pod/general's pod-delete, which waits for finalizers). No container
runs: where one must, the real node (node.py) runs it.

Two of kwok's pod/fast stages are not used as they are. Its pod-complete would finish every
Job's pod as soon as it runs (a fuzz worker runs until its budget): pod/general's
pod-complete is used instead with one more selector, COMPLETE_LABEL, so that a running pod
succeeds (exit 0) only once the test labels it (`complete_pod`), as a worker whose budget
ran out. Its pod-delete drops a Job's tracking finalizer and deletes a pod at once, so a pod
the eviction API marked DisruptionTarget would vanish before the Job controller (its pod
failure policy) or the operator (its disruption count) saw it terminal. POD_TERMINATE, not
kwok's, does what the kubelet does with a pod being deleted: its containers end with 143
(SIGTERM) and the pod turns Failed, its conditions kept; the Job controller then lifts its
finalizer and pod/general's pod-delete removes it, at a random time within the pod's grace
period.

Node pools are GKE's: `tpu_pool` labels nodes as GKE labels a TPU node pool
(cloud.google.com/gke-tpu-accelerator, gke-tpu-topology, gke-nodepool, the machine type),
taints them google.com/tpu=present:NoSchedule and gives them `google.com/tpu` chips to
allocate; `cpu_pool` makes plain nodes. The scheduler places pods on them by those labels,
taints and resources, as on GKE.
"""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from .cluster import Component, ControlPlane, ControlPlaneError, cache_dir

if TYPE_CHECKING:
    from .kit import Api

KWOK = "kwok"
STAGES = "kwok-stages"  # kwok's kustomize/stage folder, copied by build.sh
MANAGED = {"kwok.x-k8s.io/node": "fake"}  # the annotation kwok selects its nodes by
FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
COMPLETE_LABEL = "pod-complete.stage.kwok.x-k8s.io"  # the gate on POD_COMPLETE (see above)
NODEPOOL = "cloud.google.com/gke-nodepool"
TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
TPU_RESOURCE = "google.com/tpu"
TPU_TAINT = {"key": TPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
NOT_READY_TAINT = "node.kubernetes.io/not-ready"  # kube-apiserver's on a new Node
NODE_LEASES = ("coordination.k8s.io/v1/leases", "kube-node-lease")

# kube-scheduler and the node lifecycle controller serve nothing here (their HTTPS port is
# only for health and metrics, which nothing reads). Each once got a port from
# cluster.free_port(), which can hand out the same free port twice in a row: in a CI run
# both were given 41385, the lifecycle controller exited at once on "bind: address already
# in use", no node lost its not-ready taint and add_pool waited out its 300 s. kwok's own
# server (port-forward, logs, exec, metrics: kwokctl's) stays off for the same reason.
SERVING_OFF = ("--secure-port=0",)

# kwok's stages used, by their path under kustomize/stage.
KWOK_STAGES = ("node/fast/node-initialize.yaml",
               "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
               "pod/fast/pod-ready.yaml",
               "pod/chaos/pod-container-running-failed.yaml",
               "pod/general/pod-delete.yaml")
POD_COMPLETE = "pod/general/pod-complete.yaml"  # gated by COMPLETE_LABEL: pod_complete()

# See the module docstring: a deleted pod ends as the kubelet ends it, Failed with 143.
POD_TERMINATE: dict[str, Any] = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
    "metadata": {"name": "pod-terminate"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": [
            {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
            {"key": ".metadata.finalizers", "operator": "Exists"},
            {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]}]},
        "next": {"statusTemplate": """\
{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 143
      finishedAt: {{ $now | Quote }}
      reason: Error
{{ end }}
phase: Failed
"""}}}


def built() -> bool:
    where = cache_dir()
    return (where / KWOK).exists() and all((where / STAGES / s).exists()
                                           for s in (*KWOK_STAGES, POD_COMPLETE))


def pod_complete() -> dict[str, Any]:
    """kwok's pod/general pod-complete (a running, Ready pod of a Job ends with exit 0 and
    turns Succeeded), for the pods labelled COMPLETE_LABEL only; its delay annotations
    (`<COMPLETE_LABEL>/delay`, `/jitter-delay`) as kwok's."""
    stage: dict[str, Any] = yaml.safe_load((cache_dir() / STAGES / POD_COMPLETE).read_text())
    stage["spec"]["selector"]["matchExpressions"].append(
        {"key": f'.metadata.labels["{COMPLETE_LABEL}"]', "operator": "In", "values": ["true"]})
    return stage


def stages() -> list[dict[str, Any]]:
    """kwok's stages (KWOK_STAGES, read from the build), its gated pod-complete and
    POD_TERMINATE."""
    root = cache_dir() / STAGES
    return [*(yaml.safe_load((root / s).read_text()) for s in KWOK_STAGES), pod_complete(),
            POD_TERMINATE]


@dataclass(frozen=True)
class NodePool:
    """`count` nodes named `<name>-<i>`, alike: labels, taints and allocatable resources."""
    name: str
    count: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    allocatable: dict[str, str] = field(default_factory=dict)

    def node(self, index: int) -> dict[str, Any]:
        name = f"{self.name}-{index}"
        resources = {"cpu": "32", "memory": "128Gi", "ephemeral-storage": "100Gi", "pods": "110",
                     **self.allocatable}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": dict(MANAGED),
                             "labels": {**self.labels, NODEPOOL: self.name,
                                        "kubernetes.io/hostname": name,
                                        "kubernetes.io/os": "linux", "type": "kwok"}},
                "spec": {"taints": [dict(t) for t in self.taints]},
                "status": {"allocatable": resources, "capacity": resources}}

    @property
    def names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.count)]


def tpu_pool(name: str, count: int, accelerator: str, topology: str, chips: int,
             machine_type: str) -> NodePool:
    """A GKE TPU node pool of `count` VMs, each with `chips` chips (the machine type's)."""
    return NodePool(name, count,
                    labels={TPU_ACCELERATOR: accelerator, TPU_TOPOLOGY: topology,
                            INSTANCE_TYPE: machine_type},
                    taints=(TPU_TAINT,),
                    allocatable={TPU_RESOURCE: str(chips), "cpu": "180", "memory": "720Gi"})


def cpu_pool(name: str, count: int, machine_type: str = "n2-standard-32") -> NodePool:
    return NodePool(name, count, labels={INSTANCE_TYPE: machine_type})


class Kwok:
    """kwok, the node lifecycle controller and kube-scheduler for `cp`: start() runs them,
    add_pool() makes nodes and waits until they are Ready and untainted, stop() deletes the
    nodes made and stops them. Without
    `scheduler`, the one already running (the real node's, node.py) places the pods: two
    default schedulers would race for every pod."""

    def __init__(self, cp: ControlPlane, lease_seconds: int = 40, client_qps: int = 50,
                 name: str = "kwok", scheduler: bool = True, parallelism: int = 4,
                 delete_nodes: bool = True) -> None:
        if not built():
            raise ControlPlaneError(f"{KWOK} or its stages not built in {cache_dir()}: run `make kwok`")
        scheduler_bin = cache_dir() / "kube-scheduler"
        if not scheduler_bin.exists():
            raise ControlPlaneError(f"kube-scheduler not built in {cache_dir()}: run `make control-plane`")
        self.cp = cp
        self.root = cp.root / name
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "kwok.yaml"
        config.write_text(yaml.safe_dump_all([
            {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
             "options": {"manageNodesWithAnnotationSelector": "kwok.x-k8s.io/node=fake",
                         "nodeLeaseDurationSeconds": lease_seconds,
                         "nodeIP": "10.0.0.1", "cidr": "10.244.0.1/16",
                         # kwok's default of 4 concurrent stage plays moves a few pods a
                         # second on a loaded machine: a revision of 4,096 pods took minutes.
                         "podPlayStageParallelism": parallelism,
                         "nodePlayStageParallelism": parallelism}},
            *stages()]))
        kwok_pair = cp.pki.client("kwok", ("system:masters",))
        kwok_config = cp.write_kubeconfig("kwok", kwok_pair)
        self.kwok = Component(KWOK, [str(cache_dir() / KWOK), f"--config={config}",
                                     f"--kubeconfig={kwok_config}",
                                     "--v=WARN"], self.root)  # INFO logs every Lease renewal
        pair = cp.pki.client("system:kube-scheduler")
        sched_config = cp.write_kubeconfig("system:kube-scheduler", pair)
        # The same flags as the real node's scheduler (node.py), and a client rate fit for
        # thousands of pods (and, in the lifecycle controller, untainting 1,000 nodes) where a
        # bench asks for one. No process here listens on a port (see SERVING_OFF).
        self.scheduler = Component("kube-scheduler", [
            str(scheduler_bin), f"--kubeconfig={sched_config}",
            "--leader-elect=false", *SERVING_OFF,
            f"--kube-api-qps={client_qps}", f"--kube-api-burst={2 * client_qps}", "-v=1"],
            self.root)
        # The node lifecycle controller lifts the not-ready taint kube-apiserver puts on every
        # new Node once kwok reports it Ready, as on a cluster; the control plane's own
        # controller manager leaves it out (cluster.py). Its node-monitor period as node.py's.
        lc_pair = cp.pki.client("xs:kwok-node-lifecycle", ("system:masters",))
        lc_config = cp.write_kubeconfig("xs:kwok-node-lifecycle", lc_pair)
        self.lifecycle = Component("node-lifecycle", [
            str(cp.bins["kube-controller-manager"]), f"--kubeconfig={lc_config}",
            "--leader-elect=false", "--controllers=node-lifecycle-controller", *SERVING_OFF,
            # A lease renewed late (kwok behind on 1,000 of them on a loaded machine) would
            # mark its node's pods NotReady after the default 40 s, and kwok's stages, unlike
            # a kubelet's status loop, never make a Running pod Ready again.
            "--node-monitor-period=2s", "--node-monitor-grace-period=1h",
            f"--kube-api-qps={client_qps}",
            f"--kube-api-burst={2 * client_qps}", "-v=1"], self.root)
        self.nodes: list[str] = []
        self.delete_nodes = delete_nodes  # False where the control plane goes with them
        self.components = [self.kwok, self.lifecycle, *([self.scheduler] if scheduler else [])]

    def start(self) -> Kwok:
        for c in self.components:
            c.start()
        return self

    def add_pool(self, pool: NodePool, timeout: float = 300, threads: int = 8) -> list[str]:
        """Create the pool's nodes and wait until every one is schedulable(): kwok reports it
        Ready and the lifecycle controller has lifted its not-ready taint. A component that
        exits meanwhile ends the wait at once (its log's tail); a timeout says, per node, what
        is missing (diagnosis)."""
        from .kit import Api  # kit imports the operator's client; keep it off module import

        api = Api(self.cp)
        names = pool.names

        def create(i: int) -> None:
            api.create("v1/nodes", None, pool.node(i))

        with concurrent.futures.ThreadPoolExecutor(threads) as ex:
            list(ex.map(create, range(pool.count)))
        self.nodes += names
        deadline = time.monotonic() + timeout
        want = set(names)
        while True:
            ready = {n["metadata"]["name"] for n in api.all("v1/nodes", None, {NODEPOOL: pool.name})
                     if schedulable(n)}
            if want <= ready:
                return names
            # All three: without the lifecycle controller a node stays tainted not-ready,
            # without the scheduler no pod lands; either ends here with its log's tail.
            self.check_alive()
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{len(want & ready)} of {len(want)} nodes of {pool.name} "
                                        f"Ready and untainted in {timeout:.0f} s:\n"
                                        f"{self.diagnosis(api, names)}")
            time.sleep(0.5)

    def diagnosis(self, api: Api, names: list[str]) -> str:
        """What stands between each node of `names` and schedulable(): whether it exists, its
        Ready condition (kwok's node-initialize and heartbeat), its taints (the lifecycle
        controller lifts not-ready), its Lease's renewal (kwok's heartbeat-with-lease); then
        the tail of each component's log and whether it still runs."""
        lines = []
        for name in names:
            node = api.get("v1/nodes", None, name)
            if node is None:
                lines.append(f"  {name}: absent")
                continue
            cond = next((c for c in (node.get("status") or {}).get("conditions") or []
                         if c["type"] == "Ready"), None)
            ready = "no Ready condition" if cond is None else \
                f"Ready={cond['status']} ({cond.get('reason')}, heartbeat {cond.get('lastHeartbeatTime')})"
            taints = [f"{t['key']}:{t['effect']}" for t in node["spec"].get("taints") or []]
            lease = api.get(*NODE_LEASES, name)
            renewed = "no Lease" if lease is None else \
                f"Lease renewed {lease['spec'].get('renewTime')} by {lease['spec'].get('holderIdentity')}"
            lines.append(f"  {name}: {ready}; taints {taints}; {renewed}")
        for c in self.components:
            state = "running" if c.proc is not None and c.proc.poll() is None else \
                f"exited {c.proc.returncode}" if c.proc is not None else "not started"
            lines.append(f"-- {c.name} ({state}), {c.log_path}:\n{c.tail()}")
        return "\n".join(lines)

    def check_alive(self) -> None:
        for c in self.components:
            c.check_alive()

    def stop(self) -> None:
        from .kit import Api

        api = Api(self.cp)
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda n: api.delete("v1/nodes", None, n),
                        self.nodes if self.delete_nodes else []))
        self.nodes = []
        for c in reversed(self.components):
            c.stop()

    def __enter__(self) -> Kwok:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def schedulable(node: dict[str, Any]) -> bool:
    """Ready (kwok's node-initialize stage) and no longer tainted not-ready (the node
    lifecycle controller)."""
    status = node.get("status") or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []) \
        and not any(t["key"] == NOT_READY_TAINT for t in node["spec"].get("taints") or [])


def fail_pod(api: Any, namespace: str, pod: str, exit_code: int, reason: str = "Error") -> None:
    """Have kwok end a running pod's containers with `exit_code` (pod/chaos's stage, which
    acts on the label and reads the code and reason from annotations)."""
    prefix = FAIL_LABEL
    api.patch("v1/pods", namespace, pod, {"metadata": {
        "labels": {prefix: "true"},
        "annotations": {f"{prefix}/exit-code": str(exit_code), f"{prefix}/reason": reason,
                        f"{prefix}/delay": "0s", f"{prefix}/jitter-delay": "0s"}}})


def complete_pod(api: Any, namespace: str, pod: str) -> None:
    """Have kwok end a running pod's containers with exit 0, the pod Succeeded (the gated
    pod-complete stage: pod_complete), as a worker that finished its budget."""
    prefix = COMPLETE_LABEL
    api.patch("v1/pods", namespace, pod, {"metadata": {
        "labels": {prefix: "true"},
        "annotations": {f"{prefix}/delay": "0s", f"{prefix}/jitter-delay": "0s"}}})


def evict(api: Any, namespace: str, pod: str) -> None:
    """A drain's eviction (the Eviction API): kube-apiserver marks the pod DisruptionTarget
    (EvictionByEvictionAPI) and deletes it; kwok then ends it as the kubelet would."""
    code, out = api.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction",
                            {"apiVersion": "policy/v1", "kind": "Eviction",
                             "metadata": {"name": pod, "namespace": namespace}})
    if code != 201:
        raise ControlPlaneError(f"eviction of {namespace}/{pod} refused ({code}): {out}")
