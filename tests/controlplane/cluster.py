"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and
kube-controller-manager, built by `make control-plane` from their Go modules (build.sh).

Run as envtest runs one (API server, storage, controller manager; no scheduler, no kubelet):
TLS with a fresh CA, client-certificate users, `--authorization-mode=Node,RBAC`, service-account
tokens signed with an ECDSA key, and the controllers this project relies on (Job, garbage
collector, namespace, service account, TTL-after-finished, pod GC). `python -m
controlplane.cluster` (from tests/) keeps one running for a person (`make dev-cluster`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import IO

import yaml

from .pki import KeyPair, Pki

HERE = Path(__file__).resolve().parent
VERSION = next(line.split()[1] for line in (HERE / "go.mod").read_text().splitlines()
               if line.strip().startswith("k8s.io/kubernetes "))
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
CONTROLLERS = ("job-controller", "garbage-collector-controller", "namespace-controller",
               "serviceaccount-controller", "serviceaccount-token-controller",
               "ttl-after-finished-controller", "pod-garbage-collector-controller")


class ControlPlaneError(RuntimeError):
    """A binary is missing or a component did not come up; the message says which and why."""


def cache_dir() -> Path:
    """Where the binaries live: $XLA_SENTINEL_CONTROL_PLANE, else a per-version folder in the
    user's cache, outside the source tree so a fresh clone reuses an earlier build."""
    env = os.environ.get("XLA_SENTINEL_CONTROL_PLANE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "xla-sentinel" / f"controlplane-{VERSION}"


def binaries() -> dict[str, Path]:
    where = cache_dir()
    found = {name: where / name for name in BINARIES}
    missing = [n for n, p in found.items() if not os.access(p, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{', '.join(missing)} not built in {where}: run `make control-plane`")
    return found


# Ports free_port() has handed out in this process. The kernel may give the same free port
# to two binds in a row once the first socket is closed (1 pair in 20,000 here), and two
# components started with one port lose one of them at start: it happened to kwok's
# scheduler and node-lifecycle controller in a CI run (tests/controlplane/kwok.py).
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free on 127.0.0.1 now, never one this process was given before."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class Component:
    """One control-plane process; its output goes to a log file named after it."""

    def __init__(self, name: str, argv: list[str], log_dir: Path) -> None:
        self.name, self.argv = name, argv
        self.log_path = log_dir / f"{name}.log"
        self._log: IO[bytes] | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def stop(self, timeout: float = 15) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ControlPlaneError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")


def kubeconfig(server: str, ca: Path, user: str, pair: KeyPair | None = None,
               token: str | None = None, namespace: str = "default") -> dict:
    """A kubeconfig for one user, by client certificate or bearer token."""
    creds: dict[str, str] = {}
    if pair is not None:
        creds = {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
    if token is not None:
        creds["token"] = token
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": user,
        "clusters": [{"name": "test", "cluster": {"server": server,
                                                  "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": user, "context": {"cluster": "test", "user": user,
                                                "namespace": namespace}}],
    }


class ControlPlane:
    """Start with `start()` (or as a context manager); `kubeconfig_path` is the admin's."""

    def __init__(self, root: Path | None = None, audit: bool = False) -> None:
        self.bins = binaries()
        self.root = root or Path(tempfile.mkdtemp(prefix="xs-controlplane-"))
        self._own_root = root is None
        self.pki = Pki(self.root / "pki")
        self.etcd_port, self.etcd_peer = free_port(), free_port()
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.admin = self.pki.client("admin", ("system:masters",))
        self.kubeconfig_path = self.write_kubeconfig("admin", self.admin)
        # The controller manager acts for every controller under one identity (no
        # --use-service-account-credentials): enough for tests, and RBAC still guards the
        # operator and the workers, which are what this project ships.
        cm = self.pki.client("system:kube-controller-manager", ("system:masters",))
        cm_config = self.write_kubeconfig("system:kube-controller-manager", cm)
        self.cm_port = free_port()
        # How the API server reaches a real kubelet (node.py) for logs and exec: by the
        # node's InternalIP (its Hostname would be looked up in DNS, off this machine), with
        # a client certificate of the test CA, which the kubelet trusts.
        kubelet_client = self.pki.client("system:kube-apiserver-kubelet-client", ("system:masters",))
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        self.etcd = Component("etcd", [
            str(self.bins["etcd"]), "--data-dir", str(self.root / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{self.etcd_peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.etcd_peer}",
            "--initial-cluster", f"default=http://127.0.0.1:{self.etcd_peer}",
            "--unsafe-no-fsync", "--watch-progress-notify-interval=5s",
            "--log-level=warn"], logs)
        self.apiserver = Component("kube-apiserver", [
            str(self.bins["kube-apiserver"]),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--secure-port={self.port}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={self.pki.serving.cert}",
            f"--tls-private-key-file={self.pki.serving.key}",
            f"--client-ca-file={self.pki.ca}",
            "--authorization-mode=Node,RBAC",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.pki.sa_public}",
            f"--service-account-signing-key-file={self.pki.sa_private}",
            "--allow-privileged=true", "--profiling=false", "-v=1",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={kubelet_client.cert}",
            f"--kubelet-client-key={kubelet_client.key}",
            *(self._audit_flags() if audit else [])], logs)
        self.controller_manager = Component("kube-controller-manager", [
            str(self.bins["kube-controller-manager"]),
            f"--kubeconfig={cm_config}", f"--authentication-kubeconfig={cm_config}",
            f"--authorization-kubeconfig={cm_config}",
            "--leader-elect=false", f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={self.pki.sa_private}",
            f"--root-ca-file={self.pki.ca}", "--bind-address=127.0.0.1",
            f"--secure-port={self.cm_port}", "--concurrent-job-syncs=5", "-v=1"], logs)
        self.components = [self.etcd, self.apiserver, self.controller_manager]

    def _audit_flags(self) -> list[str]:
        """Log every request's metadata (user, verb, resource) for benchmarks to count."""
        policy = self.root / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                          "omitStages": ["RequestReceived"],
                                          "rules": [{"level": "Metadata"}]}))
        self.audit_log = self.root / "logs" / "audit.log"
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
                "--audit-log-mode=batch"]

    def etcd_metrics(self) -> dict[str, float]:
        """etcd's own Prometheus gauges and counters (no labels), by name."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, _, value = line.partition(" ")
                out[name] = float(value)
        return out

    def write_kubeconfig(self, user: str, pair: KeyPair | None = None, token: str | None = None,
                         namespace: str = "default") -> Path:
        path = self.root / f"kubeconfig-{user.replace(':', '_')}.yaml"
        path.write_text(yaml.safe_dump(kubeconfig(self.server, self.pki.ca, user, pair, token,
                                                  namespace)))
        return path

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        ctx.load_cert_chain(str(self.admin.cert), str(self.admin.key))
        return ctx

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.server + path, context=self._ssl(), timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def _wait(self, what: str, ready: callable, timeout: float) -> None:  # type: ignore[valid-type]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c in self.components:
                c.check_alive()
            try:
                if ready():
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready within {timeout:.0f} s:\n{self.apiserver.tail()}")

    def start_apiserver(self, timeout: float = 90) -> None:
        self.apiserver.start()
        self._wait("kube-apiserver /readyz", lambda: self.get("/readyz")[0] == 200, timeout)

    def start(self, timeout: float = 90) -> ControlPlane:
        self.etcd.start()
        self._wait("etcd", lambda: socket.create_connection(("127.0.0.1", self.etcd_port), 1).close()
                   or True, timeout)
        self.start_apiserver(timeout)
        self.controller_manager.start()
        # The namespace controller's service-account controller creates `default` in every
        # namespace; pods wait for it, so waiting here makes the first test deterministic.
        self._wait("default service account",
                   lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
                   timeout)
        return self

    def restart_controller_manager(self, timeout: float = 90) -> None:
        """Stop and start kube-controller-manager alone. Its garbage collector learns of a
        CRD created after it started only at a later discovery resync (30 s), and backs off
        meanwhile on the dependents of that kind's objects: restarted once the CRDs exist,
        it knows them from the start, as in a cluster where they were installed long ago."""
        self.controller_manager.stop()
        self.controller_manager.start()
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE

        def healthy() -> bool:
            url = f"https://127.0.0.1:{self.cm_port}/healthz"
            with urllib.request.urlopen(url, context=insecure, timeout=2) as r:
                return r.status == 200

        self._wait("kube-controller-manager /healthz", healthy, timeout)

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver alone (etcd keeps the data): watches must resume."""
        self.apiserver.stop()
        self.start_apiserver()

    def stop(self) -> None:
        for c in reversed(self.components):
            c.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    """Run a control plane until interrupted; print KUBECONFIG=... once the API answers."""
    with ControlPlane() as cp:
        print(f"KUBECONFIG={cp.kubeconfig_path}", flush=True)
        print(f"# logs in {cp.root / 'logs'}; Ctrl-C stops it", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})


if __name__ == "__main__":
    main()
