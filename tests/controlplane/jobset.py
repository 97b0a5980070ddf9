"""JobSet's controller (sigs.k8s.io/jobset, built by build.sh from its Go module) beside the
test control plane's Job controller: its CRD applied, its webhooks (JobSet defaulting and
validation, the pod webhooks that place a slice's pods in one topology domain) served on
loopback with the control plane's serving certificate and registered by URL with the test
CA, scoped to the namespaces given (the control plane is shared by other tests).

It is a controller-runtime manager: a Configuration file turns off its own certificate
rotation (which wants an in-cluster Service and Secret) and leader election, and points its
webhook server at a folder holding tls.crt and tls.key.
"""

from __future__ import annotations

import time

import yaml

from .cluster import Component, ControlPlane, ControlPlaneError, cache_dir
from .kit import apply
from .manager import ManagerProcess, in_namespaces

CONTROLLER = "jobset-controller"
CRDS = "jobset-crds.yaml"
WEBHOOKS = "jobset-webhooks.yaml"


def built() -> bool:
    where = cache_dir()
    return all((where / f).exists() for f in (CONTROLLER, CRDS, WEBHOOKS))


class JobSetController(ManagerProcess):
    """start() applies the CRD and webhooks for `namespaces` and runs the controller as the
    control plane's admin; stop() removes the webhooks (the CRD stays, like any CRD)."""

    def __init__(self, cp: ControlPlane, namespaces: list[str]) -> None:
        if not built():
            raise ControlPlaneError(f"{CONTROLLER} not built in {cache_dir()}: run `make control-plane`")
        super().__init__(cp, namespaces, "jobset")
        config = self.root / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(self.certs)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"}}))
        self.process = Component(CONTROLLER, [
            str(cache_dir() / CONTROLLER), f"--config={config}",
            f"--kubeconfig={cp.kubeconfig_path}", "--zap-log-level=info"], self.root)
        # JobSet's webhook configurations, called by URL on loopback, in our namespaces only.
        self.webhooks = self.url_webhooks(WEBHOOKS, in_namespaces(namespaces))

    def start(self, timeout: float = 90) -> JobSetController:
        apply(self.cp, list(yaml.safe_load_all((cache_dir() / CRDS).read_text())))
        deadline = time.monotonic() + timeout
        self.established(["jobsets.jobset.x-k8s.io"], deadline)
        self.run_until_ready(deadline, timeout)
        return self

    def stop(self) -> None:
        self.remove_webhooks()
        self.process.stop()

