"""Kueue's controller manager (sigs.k8s.io/kueue, built by build_kueue.sh from its Go module,
`make kueue`) beside the test control plane's Job controller, run as jobset.py runs JobSet's:
its CRDs applied (once per control plane), its webhooks (Job and JobSet defaulting and
validation, which keep a queued Job suspended until admitted, and those of its own API) served
on loopback with the control plane's serving certificate and registered by URL with the test
CA, scoped to the namespaces given (the control plane is shared by other tests).

A Configuration file turns off its certificate rotation (which issues a certificate for an
in-cluster Service name) and leader election, points its webhook server at a folder holding
tls.crt and tls.key (and, through KUEUE_METRICS_CERT_DIR, its metrics server at the same pair:
see build_kueue.sh), integrates batch/job and, where JobSet's CRD is built,
jobset.x-k8s.io/jobset, and manages Jobs only in the given namespaces. Its visibility API
server (an aggregated API on a fixed port, which two test processes would both take) is off.

Kueue puts finalizers on what it manages (ClusterQueues, ResourceFlavors, Workloads): stop()
deletes the namespaces' queued Jobs and their Workloads and what the test made through
`create` while Kueue still runs to remove them, and lifts any finalizer left, so neither a
namespace nor a cluster-scoped object outlives the test held by a controller that is gone.
"""

from __future__ import annotations

import time
from typing import Any

import yaml

from . import jobset
from .cluster import Component, ControlPlane, ControlPlaneError, cache_dir
from .kit import Api, apply
from .manager import ManagerProcess, in_namespaces

CONTROLLER = "kueue-controller"
CRDS = "kueue-crds.yaml"
WEBHOOKS = "kueue-webhooks.yaml"
GROUP = "kueue.x-k8s.io"
API = f"{GROUP}/v1beta1"
QUEUE_LABEL = f"{GROUP}/queue-name"
PRIORITY_LABEL = f"{GROUP}/priority-class"
WORKLOADS = f"{API}/workloads"
CRD_API = "apiextensions.k8s.io/v1/customresourcedefinitions"
# The API groups of the webhooks registered: Kueue's own and those of the integrations on.
# The manifests also list Pods, Deployments, StatefulSets and other frameworks' objects,
# whose webhooks are no-ops with those integrations off; registered, they would only put
# Kueue in the path of every pod the Job controller makes.
WEBHOOK_GROUPS = {GROUP, "batch", "jobset.x-k8s.io"}
# Plural of each kind a test creates through `create`, cluster-scoped ones first.
PLURALS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
           "WorkloadPriorityClass": "workloadpriorityclasses", "Cohort": "cohorts",
           "LocalQueue": "localqueues"}
CLUSTER_SCOPED = {"ResourceFlavor", "ClusterQueue", "WorkloadPriorityClass", "Cohort"}


def built() -> bool:
    where = cache_dir()
    return all((where / f).exists() for f in (CONTROLLER, CRDS, WEBHOOKS))


def crd_names() -> list[str]:
    return [d["metadata"]["name"] for d in yaml.safe_load_all((cache_dir() / CRDS).read_text()) if d]


