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

import base64
import copy
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from .cluster import Component, ControlPlane, ControlPlaneError, cache_dir, free_port
from .kit import apply, kubectl

CONTROLLER = "jobset-controller"
CRDS = "jobset-crds.yaml"
WEBHOOKS = "jobset-webhooks.yaml"


def built() -> bool:
    where = cache_dir()
    return all((where / f).exists() for f in (CONTROLLER, CRDS, WEBHOOKS))


class JobSetController:
    """start() applies the CRD and webhooks for `namespaces` and runs the controller as the
    control plane's admin; stop() removes the webhooks (the CRD stays, like any CRD)."""

    def __init__(self, cp: ControlPlane, namespaces: list[str]) -> None:
        if not built():
            raise ControlPlaneError(f"{CONTROLLER} not built in {cache_dir()}: run `make control-plane`")
        self.cp, self.namespaces = cp, namespaces
        self.root = cp.root / f"jobset-{namespaces[0]}"
        certs = self.root / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(cp.pki.serving.cert, certs / "tls.crt")
        shutil.copy(cp.pki.serving.key, certs / "tls.key")
        self.webhook_port, self.health_port = free_port(), free_port()
        config = self.root / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(certs)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"}}))
        self.process = Component(CONTROLLER, [
            str(cache_dir() / CONTROLLER), f"--config={config}",
            f"--kubeconfig={cp.kubeconfig_path}", "--zap-log-level=info"], self.root)
        self.webhooks = self._webhooks()

    def _webhooks(self) -> list[dict[str, Any]]:
        """JobSet's webhook configurations, called by URL on loopback, in our namespaces only."""
        ca = Path(self.cp.pki.ca).read_bytes()
        out = []
        for doc in yaml.safe_load_all((cache_dir() / WEBHOOKS).read_text()):
            if not doc:
                continue
            doc = copy.deepcopy(doc)
            doc["metadata"] = {"name": f"jobset-{self.namespaces[0]}-{doc['metadata']['name']}"}
            for hook in doc["webhooks"]:
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.webhook_port}{hook['clientConfig']['service']['path']}",
                    "caBundle": base64.b64encode(ca).decode()}
                hook["namespaceSelector"] = {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "In", "values": self.namespaces}]}
            out.append(doc)
        return out

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def start(self, timeout: float = 90) -> JobSetController:
        apply(self.cp, list(yaml.safe_load_all((cache_dir() / CRDS).read_text())))
        deadline = time.monotonic() + timeout
        while True:  # `kubectl wait` fails outright before the new CRD has any condition
            done = kubectl(self.cp, "wait", "--for=condition=Established",
                           "crd/jobsets.jobset.x-k8s.io", "--timeout=10s")
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"the JobSet CRD is not established: {done.stderr}")
            time.sleep(0.5)
        self.process.start()
        while not self._ready():
            self.process.check_alive()
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{CONTROLLER} not ready in {timeout:.0f} s:\n{self.process.tail()}")
            time.sleep(0.5)
        apply(self.cp, self.webhooks)
        return self

    def stop(self) -> None:
        for hook in self.webhooks:
            kind = "mutatingwebhookconfiguration" if hook["kind"].startswith("Mutating") \
                else "validatingwebhookconfiguration"
            kubectl(self.cp, "delete", kind, hook["metadata"]["name"], "--ignore-not-found")
        self.process.stop()

