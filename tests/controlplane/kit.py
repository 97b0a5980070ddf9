"""Talking to the test control plane as its admin: blocking API calls, real kubectl, and
the chart rendered by real helm, shared by the test fixtures and `make dev-cluster`."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from tools import REPO_ROOT, helm_path, kubectl_path
from xla_sentinel_operator.kube import path

from .cluster import ControlPlane

CHART = REPO_ROOT / "charts" / "xla-sentinel"
RELEASE, RELEASE_NS = "xs", "xla-sentinel"
OPERATOR_SA = "xs-xla-sentinel-operator"


class Api:
    """Blocking reads and writes as the cluster admin, for test set-up and assertions.

    `resource` is "v1/configmaps", "batch/v1/jobs" or "group/version/plural"."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.url = cp.server
        self._ctx = ssl.create_default_context(cafile=str(cp.pki.ca))
        self._ctx.load_cert_chain(str(cp.admin.cert), str(cp.admin.key))

    @staticmethod
    def _path(resource: str, ns: str | None, name: str | None = None, sub: str | None = None) -> str:
        *gv, plural = resource.split("/")
        return path("/".join(gv), plural, ns, name, sub)

    def request(self, method: str, url_path: str, body: Any = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        """(HTTP status, decoded body). A 429 (the API server's watch cache of a new
        resource is still starting: "storage is (re)initializing") is waited out, as
        client-go does, for up to 30 s."""
        for _ in range(60):
            code, answer = self._request(method, url_path, body, content_type)
            if code != 429:
                return code, answer
            time.sleep(float((answer.get("details") or {}).get("retryAfterSeconds") or 1) / 2)
        return code, answer

    def _request(self, method: str, url_path: str, body: Any,
                 content_type: str) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + url_path, data=data, method=method,
                                     headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=30) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"message": raw.decode(errors="replace")}

    def get(self, resource: str, ns: str | None, name: str) -> dict[str, Any] | None:
        code, obj = self.request("GET", self._path(resource, ns, name))
        if code == 404:
            return None
        assert code == 200, obj
        return obj

    def all(self, resource: str, ns: str | None, labels: dict[str, str] | None = None
            ) -> list[dict[str, Any]]:
        url = self._path(resource, ns)
        if labels:
            url += "?labelSelector=" + ",".join(f"{k}={v}" for k, v in labels.items())
        code, obj = self.request("GET", url)
        assert code == 200, obj
        return obj.get("items") or []

    def create(self, resource: str, ns: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        code, out = self.request("POST", self._path(resource, ns), obj)
        assert code == 201, out
        return out

    def patch(self, resource: str, ns: str | None, name: str, body: dict[str, Any],
              sub: str | None = None) -> dict[str, Any]:
        code, out = self.request("PATCH", self._path(resource, ns, name, sub), body,
                                 "application/merge-patch+json")
        assert code == 200, out
        return out

    def delete(self, resource: str, ns: str | None, name: str) -> int:
        code, _ = self.request("DELETE", self._path(resource, ns, name),
                               {"propagationPolicy": "Background"})
        return code

    def token(self, ns: str, service_account: str, seconds: int = 3600,
              pod: dict[str, Any] | None = None) -> str:
        """A token for a ServiceAccount (TokenRequest). Given the pod, it is bound to it as a
        kubelet binds the one it projects: the apiserver then puts the pod-name claim in the
        requests it authenticates, which the chart's WorkerReport policy checks."""
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if pod is not None:
            spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod",
                                      "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        code, out = self.request(
            "POST", path("v1", "serviceaccounts", ns, service_account, "token"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        assert code == 201, out
        return out["status"]["token"]


def kubectl(cp: ControlPlane, *args: str, stdin: str | None = None,
            kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kubectl_path()), "--kubeconfig", str(kubeconfig or cp.kubeconfig_path),
                           *args], input=stdin, capture_output=True, text=True, timeout=120)


def helm_install(cp: ControlPlane, sets: list[str], namespace: str = RELEASE_NS) -> None:
    """`helm install` of the chart as a user runs it, each value a `--set`; SystemExit with
    helm's error where it fails (the scripts that call it stop there)."""
    done = subprocess.run([str(helm_path()), "--kubeconfig", str(cp.kubeconfig_path), "install",
                           RELEASE, str(CHART), "-n", namespace,
                           *[a for v in sets for a in ("--set", v)]],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"helm install failed: {done.stderr}")


def helm_template(*sets: str) -> list[dict[str, Any]]:
    out = subprocess.run([str(helm_path()), "template", RELEASE, str(CHART), "-n", RELEASE_NS,
                          "--include-crds", *[a for s in sets for a in ("--set", s)]],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def apply(cp: ControlPlane, objs: list[dict[str, Any]]) -> None:
    """`kubectl apply --server-side`, as a user installs rendered manifests."""
    done = kubectl(cp, "apply", "--server-side", "--force-conflicts", "-f", "-",
                   stdin=yaml.safe_dump_all(objs))
    assert done.returncode == 0, done.stderr


# Kinds a test cluster has no controller or API for (no Deployment controller runs; the
# operator runs in the test process instead of its Deployment).
NOT_APPLIED = {"Deployment", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule",
                "NetworkPolicy", "Service", "PersistentVolumeClaim"}


def chart_operator_flags(*sets: str) -> dict[str, str]:
    """The `--flag=value` arguments the chart's Deployment passes to `xla-sentinel operator`."""
    (deployment,) = [o for o in helm_template(*sets) if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return dict(a.split("=", 1) for a in args if a.startswith("--") and "=" in a)


def install_chart(cp: ControlPlane, *sets: str) -> list[dict[str, Any]]:
    """What `helm install` would create here with these values: the CRDs (waited for until
    established), then every other rendered object this control plane has an API for."""
    objs = helm_template(*sets)
    apply(cp, [o for o in objs if o["kind"] == "CustomResourceDefinition"])
    done = kubectl(cp, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    assert done.returncode == 0, done.stderr
    apply(cp, [o for o in objs if o["kind"] not in NOT_APPLIED
               and o["kind"] != "CustomResourceDefinition"])
    return objs