class KueueController(ManagerProcess):
    """start() applies the CRDs not yet served and the webhooks for `namespaces` and runs the
    manager as the control plane's admin; create() makes a Kueue object (ResourceFlavor,
    ClusterQueue, LocalQueue, WorkloadPriorityClass) that stop() removes; stop() also removes
    the webhooks (the CRDs stay, like any CRD)."""

    def __init__(self, cp: ControlPlane, namespaces: list[str]) -> None:
        if not built():
            raise ControlPlaneError(f"{CONTROLLER} not built in {cache_dir()}: run `make kueue`")
        super().__init__(cp, namespaces, "kueue")
        self.api = Api(cp)
        self.with_jobset = jobset.built()
        frameworks = ["batch/job"] + (["jobset.x-k8s.io/jobset"] if self.with_jobset else [])
        scope = in_namespaces(namespaces)
        config = self.root / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
            "namespace": "kueue-system",  # named, never used: no certificate Secret is made
            "manageJobsWithoutQueueName": False,
            "managedJobsNamespaceSelector": scope,
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(self.certs)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": {"frameworks": frameworks}}))
        # env(1) execs the manager with its metrics certificate folder set (build_kueue.sh);
        # Component passes the test's own environment on unchanged.
        self.process = Component(CONTROLLER, [
            "env", f"KUEUE_METRICS_CERT_DIR={self.certs}", str(cache_dir() / CONTROLLER), f"--config={config}",
            f"--kubeconfig={cp.kubeconfig_path}", "--feature-gates=VisibilityOnDemand=false",
            "--zap-log-level=info"], self.root)
        # Kueue's webhook configurations in our namespaces only (a namespace selector does
        # not apply to cluster-scoped objects: those of ClusterQueues and ResourceFlavors
        # see every one, and only the tests make them).
        self.webhooks = self.url_webhooks(WEBHOOKS, scope, self._served)
        self.created: list[tuple[str, str | None, str]] = []  # (kind, namespace, name)

    def _served(self, hook: dict[str, Any]) -> bool:
        groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
        return bool(groups & WEBHOOK_GROUPS) and ("jobset.x-k8s.io" not in groups or self.with_jobset)

    def start(self, timeout: float = 120) -> KueueController:
        deadline = time.monotonic() + timeout
        crds = list(yaml.safe_load_all((cache_dir() / CRDS).read_text()))
        if self.with_jobset:  # the JobSet integration sets itself up only once its API exists
            crds += list(yaml.safe_load_all((cache_dir() / jobset.CRDS).read_text()))
        # The CRDs an earlier Kueue (or JobSet) of the same control plane applied stay
        # (stop() leaves them) and come from the same build: applying and waiting for those
        # again took about 4 s of every later start on a worker's shared control plane.
        served = {c["metadata"]["name"] for c in self.api.all(CRD_API, None)
                  if any(k["type"] == "Established" and k["status"] == "True"
                         for k in (c.get("status") or {}).get("conditions") or [])}
        crds = [d for d in crds if d and d["metadata"]["name"] not in served]
        if crds:
            apply(self.cp, crds)
            self.established([d["metadata"]["name"] for d in crds], deadline)
        self.run_until_ready(deadline, timeout)
        return self

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create a Kueue object (its kind in PLURALS); stop() deletes it."""
        kind, meta = obj["kind"], obj["metadata"]
        ns = None if kind in CLUSTER_SCOPED else meta["namespace"]
        made = self.api.create(f"{API}/{PLURALS[kind]}", ns, {"apiVersion": API, **obj})
        self.created.append((kind, ns, meta["name"]))
        return made

    def _unfinalize(self, resource: str, ns: str | None, name: str) -> None:
        if self.api.get(resource, ns, name) is not None:
            self.api.patch(resource, ns, name, {"metadata": {"finalizers": None}})

    def _managed(self) -> list[tuple[str, str, str]]:
        """The namespaces' Jobs (and JobSets) that name a queue: what Kueue makes Workloads for."""
        kinds = ["batch/v1/jobs"] + (["jobset.x-k8s.io/v1alpha2/jobsets"] if self.with_jobset else [])
        return [(kind, ns, o["metadata"]["name"]) for kind in kinds for ns in self.namespaces
                for o in self.api.all(kind, ns) if QUEUE_LABEL in (o["metadata"].get("labels") or {})]

    def _workloads(self) -> list[tuple[str, str, str]]:
        return [(WORKLOADS, ns, w["metadata"]["name"])
                for ns in self.namespaces for w in self.api.all(WORKLOADS, ns)]

    def stop(self, timeout: float = 30) -> None:
        """Delete the namespaces' queued Jobs, their Workloads and the objects made by
        create() while Kueue runs (it lifts its finalizers), lift what is left, then remove
        the webhooks and stop. Whatever makes queued Jobs (the operator) must be stopped
        first: Kueue makes a Workload again, under the same name, for a Job that exists."""
        # LocalQueues before ClusterQueues before ResourceFlavors: Kueue keeps a ClusterQueue
        # while a Workload is admitted to it and a flavor while a queue names it.
        made = [(f"{API}/{PLURALS[k]}", ns, n) for k, ns, n in reversed(self.created)]
        alive = self.process.proc is not None and self.process.proc.poll() is None
        try:
            for what in self._managed() + self._workloads() + made:
                self.api.delete(*what)
            deadline = time.monotonic() + (timeout if alive else 0)
            while (self._workloads() or any(self.api.get(*what) is not None for what in made)) \
                    and time.monotonic() < deadline:
                time.sleep(0.3)
        finally:
            self.remove_webhooks()
            self.process.stop()
            for what in self._workloads() + made:
                self._unfinalize(*what)
            self.created = []
