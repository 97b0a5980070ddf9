"""What JobSet's and Kueue's controller managers (jobset.py, kueue.py) share beside the test
control plane: the serving certificate and ports of a manager run as a local process, its
webhook configurations rewritten to call it by URL on loopback in the test's namespaces,
its CRDs established and its readiness waited for, and the webhooks removed at the end.
Both are controller-runtime managers, so each of these is the same for both."""

from __future__ import annotations

import base64
import copy
import shutil
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .cluster import Component, ControlPlane, ControlPlaneError, cache_dir, free_port
from .kit import apply, kubectl


class ManagerProcess:
    """A controller manager's folder (its serving pair under certs/), webhook and health
    ports, and what start() and stop() do around its `process` (set by the subclass)."""

    process: Component

    def __init__(self, cp: ControlPlane, namespaces: list[str], name: str) -> None:
        self.cp, self.namespaces, self.name = cp, namespaces, name
        self.root = cp.root / f"{name}-{namespaces[0]}"
        self.certs = self.root / "certs"
        self.certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(cp.pki.serving.cert, self.certs / "tls.crt")
        shutil.copy(cp.pki.serving.key, self.certs / "tls.key")
        self.webhook_port, self.health_port = free_port(), free_port()
        self.webhooks: list[dict[str, Any]] = []

    def url_webhooks(self, manifests: str, scope: dict[str, Any],
                     keep: Callable[[dict[str, Any]], bool] = lambda hook: True) -> list[dict[str, Any]]:
        """The webhook configurations of the file `manifests` (in the cache folder), each
        webhook `keep` keeps called by URL on this manager's loopback port with the control
        plane's CA, selecting the namespaces `scope` selects; named for this manager."""
        ca = base64.b64encode(Path(self.cp.pki.ca).read_bytes()).decode()
        out = []
        for doc in yaml.safe_load_all((cache_dir() / manifests).read_text()):
            if not doc:
                continue
            doc = copy.deepcopy(doc)
            doc["metadata"] = {"name": f"{self.name}-{self.namespaces[0]}-{doc['metadata']['name']}"}
            hooks = []
            for hook in doc["webhooks"]:
                if not keep(hook):
                    continue
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.webhook_port}{hook['clientConfig']['service']['path']}",
                    "caBundle": ca}
                hook["namespaceSelector"] = scope
                hooks.append(hook)
            doc["webhooks"] = hooks
            out.append(doc)
        return out

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def established(self, crds: list[str], deadline: float) -> None:
        """Wait until each CRD named is established (served)."""
        for crd in crds:
            while True:  # `kubectl wait` fails outright before a new CRD has any condition
                done = kubectl(self.cp, "wait", "--for=condition=Established", f"crd/{crd}",
                               "--timeout=10s")
                if done.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"the CRD {crd} is not established: {done.stderr}")
                time.sleep(0.5)

    def run_until_ready(self, deadline: float, timeout: float) -> None:
        """Start the manager, wait for its /readyz, then register its webhooks (before it
        serves them, the API server would refuse every object they select)."""
        self.process.start()
        while not self._ready():
            self.process.check_alive()
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{self.process.name} not ready in {timeout:.0f} s:\n"
                                        f"{self.process.tail()}")
            time.sleep(0.5)
        apply(self.cp, self.webhooks)

    def remove_webhooks(self) -> None:
        for hook in self.webhooks:
            kind = "mutatingwebhookconfiguration" if hook["kind"].startswith("Mutating") \
                else "validatingwebhookconfiguration"
            kubectl(self.cp, "delete", kind, hook["metadata"]["name"], "--ignore-not-found")


def in_namespaces(namespaces: list[str]) -> dict[str, Any]:
    """A namespace selector of exactly these namespaces."""
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                  "values": namespaces}]}
