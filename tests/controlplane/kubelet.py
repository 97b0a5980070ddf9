"""A fake node for the test control plane: it plays scheduler and kubelet for one Node.

What it does as the real ones do: registers a Ready Node with its labels and capacity,
binds Pending pods whose nodeSelector it matches (pods/binding), runs each container's
command, writes phase, container states, exit codes and conditions to pods/status, and on
deletion (or eviction) sends SIGTERM, waits the grace period, SIGKILLs, reports, and
finishes the deletion. Projected volumes (the API server's ServiceAccount admission adds one)
are filled as a kubelet fills them: a bound token (TokenRequest), ca.crt and the namespace,
with KUBERNETES_SERVICE_HOST/PORT set, so the worker's in-cluster login is the real one.

What it mocks, since neither exists here: the container image and the node. An image is a
table entry naming a local command that stands for its entrypoint (the runner image is
`.venv/bin/xla-sentinel`); a container runs as a process in its own mount namespace
(`unshare`), where each volume is a bind mount of a per-pod folder at its mountPath.

Which containers run: the pod's first container, and before it each native sidecar (an
init container with `restartPolicy: Always`, such as an agent pod's sandbox server) with its
own command, environment and volume mounts, in a PID namespace of its own as a container
has (its /proc shows only its own processes: `sandbox-server --own-container` kills every
other process it sees), reported in initContainerStatuses. Once the first container has
ended the sidecars get SIGTERM, then SIGKILL after the pod's grace period (on deletion: at
the deletion's own deadline), and the pod's phase (the first container's exit, whatever the
sidecars' own) is written when they are gone, as the kubelet does. Not modelled: other
containers, plain init containers, waiting for a sidecar to have started, restarts of a
sidecar, probes, uids (everything runs as this process's user) and read-only mounts.
"""

from __future__ import annotations

import base64
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Container:
    pod: str
    namespace: str
    proc: subprocess.Popen[bytes]
    started: str
    log: Path
    kill_at: float | None = None
    # The pod's native sidecars (their spec, process), started before it and stopped after it.
    sidecars: list[tuple[dict[str, Any], subprocess.Popen[bytes]]] = field(default_factory=list)
    sidecars_killed_at: float | None = None  # when the sidecars get SIGKILL (after SIGTERM)


@dataclass
class FakeNode:
    api: Any  # conftest.Api: admin access (the Node authorizer's own identity is not modelled)
    images: dict[str, list[str]]  # image -> the local command that stands for its entrypoint
    name: str = "node-0"
    namespace: str | None = None  # only pods of this namespace (tests share a control plane)
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=lambda: {"cpu": "16", "memory": "64Gi",
                                                               "pods": "110"})
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="xs-node-")))
    # Host folders the images' commands need (the checkout and its .venv): kept visible in
    # containers whatever volumes they mount.
    host_paths: list[Path] = field(default_factory=list)
    interval: float = 0.2
    running: dict[str, Container] = field(default_factory=dict)  # pod uid -> container
    done: set[str] = field(default_factory=set)  # pod uids whose container has ended
    errors: list[str] = field(default_factory=list)
    log_paths: dict[tuple[str, str], Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # Node registration -------------------------------------------------------------
    def start(self) -> FakeNode:
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", **self.labels}
        if self.api.get("v1/nodes", None, self.name) is None:
            self.api.create("v1/nodes", None, {"apiVersion": "v1", "kind": "Node",
                                               "metadata": {"name": self.name, "labels": labels}})
        self.api.patch("v1/nodes", None, self.name, {"status": {
            "capacity": self.capacity, "allocatable": self.capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake node of the test suite",
                            "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}}, sub="status")
        self._thread = threading.Thread(target=self._loop, name=f"kubelet-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        for c in list(self.running.values()):
            for proc in [c.proc, *(p for _, p in c.sidecars)]:
                self._signal_group(proc, signal.SIGKILL)
                proc.wait(10)
        self.running.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as e:  # keep serving; a test reads `errors`
                self.errors.append(repr(e))
            self._stop.wait(self.interval)

    # One sync pass -------------------------------------------------------------------
    def sync(self) -> None:
        for pod in self._pods("spec.nodeName="):
            if pod["status"].get("phase") == "Pending" and self._fits(pod):
                self._bind(pod)
        for pod in self._pods(f"spec.nodeName={self.name}"):
            uid = pod["metadata"]["uid"]
            deleting = pod["metadata"].get("deletionTimestamp") is not None
            if uid in self.running:
                self._watch_container(pod, self.running[uid], deleting)
            elif uid in self.done:
                if deleting:
                    self._finish_deletion(pod)
            elif deleting:
                self._finish_deletion(pod)
            elif pod["status"].get("phase") == "Pending":
                self._start_container(pod)

    def _pods(self, selector: str) -> list[dict[str, Any]]:
        where = f"/api/v1/namespaces/{self.namespace}/pods" if self.namespace else "/api/v1/pods"
        code, out = self.api.request("GET", f"{where}?fieldSelector={selector}")
        if code != 200:
            raise RuntimeError(f"list pods: HTTP {code}: {out}")
        return out.get("items") or []

    def _fits(self, pod: dict[str, Any]) -> bool:
        node_labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                       **self.labels}
        wanted = pod["spec"].get("nodeSelector") or {}
        return all(node_labels.get(k) == v for k, v in wanted.items())

    def _bind(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.api.request("POST", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding",
                         {"apiVersion": "v1", "kind": "Binding",
                          "metadata": {"name": meta["name"]},
                          "target": {"apiVersion": "v1", "kind": "Node", "name": self.name}})

    # Containers ------------------------------------------------------------------------
    def _env(self, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
        meta = pod["metadata"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp",
               "HOSTNAME": meta["name"],
               "KUBERNETES_SERVICE_HOST": "127.0.0.1",
               "KUBERNETES_SERVICE_PORT": self.api.url.rsplit(":", 1)[1]}
        for var in container.get("env") or []:
            if "value" in var:
                env[var["name"]] = str(var["value"])
            elif "fieldRef" in (var.get("valueFrom") or {}):
                env[var["name"]] = self._field(pod, var["valueFrom"]["fieldRef"]["fieldPath"])
            elif "secretKeyRef" in (var.get("valueFrom") or {}):
                # As the kubelet does, with the node's access: the pod's identity needs none.
                ref = var["valueFrom"]["secretKeyRef"]
                secret = self.api.get("v1/secrets", meta["namespace"], ref["name"]) or {}
                value = (secret.get("data") or {}).get(ref["key"])
                if value is not None:
                    env[var["name"]] = base64.b64decode(value).decode()
        return env

    @staticmethod
    def _field(pod: dict[str, Any], field_path: str) -> str:
        meta = pod["metadata"]
        for prefix, source in (("metadata.annotations", meta.get("annotations") or {}),
                               ("metadata.labels", meta.get("labels") or {})):
            if field_path.startswith(prefix + "['"):
                return str(source.get(field_path[len(prefix) + 2:-2], ""))
        simple = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"],
                  "metadata.uid": meta["uid"], "spec.nodeName": pod["spec"].get("nodeName", ""),
                  "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
                  "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1"}
        return simple.get(field_path, "")

    def _start_container(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        container = spec["containers"][0]
        pod_dir = self.root / meta["uid"]
        volumes: dict[str, Path] = {}
        for vol in spec.get("volumes") or []:
            volumes[vol["name"]] = pod_dir / "volumes" / vol["name"]
            volumes[vol["name"]].mkdir(parents=True, exist_ok=True)
            if "projected" in vol:
                self._project(pod, vol["projected"], volumes[vol["name"]])
        sidecars = [i for i in spec.get("initContainers") or [] if i.get("restartPolicy") == "Always"]
        unknown = [c["image"] for c in [*sidecars, container] if c["image"] not in self.images]
        if unknown:
            self._report_waiting(pod, "ErrImagePull", f"image {unknown[0]!r} is not known to the fake node")
            return
        # Sidecars first, each in a PID namespace of its own (--mount-proc: its /proc too);
        # --kill-child: unshare's SIGKILL takes its child along.
        started = [(s, self._run(pod, s, volumes, self._sidecar_log(pod_dir / "container.log", s["name"]),
                                 ["--pid", "--fork", "--mount-proc", "--kill-child"]))
                   for s in sidecars]
        log = pod_dir / "container.log"
        proc = self._run(pod, container, volumes, log, [])
        image = container["image"]
        c = Container(meta["name"], meta["namespace"], proc, _now(), log, sidecars=started)
        self.log_paths[(meta["namespace"], meta["name"])] = log
        self.running[meta["uid"]] = c
        self._patch_status(pod, {
            "phase": "Running", "hostIP": "127.0.0.1", "podIP": "127.0.0.1", "startTime": c.started,
            "conditions": self._conditions(pod, ready=True),
            "containerStatuses": [{"name": container["name"], "image": image, "imageID": image,
                                   "ready": True, "restartCount": 0, "started": True,
                                   "state": {"running": {"startedAt": c.started}}}],
            **self._sidecar_statuses(c, {"running": {"startedAt": c.started}})})

    @staticmethod
    def _sidecar_log(log: Path, name: str) -> Path:
        return log.with_name(f"sidecar-{name}.log")  # not the first container's, whatever its name

    @staticmethod
    def _sidecar_statuses(c: Container, state: dict[str, Any] | None = None) -> dict[str, Any]:
        """initContainerStatuses of the pod's sidecars: `state`, or each one's exit (a
        process killed by signal N exits as 128 + N in a container runtime)."""
        if not c.sidecars:
            return {}
        statuses = []
        for spec, proc in c.sidecars:
            mine = state
            if mine is None:
                code = proc.returncode if proc.returncode is not None else 0
                code = 128 - code if code < 0 else code
                mine = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                       "startedAt": c.started, "finishedAt": _now()}}
            statuses.append({"name": spec["name"], "image": spec["image"], "imageID": spec["image"],
                             "ready": state is not None, "restartCount": 0, "started": state is not None,
                             "state": mine})
        return {"initContainerStatuses": statuses}

    def _run(self, pod: dict[str, Any], container: dict[str, Any], volumes: dict[str, Path],
             log: Path, namespaces: list[str]) -> subprocess.Popen[bytes]:
        """One container's process: its command (or its image's entrypoint) and args, its
        environment, its volume mounts, in a mount namespace (and `namespaces`) of its own."""
        entry = self.images[container["image"]]
        argv = list(container.get("command") or entry) + list(container.get("args") or [])
        mounts = [(volumes[m["name"]], m["mountPath"]) for m in container.get("volumeMounts") or []
                  if m["name"] in volumes]
        script = " && ".join(["true", *(self._mount(source, target) for source, target in mounts)])
        with open(log, "wb") as out:
            return subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", *namespaces, "--", "sh", "-c",
                 f'{script} && exec "$@"', "container", *argv],
                env=self._env(pod, container), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)

    def _mount(self, source: Path, target: str) -> str:
        """Shell lines that mount a volume at `target`. A volume mounted over a folder that
        holds host paths the container needs (an emptyDir at /tmp over a checkout in /tmp,
        or over this node's own folder) would hide them: each is bound into the volume at
        its place first, and the volume is mounted with its submounts (--rbind). That leaves
        empty folders for them in the volume on the host side."""
        keep = [p for p in [*self.host_paths, self.root]
                if str(p).startswith(target.rstrip("/") + "/")]
        lines = []
        for p in keep:
            inside = source / Path(p).relative_to(target)
            lines.append(f"mkdir -p {shlex.quote(str(inside))} && "
                         f"mount --bind {shlex.quote(str(p))} {shlex.quote(str(inside))}")
        lines.append(f"mkdir -p {shlex.quote(target)} && "
                     f"mount --rbind {shlex.quote(str(source))} {shlex.quote(target)}")
        return " && ".join(lines)

    def _project(self, pod: dict[str, Any], projected: dict[str, Any], into: Path) -> None:
        """A projected volume as the kubelet fills it: a bound service-account token, the
        cluster CA (kube-root-ca.crt) and downward-API fields."""
        meta = pod["metadata"]
        for source in projected.get("sources") or []:
            if "serviceAccountToken" in source:
                sa = pod["spec"].get("serviceAccountName") or "default"
                token = source["serviceAccountToken"]
                (into / token.get("path", "token")).write_text(self.api.token(meta["namespace"], sa, pod=pod))
            elif "configMap" in source:
                for item in source["configMap"].get("items") or []:
                    if item["key"] == "ca.crt":
                        (into / item["path"]).write_bytes(Path(self.api.cp.pki.ca).read_bytes())
            elif "downwardAPI" in source:
                for item in source["downwardAPI"].get("items") or []:
                    field = (item.get("fieldRef") or {}).get("fieldPath", "")
                    (into / item["path"]).write_text(self._field(pod, field))

    def _watch_container(self, pod: dict[str, Any], c: Container, deleting: bool) -> None:
        code = c.proc.poll()
        if code is None and deleting:
            if c.kill_at is None:
                grace = pod["metadata"].get("deletionGracePeriodSeconds")
                grace = 30 if grace is None else int(grace)
                self._signal(c, signal.SIGTERM)
                c.kill_at = time.monotonic() + grace
            elif time.monotonic() >= c.kill_at:
                self._signal(c, signal.SIGKILL)
            return
        if code is None:
            return
        if not self._sidecars_stopped(pod, c, deleting):
            return
        self._report_exit(pod, c, code)
        del self.running[pod["metadata"]["uid"]]
        self.done.add(pod["metadata"]["uid"])
        if deleting:
            self._finish_deletion(pod)

    def _sidecars_stopped(self, pod: dict[str, Any], c: Container, deleting: bool) -> bool:
        """Whether the pod's sidecars are gone, now that its container has ended: SIGTERM
        first, SIGKILL once the pod's grace period is over (the kubelet's order); on
        deletion, at the deletion's deadline, which covers the whole pod."""
        alive = [p for _, p in c.sidecars if p.poll() is None]
        if not alive:
            return True
        if c.sidecars_killed_at is None:
            if deleting and c.kill_at is not None:  # the first container's deadline
                c.sidecars_killed_at = c.kill_at
            else:
                grace = (pod["metadata"].get("deletionGracePeriodSeconds") if deleting
                         else pod["spec"].get("terminationGracePeriodSeconds"))
                c.sidecars_killed_at = time.monotonic() + (30 if grace is None else int(grace))
            for proc in alive:
                self._signal_group(proc, signal.SIGTERM)
        elif time.monotonic() >= c.sidecars_killed_at:
            for proc in alive:
                self._signal_group(proc, signal.SIGKILL)
        return False

    @classmethod
    def _signal(cls, c: Container, sig: int) -> None:
        cls._signal_group(c.proc, sig)

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass

    def _report_exit(self, pod: dict[str, Any], c: Container, code: int) -> None:
        # A process killed by signal N exits as 128 + N in a container runtime.
        exit_code = 128 - code if code < 0 else code
        container = pod["spec"]["containers"][0]
        finished = _now()
        self._patch_status(pod, {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": self._conditions(pod, ready=False),
            "containerStatuses": [{"name": container["name"], "image": container["image"],
                                   "imageID": container["image"], "ready": False,
                                   "restartCount": 0, "started": False,
                                   "state": {"terminated": {
                                       "exitCode": exit_code,
                                       "reason": "Completed" if exit_code == 0 else "Error",
                                       "startedAt": c.started, "finishedAt": finished}}}],
            **self._sidecar_statuses(c)})

    def _report_waiting(self, pod: dict[str, Any], reason: str, message: str) -> None:
        container = pod["spec"]["containers"][0]
        self._patch_status(pod, {"containerStatuses": [{
            "name": container["name"], "image": container["image"], "imageID": "",
            "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}}}]})
        self.errors.append(message)

    def _conditions(self, pod: dict[str, Any], ready: bool) -> list[dict[str, Any]]:
        # Keep conditions others set (DisruptionTarget from an eviction, PodScheduled).
        keep = [c for c in pod["status"].get("conditions") or []
                if c["type"] not in ("Ready", "ContainersReady", "Initialized")]
        now, status = _now(), "True" if ready else "False"
        return keep + [{"type": t, "status": s, "lastTransitionTime": now}
                       for t, s in (("Initialized", "True"), ("Ready", status),
                                    ("ContainersReady", status))]

    def _patch_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.api.request("PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                         {"status": status}, "application/merge-patch+json")

    def _finish_deletion(self, pod: dict[str, Any]) -> None:
        """The kubelet's last word: delete with grace 0 once the containers are gone."""
        meta = pod["metadata"]
        self.api.request("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                         {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})

    def logs(self, namespace: str, pod_name: str, container: str = "") -> str:
        """What the pod's first container (or its sidecar `container`) printed (its log
        file), or '' if it never ran here."""
        log = self.log_paths.get((namespace, pod_name))
        if log is not None and container:
            log = self._sidecar_log(log, container)
        return log.read_text(errors="replace") if log and log.exists() else ""
