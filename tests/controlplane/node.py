"""A real node for the test control plane: containerd, runc, the CNI bridge, kubelet and
kube-scheduler, all on this machine.

What runs for real: kube-scheduler binds pods; kubelet (built by `make control-plane` from
the same k8s.io/kubernetes module as the API server) runs them through containerd's CRI
(containerd built from its Go module, runc and the CNI plugins from Debian: `make
node-deps`), in containers from the images `make images` built, imported into containerd's
image store with `ctr images import` and run by tag with `imagePullPolicy: IfNotPresent`.
The sandbox (pause) image is made here from this module's own `pause` command, since nothing
is pulled from a registry.

Names resolve through CoreDNS (built from its Go module) on the bridge's address, serving
cluster.local from the API and nothing else. Networking stays on this machine: pods sit on a Linux bridge (`xs-cni0`, 10.244.0.0/24,
host-local IPAM) with no default route, only a route to the service range; the one service
they need, `kubernetes` (10.96.0.1:443), is a DNAT rule in this module's own iptables chain to
the API server on 127.0.0.1 (route_localnet on the bridge). kube-proxy is built but not run:
it would program iptables for every service and set host sysctls on a machine other test
sessions share, for no pod traffic the tests need (docs/deploy.md, "Test cluster: the real
node"). IP forwarding is left as found (off here), so nothing a pod sends leaves the machine.

NetworkPolicy: enforced only where a test asks for it (`start_policy_engine()`, the
`policy_engine` fixture of tests/node): kube-router's network policy controller (built from
its Go module by `make policy-engine`; kube-router with --run-firewall alone, no routing and
no service proxy) watches the API with its own client certificate and turns each policy into
iptables chains and ipsets for this node's pods, as it does on a cluster whose pods sit on
its own bridge (br_netfilter hands bridged traffic to iptables). `stop_policy_engine()` (and
`stop()`) stops it and takes its chains and sets out again; the other node tests run with no
engine, as the bridge CNI alone enforces nothing. Not always on: each of its syncs rewrites
the machine's whole filter table (iptables-save, edit, iptables-restore), and a rule another
program on this shared machine adds in between (a dockerd of `make images`) would be lost.

Accelerators: a device plugin (deviceplugin/main.go, the kubelet's own device-plugin stub,
built by build.sh) registers 4 google.com/tpu and 2 nvidia.com/gpu chips with the kubelet
over the device-plugin API; they do not exist (no TPU or GPU here), but the kubelet counts
them on the Node, the scheduler places pods by them, and a container gets its chips'
environment (TPU_VISIBLE_CHIPS, and the TPU slice's shape as GKE gives it: TPU_TOPOLOGY,
TPU_HOST_BOUNDS, ...) and device nodes (/dev/accelN, standing in as /dev/null). The node
carries GKE's labels of a single-host TPU v5e 2x2 pool (TPU_LABELS); `restart_device_plugin`
makes its chips one host of a multi-host slice instead. Tests that want GKE's TPU taint set
it (TPU_TAINT), since the suite's other pods run on this one node.

`RealNode(cp).start()` brings it up once per test session; `stop()` deletes the pods on the
node through the API (kubelet tears their sandboxes and networks down through CNI), then
stops kubelet and containerd and removes whatever is left: tasks, netns mounts, the bridge,
the iptables chain, the kubepods cgroups and every mount under its folder.

gVisor: where `make gvisor` has built runsc and its containerd shim (gvisor_dir()),
containerd gets a second runtime, `runsc` (GVISOR_HANDLER, the shim named by its path, runsc
by runsc.toml), and `runtime_class()` creates the RuntimeClass `gvisor` with that handler,
as GKE Sandbox's node pools have it: a pod naming it runs on gVisor's kernel (the
`agents.runtimeClassName: gvisor` of the chart), every other pod on runc as before.

A machine that lacks a kernel feature the node needs (a cgroup controller, overlayfs,
network namespaces, bridges) raises NodeUnsupported, which tests turn into a skip naming the
feature; a missing build is a ControlPlaneError that fails them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import yaml

from .cluster import Component, ControlPlane, ControlPlaneError, cache_dir, free_port

NODE_BINARIES = ("kubelet", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr",
                 "pause", "coredns", "deviceplugin")
SYSTEM_BINARIES = {"runc": "runc", "ip": "iproute2", "iptables": "iptables"}
CNI_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
CNI_PLUGINS = ("bridge", "host-local", "loopback")
BRIDGE = "xs-cni0"
POD_SUBNET, GATEWAY = "10.244.0.0/24", "10.244.0.1"
SERVICE_SUBNET, API_SERVICE_IP = "10.96.0.0/24", "10.96.0.1"  # cluster.py's service range
CLUSTER_DOMAIN = "cluster.local"
CHAIN = "XS-NODE"
# endpointslice-controller: a headless Service's pods get DNS names only through the
# EndpointSlices it writes (a JobSet's hosts find host 0 at <pod>.<subdomain>, CoreDNS).
NODE_CONTROLLERS = ("node-lifecycle-controller", "root-ca-certificate-publisher-controller",
                    "deployment-controller", "replicaset-controller", "endpointslice-controller")
NAMESPACE = "k8s.io"  # containerd's namespace for CRI (kubelet's) images and containers
PAUSE_IMAGE = "xla-sentinel.test/pause:1"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xla-sentinel"
LOCK = CACHE / "node.lock"
# containerd's content store and snapshots, kept between sessions (under the lock) so a warm
# start finds the images unpacked; its state (tasks, sockets, netns) is per node.
IMAGE_STORE = CACHE / "node-containerd"
# Accelerators the node advertises through its device plugin (deviceplugin/main.go): chips
# that do not exist here, counted and allocated by the real kubelet and scheduler. The node
# is labelled as a GKE node of a single-host TPU v5e 2x2 pool (4 chips); the taint GKE puts
# on TPU nodes (TPU_TAINT) is not registered with the node, since every other pod of the
# suite (the chart's operator among them) runs here too: tests that need it set it
# (tests/node/test_accelerators.py).
ACCELERATORS = {"google.com/tpu": 4, "nvidia.com/gpu": 2}
TPU_LABELS = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
              "cloud.google.com/gke-tpu-topology": "2x2",
              "cloud.google.com/gke-nodepool": "tpu-v5e-2x2"}
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}
# Where kubelet 1.34 takes device plugins' registrations: pluginapi.KubeletSocket, fixed,
# whatever its --root-dir (so one per machine, as the node is). Its checkpoint of which pod
# holds which chip lies beside it, and survives a kubelet restart.
DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")


# gVisor (`make gvisor`, the Makefile's GVISOR_DIR): runsc and containerd's shim for it,
# registered with containerd as the runtime GVISOR_HANDLER, which the RuntimeClass
# GVISOR_RUNTIME_CLASS names (GKE Sandbox's RuntimeClass is `gvisor` too).
GVISOR_BINARIES = ("runsc", "containerd-shim-runsc-v1")
GVISOR_HANDLER = "runsc"
GVISOR_RUNTIME_CLASS = "gvisor"


def gvisor_dir() -> Path:
    """Where `make gvisor` puts runsc and its shim: $GVISOR_DIR, else the cache's gvisor/."""
    if os.environ.get("GVISOR_DIR"):
        return Path(os.environ["GVISOR_DIR"])
    return CACHE / "gvisor"


def gvisor_binaries() -> dict[str, Path] | None:
    """runsc and containerd-shim-runsc-v1 by name, or None where `make gvisor` has not built
    both."""
    found = {name: gvisor_dir() / name for name in GVISOR_BINARIES}
    return found if all(os.access(p, os.X_OK) for p in found.values()) else None


# The NetworkPolicy engine (build.sh kube-router, `make policy-engine`) and what its network
# policy controller (kube-router v2.1.0, pkg/controllers/netpol) writes, all of it into the
# filter table and ipset: top-level chains hooked from INPUT, FORWARD and OUTPUT, a chain
# per policy and per pod of this node, and a set of addresses per policy's peers.
POLICY_ENGINE = "kube-router"
POLICY_CHAINS = ("KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-")
POLICY_IPSETS = ("KUBE-SRC-", "KUBE-DST-")


# Where `make images` leaves the archives (the Makefile's IMAGES_OUT default).
IMAGES_OUT = Path(os.environ.get("IMAGES_OUT") or Path.home() / ".cache" / "xla-sentinel" / "images")
IMAGES_MANIFEST = IMAGES_OUT / "images.json"


def built_images(manifest: Path = IMAGES_MANIFEST) -> dict[str, dict[str, Any]]:
    """'operator' and 'runner-cpu' (and any other built) -> their images.json row (ref,
    archive); a missing manifest or archive is a ControlPlaneError naming `make images`."""
    if not manifest.is_file():
        raise ControlPlaneError(f"{manifest} is missing: run `make images`")
    rows = json.loads(manifest.read_text())["images"]
    found = {r["target"] + (f"-{r['flavor']}" if r["flavor"] else ""): r for r in rows}
    for want in ("operator", "runner-cpu"):
        if want not in found or not Path(found[want]["archive"]).is_file():
            raise ControlPlaneError(f"no {want} image archive in {manifest}: run `make images`")
    return found


def chart_image_values(images: dict[str, dict[str, Any]]) -> list[str]:
    """`helm --set` values naming the built images by registry, repository and tag, pulled
    IfNotPresent (so from the node's image store, never from a registry)."""
    sets = ["images.pullPolicy=IfNotPresent"]
    registries = set()
    for key, target in (("operator", "operator"), ("runner.cpu", "runner-cpu")):
        name, tag = images[target]["ref"].rsplit(":", 1)
        registry, repository = name.rsplit("/", 1)
        registries.add(registry)
        sets += [f"images.{key}.repository={repository}", f"images.{key}.tag={tag}"]
    if len(registries) != 1:  # the chart has one registry for all images
        raise ControlPlaneError(f"the built images come from several registries: {registries}")
    return [*sets, f"images.registry={registries.pop()}"]


class NodeUnsupported(RuntimeError):
    """This machine's kernel lacks a feature a real node needs; the message names it and
    shows the error."""


class NodeBusy(ControlPlaneError):
    """Another process held the machine's real node for longer than this one would wait;
    the message names that process."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class NodeLock:
    """The machine's one real node (the bridge, the subnet, the iptables chain and the
    kubelet's device-plugin folder are global): an flock on `path` that one process holds
    at a time, whichever checkout or session it runs (a developer's tests beside CI's,
    `make dev-cluster`, bench/operator_scale.py --real-node). The holder writes who it is
    into the file, so a waiter can say whom it waits for.

    Held or not per process, not counted: a test session takes it before its first node
    test's timeout starts (tests/node/conftest.py), RealNode.start then finds it held, and
    RealNode.stop gives it back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def holder(self) -> str:
        """Who holds it, as the holder wrote it ('' when nobody has said)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def acquire(self, timeout: float | None = None, progress: Callable[[str], None] = _stderr,
                every: float = 30) -> None:
        """Take it, waiting at most `timeout` seconds (None: for as long as it takes), and
        tell `progress` every `every` seconds whom it waits for; NodeBusy past the timeout.
        Held already by this process: nothing to do."""
        if self._file is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")
        start = time.monotonic()
        report = start if timeout != 0 else float("inf")
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - start
                if timeout is not None and waited >= timeout:
                    f.close()
                    raise NodeBusy(f"the machine's real node ({self.path}) is held by "
                                   f"{self.holder() or 'another process'}; gave up after "
                                   f"{waited:.0f} s") from None
                if time.monotonic() >= report:
                    progress(f"waiting for the machine's real node ({self.path}), held by "
                             f"{self.holder() or 'another process'}: {waited:.0f} s so far")
                    report += every
                time.sleep(0.5)
        f.truncate(0)
        f.write(f"pid {os.getpid()} ({' '.join(sys.argv)[:200]}) in {os.getcwd()}, since "
                f"{time.strftime('%H:%M:%S')}\n")
        f.flush()
        self._file = f

    def release(self) -> None:
        """Give it back (closing the file drops the flock). Not held: nothing to do."""
        if self._file is None:
            return
        self._file.truncate(0)
        self._file.close()
        self._file = None


NODE_LOCK = NodeLock(LOCK)


def node_binaries() -> dict[str, Path]:
    """kubelet, kube-scheduler, containerd (+ shim, ctr), pause, coredns and the device
    plugin from build.sh; runc and the
    CNI plugins from Debian. Missing ones raise ControlPlaneError naming the make target."""
    where = cache_dir()
    found = {name: where / name for name in NODE_BINARIES}
    missing = [n for n, p in found.items() if not os.access(p, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{', '.join(missing)} not built in {where}: run `make control-plane`")
    for name, package in SYSTEM_BINARIES.items():
        path = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
        if path is None:
            raise ControlPlaneError(f"{name} not found: run `make node-deps` (Debian's {package})")
        found[name] = Path(path)
    cni = next((d for d in CNI_DIRS if all((d / p).is_file() for p in CNI_PLUGINS)), None)
    if cni is None:
        raise ControlPlaneError(f"CNI plugins {', '.join(CNI_PLUGINS)} not in {' or '.join(map(str, CNI_DIRS))}:"
                                " run `make node-deps` (Debian's containernetworking-plugins)")
    found["cni"] = cni
    return found


def _run(*argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise ControlPlaneError(f"{' '.join(argv)} exited {out.returncode}: {out.stderr.strip()}")
    return out


def remove_policy_rules() -> None:
    """Take out of the filter table and ipset what kube-router's network policy controller put
    there (POLICY_CHAINS, POLICY_IPSETS), left by a stopped or crashed engine. Not kube-router's
    own --cleanup-config: that also tears down its service proxy's IPVS services and its
    router's routes, machine-wide, which this node never made."""
    saved = _run("iptables-save", "-t", "filter").stdout.splitlines()
    for line in saved:  # the jumps from the built-in chains first: a referenced chain stays
        rule = shlex.split(line) if line.startswith("-A ") else []
        if (rule and rule[1] in ("INPUT", "FORWARD", "OUTPUT") and rule[-2] == "-j"
                and rule[-1].startswith(POLICY_CHAINS)):
            _run("iptables", "-t", "filter", "-D", *rule[1:])
    chains = [line[1:].split()[0] for line in saved
              if line.startswith(":") and line[1:].startswith(POLICY_CHAINS)]
    for chain in chains:  # flushed all before any is deleted: they jump to one another
        _run("iptables", "-t", "filter", "-F", chain)
    for chain in chains:
        _run("iptables", "-t", "filter", "-X", chain)
    for name in _run("ipset", "list", "-n").stdout.split():
        if name.startswith(POLICY_IPSETS):
            _run("ipset", "destroy", name)


def cgroup_version() -> int:
    """2 on a unified hierarchy (`stat -fc %T /sys/fs/cgroup` says cgroup2fs), else 1."""
    return 2 if _run("stat", "-fc", "%T", "/sys/fs/cgroup").stdout.strip() == "cgroup2fs" else 1


def check_kernel() -> None:
    """Raise NodeUnsupported where a kernel feature kubelet or runc needs is missing."""
    if os.geteuid() != 0:
        raise NodeUnsupported("a real node needs root (kubelet, containerd and runc run as root)")
    if "overlay" not in Path("/proc/filesystems").read_text():
        raise NodeUnsupported("no overlayfs in /proc/filesystems: containerd's snapshotter needs it")
    if cgroup_version() == 2:
        controllers = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
        wanted = ["cpu", "memory", "pids"]
    else:
        controllers = [c for c in ("cpu", "cpuacct", "cpuset", "memory", "pids")
                       if os.access(f"/sys/fs/cgroup/{c}", os.W_OK)]
        wanted = ["cpu", "cpuacct", "cpuset", "memory", "pids"]
    lacking = [c for c in wanted if c not in controllers]
    if lacking:
        raise NodeUnsupported(f"cgroup v{cgroup_version()} controllers {', '.join(lacking)} not "
                              "available (writable) here: kubelet enforces pod limits through them")
    probe = _run("ip", "netns", "add", "xs-node-probe", check=False)
    if probe.returncode != 0:
        raise NodeUnsupported(f"cannot make a network namespace: {probe.stderr.strip()}")
    _run("ip", "netns", "del", "xs-node-probe", check=False)


def pause_archive(pause: Path, out: Path) -> Path:
    """A docker-archive image holding only `pause`, for `ctr images import`: the sandbox image."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tar.gettarinfo(str(pause), arcname="pause")
        info.mode, info.uid, info.gid, info.uname, info.gname, info.mtime = 0o755, 0, 0, "", "", 0
        with open(pause, "rb") as f:
            tar.addfile(info, f)
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [PAUSE_IMAGE],
                            "Layers": ["layer/layer.tar"]}]).encode()
    with tarfile.open(out, "w") as tar:
        for name, data in (("layer/layer.tar", layer_bytes), (config_name, config),
                           ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def _has_cap_sys_resource() -> bool:
    """Whether this process may lower an oom_score_adj. Where it may not (this VM's root
    lacks CAP_SYS_RESOURCE), runc fails on the sandbox's -998 with "can't get final child's
    PID from pipe: EOF", so containerd is told to clamp scores at its own (as rootless
    containerd does); kubelet's ordering of pods (besteffort 1000 > burstable > guaranteed)
    stays as long as none is below 0."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)  # CAP_SYS_RESOURCE = 24
    return False


class _Process(Component):
    """A node component; containerd finds its shim (containerd-shim-runc-v2) on PATH, so the
    build folder comes first there, ahead of any other containerd's."""

    def start(self) -> None:
        env = {**os.environ, "PATH": f"{cache_dir()}:{os.environ.get('PATH', '')}:/usr/sbin:/sbin"}
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, env=env)


class RealNode:
    """One node, `name`, registered with `cp`; `images` are archives to import at start."""

    def __init__(self, cp: ControlPlane, images: list[Path], name: str = "node-real",
                 root: Path | None = None) -> None:
        self.cp, self.name, self.images = cp, name, images
        self.bins = node_binaries()
        self.root = root or Path(tempfile.mkdtemp(prefix="xs-node-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.logs = self.root / "logs"
        self.logs.mkdir(exist_ok=True)
        self.socket = self.root / "containerd" / "containerd.sock"
        self.cgroup_driver = "systemd" if self._systemd_cgroups() else "cgroupfs"
        self.gvisor = gvisor_binaries()  # read before containerd's config, which names them
        self.containerd = _Process("containerd", [
            str(self.bins["containerd"]), "--config", str(self._containerd_config())], self.logs)
        self.scheduler = _Process("kube-scheduler", self._scheduler_argv(), self.logs)
        self.lifecycle = _Process("node-controllers", self._lifecycle_argv(), self.logs)
        self.dns = _Process("coredns", self._coredns_argv(), self.logs)
        self.kubelet = _Process("kubelet", self._kubelet_argv(), self.logs)
        self.deviceplugin = _Process("deviceplugin", self._deviceplugin_argv(), self.logs)
        self.policy_engine: _Process | None = None
        self._policy_log_start = 0
        self._made_kubelet_dir = False
        self._started: list[_Process] = []

    @staticmethod
    def _systemd_cgroups() -> bool:
        """kubelet and runc must agree with whoever manages this machine's cgroups: systemd
        where it runs as PID 1, else cgroupfs (as here, in a VM without systemd)."""
        try:
            return Path("/proc/1/comm").read_text().strip() == "systemd"
        except OSError:
            return False

    # --- configuration -------------------------------------------------------------------

    def _deviceplugin_argv(self, tpu_topology: str | None = None) -> list[str]:
        """The device plugin's command line: ACCELERATORS' chips, the TPU ones one host of a
        slice of the node's TPU (TPU_LABELS) of `tpu_topology`: by default the node's own
        2x2, a single-host slice; a larger one (2x4) makes this node one host of a multi-host
        slice, which is what a container's environment says (deviceplugin/main.go)."""
        topology = tpu_topology or TPU_LABELS["cloud.google.com/gke-tpu-topology"]
        return [str(self.bins["deviceplugin"]), f"--kubelet-socket={DEVICE_PLUGINS / 'kubelet.sock'}",
                *[f"--resource={name}={n}" for name, n in ACCELERATORS.items()],
                f"--tpu-accelerator={TPU_LABELS['cloud.google.com/gke-tpu-accelerator']}",
                f"--tpu-topology={topology}"]

    def restart_device_plugin(self, tpu_topology: str | None = None, timeout: float = 60) -> None:
        """Run the device plugin again with its TPU chips one host of a `tpu_topology` slice
        (_deviceplugin_argv; None: the node's own single-host one), as a node of another TPU
        node pool would be; returns once it has registered with the kubelet and the chips are
        allocatable again. The Node's labels stay TPU_LABELS', and pods already given chips
        keep the environment they got."""
        registrations = self._plugin_registrations()
        self.deviceplugin.stop()
        self.deviceplugin.argv = self._deviceplugin_argv(tpu_topology)
        self.deviceplugin.start()
        self._wait("device plugin registered again",
                   lambda: self._plugin_registrations() >= registrations + len(ACCELERATORS), timeout)
        self._wait(f"accelerators allocatable on {self.name} again", self.accelerators_advertised,
                   timeout)

    def _containerd_config(self) -> Path:
        cd = self.root / "containerd"
        cd.mkdir(parents=True, exist_ok=True)
        IMAGE_STORE.mkdir(parents=True, exist_ok=True)
        cni_conf = self.root / "cni" / "net.d"
        cni_conf.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-xs.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "xs-pods",
            "plugins": [
                {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "isDefaultGateway": False,
                 "ipMasq": False, "hairpinMode": True,
                 "ipam": {"type": "host-local", "dataDir": str(self.root / "cni" / "ipam"),
                          "ranges": [[{"subnet": POD_SUBNET, "gateway": GATEWAY}]],
                          # No default route: a pod reaches the bridge and the service range only.
                          "routes": [{"dst": SERVICE_SUBNET}]}},
                {"type": "loopback"}]}, indent=1))
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        text = f"""version = 2
root = "{IMAGE_STORE}"
state = "{cd / 'state'}"
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{cd / 'ttrpc.sock'}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{cd / 'opt'}"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = false
  restrict_oom_score_adj = {str(not _has_cap_sys_resource()).lower()}
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = "{self.bins['runc']}"
        SystemdCgroup = {str(self.cgroup_driver == 'systemd').lower()}
{self._runsc_runtime(cd)}  [{cri}.cni]
    bin_dir = "{self.bins['cni']}"
    conf_dir = "{cni_conf}"
    max_conf_num = 1
"""
        path = cd / "config.toml"
        path.write_text(text)
        return path

    def _runsc_runtime(self, cd: Path) -> str:
        """containerd's CRI runtime GVISOR_HANDLER (none where gVisor is not built): its shim
        by path (runtime_path, so no PATH lookup finds another), which reads runsc.toml
        (ConfigPath): which runsc, its state under the node's folder, and its flags.
        platform systrap: no KVM on this VM (and systrap is runsc's default anyway).
        host-uds all: a unix socket bound in a pod's emptyDir is made on the host, where the
        pod's other containers connect to it (the agent pod's exchange socket). Without it
        each container reaches the emptyDir through its own gofer mount, and a socket bound
        in one is not found from the other ("No such file or directory"). The shim's other
        way, mount hints (dev.gvisor.spec.mount.* pod annotations, by its comments set by
        GKE's admission: the volume one gVisor-internal mount of the pod), resolves volumes
        under /var/lib/kubelet/pods, which this node's kubelet (its root under the node's
        folder) does not use. Cgroups
        are runsc's own (no ignore-cgroups: it makes the pod's under kubepods like runc).
        debug-log per sandbox and command into the node's logs, for a failing start.

        This VM's root lacks CAP_SYS_RESOURCE: the stock shim (gVisor's pkg/shim/v1
        manager.go) sets its own oom_score_adj to -999 and gives up when that is refused
        ("failed to set OOM Score on shim: ... permission denied"); a shim built with that
        refusal tolerated runs here (tests/node/test_agent_gvisor_node.py skips, naming the
        refusal, where the shim gave up)."""
        if self.gvisor is None:
            return ""
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        runsc_toml = cd / "runsc.toml"
        runsc_toml.write_text(f"""binary_name = "{self.gvisor['runsc']}"
root = "{cd / 'runsc'}"
[runsc_config]
  platform = "systrap"
  host-uds = "all"
  debug-log = "{self.logs}/runsc/%ID%/%COMMAND%.log"
""")
        return f"""    [{cri}.containerd.runtimes.{GVISOR_HANDLER}]
      runtime_type = "io.containerd.runsc.v1"
      runtime_path = "{self.gvisor['containerd-shim-runsc-v1']}"
      [{cri}.containerd.runtimes.{GVISOR_HANDLER}.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "{runsc_toml}"
"""

    def runtime_class(self) -> str:
        """The RuntimeClass GVISOR_RUNTIME_CLASS (handler GVISOR_HANDLER), created if missing;
        its name. ControlPlaneError naming `make gvisor` where runsc or its shim is not built
        (containerd has no such runtime then)."""
        from .kit import Api  # kit imports the test tools; only needed here

        if self.gvisor is None:
            raise ControlPlaneError(f"gVisor's {' and '.join(GVISOR_BINARIES)} not built in "
                                    f"{gvisor_dir()}: run `make gvisor`")
        api = Api(self.cp)
        if api.get("node.k8s.io/v1/runtimeclasses", None, GVISOR_RUNTIME_CLASS) is None:
            api.create("node.k8s.io/v1/runtimeclasses", None, {
                "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                "metadata": {"name": GVISOR_RUNTIME_CLASS}, "handler": GVISOR_HANDLER})
        return GVISOR_RUNTIME_CLASS

    def _scheduler_argv(self) -> list[str]:
        pair = self.cp.pki.client("system:kube-scheduler")
        config = self.cp.write_kubeconfig("system:kube-scheduler", pair)
        return [str(self.bins["kube-scheduler"]), f"--kubeconfig={config}",
                f"--authentication-kubeconfig={config}", f"--authorization-kubeconfig={config}",
                # Its HTTPS port serves only health and metrics, which nothing reads: off, so
                # it cannot collide with another component's (kwok.py SERVING_OFF).
                "--leader-elect=false", "--secure-port=0", "-v=1"]

    def _lifecycle_argv(self) -> list[str]:
        """A second kube-controller-manager for what a real kubelet needs of the control
        plane: the node lifecycle controller lifts the not-ready taint kubelet registers
        with once the node is Ready (and taints an unresponsive node), and the root CA
        publisher writes the kube-root-ca.crt ConfigMap every pod's service-account volume
        projects; the Deployment and ReplicaSet controllers run the chart's operator
        Deployment as pods. Not in the control plane's own controller manager, where the
        first would mark the fake node's (kubelet.py) Nodes unreachable and the others would
        start pods of the chart's Deployment that the fake-node tests run in-process."""
        pair = self.cp.pki.client("xs:node-lifecycle-controller", ("system:masters",))
        config = self.cp.write_kubeconfig("xs:node-lifecycle-controller", pair)
        return [str(self.cp.bins["kube-controller-manager"]), f"--kubeconfig={config}",
                f"--authentication-kubeconfig={config}", f"--authorization-kubeconfig={config}",
                "--leader-elect=false", f"--controllers={','.join(NODE_CONTROLLERS)}",
                f"--root-ca-file={self.cp.pki.ca}",
                "--secure-port=0",  # as the scheduler's
                "--node-monitor-period=2s", "-v=1"]

    def _coredns_argv(self) -> list[str]:
        """The cluster DNS, on the bridge's address, as a cluster's CoreDNS serves it: service
        and pod names of cluster.local from the API. No `forward`: any other name is refused
        here rather than asked of a resolver off this machine."""
        pair = self.cp.pki.client("xs:coredns", ("system:masters",))
        config = self.cp.write_kubeconfig("xs:coredns", pair)
        corefile = self.root / "Corefile"
        corefile.write_text(f""".:53 {{
    bind {GATEWAY}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {config} xs:coredns
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
""")
        return [str(self.bins["coredns"]), "-conf", str(corefile)]

    def _policy_engine_argv(self) -> list[str]:
        """kube-router with its network policy controller alone, for this node (it finds the
        node's pods by their hostIP, the node's InternalIP) and the cluster's service range;
        its health and metrics servers off (nothing scrapes them; its log says when a sync
        is done)."""
        binary = cache_dir() / POLICY_ENGINE
        if not os.access(binary, os.X_OK):
            raise ControlPlaneError(f"{POLICY_ENGINE} not built in {cache_dir()}: run `make policy-engine`")
        if shutil.which("ipset", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None:
            raise ControlPlaneError("ipset not found: run `make node-deps` (Debian's ipset)")
        pair = self.cp.pki.client("xs:kube-router", ("system:masters",))
        config = self.cp.write_kubeconfig("xs:kube-router", pair)
        return [str(binary), f"--kubeconfig={config}", f"--hostname-override={self.name}",
                "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
                f"--service-cluster-ip-range={SERVICE_SUBNET}", "--health-port=0",
                "--metrics-port=0", "-v=1"]

    def _kubelet_argv(self) -> list[str]:
        # The Node authorizer and NodeRestriction admission know a kubelet by this name.
        pair = self.cp.pki.client(f"system:node:{self.name}", ("system:nodes",))
        kubeconfig = self.cp.write_kubeconfig(f"system:node:{self.name}", pair)
        kroot = self.root / "kubelet"
        kroot.mkdir(exist_ok=True)
        resolv = Path("/etc/resolv.conf")
        if not resolv.is_file():
            resolv = self.root / "resolv.conf"
            resolv.write_text("")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            # The API server (logs, exec) authenticates with a client certificate of the test CA.
            "authentication": {"x509": {"clientCAFile": str(self.cp.pki.ca)},
                               "webhook": {"enabled": False}, "anonymous": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "address": GATEWAY, "port": free_port(), "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
            "cgroupDriver": self.cgroup_driver, "failSwapOn": False, "failCgroupV1": False,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "resolvConf": str(resolv), "staticPodPath": "",
            "clusterDNS": [GATEWAY], "clusterDomain": CLUSTER_DOMAIN,
            "serializeImagePulls": False, "registerNode": True,
            # The disk is shared with other test sessions: pressure on it would taint the node
            # and evict the pods under test, which the eviction test provokes on purpose.
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "nodeStatusUpdateFrequency": "2s", "nodeStatusReportFrequency": "10s",
            "syncFrequency": "5s", "fileCheckFrequency": "5s",
            "shutdownGracePeriod": "0s", "logging": {"verbosity": 1},
        }
        path = kroot / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        self.kubelet_port, self.healthz_port = config["port"], config["healthzPort"]
        return [str(self.bins["kubelet"]), f"--config={path}", f"--kubeconfig={kubeconfig}",
                f"--root-dir={kroot / 'root'}", f"--cert-dir={kroot / 'pki'}",
                f"--hostname-override={self.name}", f"--node-ip={GATEWAY}",
                "--node-labels=" + ",".join(f"{k}={v}" for k, v in TPU_LABELS.items())]

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 120) -> RealNode:
        """Bring the node up and wait until it is Ready; raise NodeUnsupported or
        ControlPlaneError (with the failing component's log) otherwise."""
        check_kernel()
        NODE_LOCK.acquire()
        self._made_kubelet_dir = not DEVICE_PLUGINS.parent.exists()
        try:
            self._network_up()
            self._start(self.containerd)
            self._wait("containerd socket", self.socket.exists, timeout)
            self.import_images([pause_archive(self.bins["pause"], self.root / "pause.tar"),
                                *self.images])
            self._start(self.scheduler)
            self._start(self.lifecycle)
            self._start(self.dns)
            self._start(self.kubelet)
            self._start(self.deviceplugin)  # it registers once the kubelet's socket is there
            self._wait(f"node {self.name} Ready", self.ready, timeout)
            self._wait(f"accelerators allocatable on {self.name}", self.accelerators_advertised,
                       timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_policy_engine(self, timeout: float = 120) -> None:
        """Enforce NetworkPolicy on this node from now on (module docstring): start kube-router's
        network policy controller and return once its first sync has programmed iptables.
        Started already: nothing to do."""
        if self.policy_engine is not None:
            return
        remove_policy_rules()  # an earlier crashed run's chains would shadow the new ones
        engine = _Process(POLICY_ENGINE, self._policy_engine_argv(), self.logs)
        self.policy_engine = engine
        # Its log is appended to: only what this run writes says this run has synced.
        self._policy_log_start = engine.log_path.stat().st_size if engine.log_path.exists() else 0
        try:
            self._start(engine)
            self._wait(f"{POLICY_ENGINE}'s first network policy sync", self._policy_synced, timeout)
        except BaseException:
            self.stop_policy_engine()
            raise

    def stop_policy_engine(self) -> None:
        """Stop the engine and take its chains and sets out: the node enforces nothing again."""
        if self.policy_engine is None:
            return
        self.policy_engine.stop()
        with contextlib.suppress(ValueError):
            self._started.remove(self.policy_engine)
        self.policy_engine = None
        remove_policy_rules()

    def _policy_synced(self) -> bool:
        """Whether the engine has finished a full sync (its log says so at -v=1) and its
        chain is hooked into FORWARD, where the pods' bridged traffic passes."""
        assert self.policy_engine is not None
        with open(self.policy_engine.log_path, "rb") as f:
            f.seek(self._policy_log_start)
            log = f.read().decode(errors="replace")
        forward = _run("iptables", "-t", "filter", "-S", "FORWARD").stdout
        return "sync iptables took" in log and "-j KUBE-ROUTER-FORWARD" in forward

    def _start(self, c: _Process) -> None:
        c.start()
        self._started.append(c)

    def _wait(self, what: str, ready: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c in self._started:
                c.check_alive()
            with contextlib.suppress(OSError):
                if ready():
                    return
            time.sleep(0.5)
        logs = "\n".join(f"--- {c.name}\n{c.tail(25)}" for c in self._started)
        raise ControlPlaneError(f"{what} not within {timeout:.0f} s:\n{logs}")

    def restart(self, timeout: float = 120) -> None:
        """Stop kubelet and containerd and start them again, as an upgrade or a crash of the
        node's agents does: the containers' shims (own process groups) and processes keep
        running meanwhile, and the restarted kubelet finds its pods through containerd's
        CRI instead of starting them again. Returns once the kubelet answers /healthz and
        the node is Ready; the node's other parts (scheduler, DNS, network) stay up."""
        registrations = self._plugin_registrations()
        self.kubelet.stop()
        self.containerd.stop()
        self.socket.unlink(missing_ok=True)  # so the wait below sees the new containerd's
        self.containerd.start()
        self._wait("containerd socket after restart", self.socket.exists, timeout)
        self.kubelet.start()
        self._wait(f"kubelet of {self.name} healthy after restart", self._kubelet_healthy, timeout)
        self._wait(f"node {self.name} Ready after restart", self.ready, timeout)
        # The new kubelet removed the plugin's sockets; the plugin serves and registers again
        # (until then the Node keeps the old kubelet's allocatable).
        self._wait("device plugin registered with the new kubelet",
                   lambda: self._plugin_registrations() >= registrations + len(ACCELERATORS), timeout)
        self._wait(f"accelerators allocatable on {self.name} after restart",
                   self.accelerators_advertised, timeout)

    def _kubelet_healthy(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz",
                                    timeout=2) as answer:
            return bool(answer.status == 200)

    def expose_host_port(self, namespace: str, name: str, port: int) -> str:
        """Make a service listening on this host at GATEWAY:`port` (the host side of the pod
        bridge, the one host address pods reach: they have no default route) reachable from
        pods as `name.namespace.svc`: a headless Service with an EndpointSlice of that
        address, which the node's CoreDNS resolves (no kube-proxy needed). Creates the
        namespace if missing; returns the service's DNS name."""
        from .kit import Api  # kit imports the test tools; only needed here

        api = Api(self.cp)
        if api.get("v1/namespaces", None, namespace) is None:
            api.create("v1/namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": namespace}})
        api.create("v1/services", namespace, {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"clusterIP": "None", "ports": [{"name": "main", "port": port}]}})
        api.create("discovery.k8s.io/v1/endpointslices", namespace, {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-host", "labels": {
                "kubernetes.io/service-name": name,
                "endpointslice.kubernetes.io/managed-by": "xla-sentinel-tests"}},
            "addressType": "IPv4", "ports": [{"name": "main", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [GATEWAY], "conditions": {"ready": True}}]})
        return f"{name}.{namespace}.svc"

    def container_pid(self, container_id: str) -> int:
        """The host PID of a container's main process (a pod status' containerID,
        `containerd://ID`), from containerd's task list."""
        wanted = container_id.removeprefix("containerd://")
        for line in self.ctr("tasks", "ls", timeout=30).stdout.splitlines()[1:]:
            task, pid, *_ = line.split()
            if task == wanted:
                return int(pid)
        raise ControlPlaneError(f"no running task {wanted} in containerd")

    def oom_kills(self, container_id: str) -> int:
        """How many processes the kernel's OOM killer has killed in a running container's
        memory cgroup (v1: memory.oom_control, v2: memory.events, `oom_kill`). On cgroup v1
        the kernel kills the largest process of the cgroup only; on v2 kubelet sets
        memory.oom.group, so an OOM kills the whole container."""
        pid = self.container_pid(container_id)
        try:
            return self._oom_kills(container_id, pid)
        except FileNotFoundError as e:  # the task ended between listing it and reading it
            raise ControlPlaneError(f"container {container_id} (pid {pid}) ended: {e}") from None

    def _oom_kills(self, container_id: str, pid: int) -> int:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if cgroup_version() == 1 and "memory" in controllers.split(","):
                counters = Path("/sys/fs/cgroup/memory", path.lstrip("/"), "memory.oom_control")
                break
            if cgroup_version() == 2 and controllers == "":
                counters = Path("/sys/fs/cgroup", path.lstrip("/"), "memory.events")
                break
        else:
            raise ControlPlaneError(f"no memory cgroup for container {container_id} (pid {pid})")
        fields = dict(line.split() for line in counters.read_text().splitlines())
        return int(fields.get("oom_kill", 0))

    def ctr(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return _run(str(self.bins["ctr"]), "--address", str(self.socket), "-n", NAMESPACE, *args,
                    timeout=timeout)

    def import_images(self, archives: list[Path]) -> None:
        for archive in archives:
            if not archive.is_file():
                raise ControlPlaneError(f"image archive {archive} missing: run `make images`")
            self.ctr("images", "import", str(archive))

    def ready(self) -> bool:
        code, body = self.cp.get(f"/api/v1/nodes/{self.name}")
        if code != 200:
            return False
        conditions = json.loads(body).get("status", {}).get("conditions") or []
        taints = json.loads(body).get("spec", {}).get("taints") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and not any(
            t["key"] == "node.kubernetes.io/not-ready" for t in taints)

    def _plugin_registrations(self) -> int:
        """Registrations the device plugin has logged (one per resource and kubelet)."""
        if not self.deviceplugin.log_path.exists():
            return 0
        return self.deviceplugin.log_path.read_text(errors="replace").count("registered with the kubelet")

    def accelerators_advertised(self) -> bool:
        """Whether the Node's allocatable holds every chip of ACCELERATORS (the device
        plugin registered with this kubelet and listed its devices)."""
        code, body = self.cp.get(f"/api/v1/nodes/{self.name}")
        allocatable = json.loads(body).get("status", {}).get("allocatable", {}) if code == 200 else {}
        return all(allocatable.get(name) == str(n) for name, n in ACCELERATORS.items())

    def _network_up(self) -> None:
        """The bridge (made here so route_localnet can be set before the first pod) and the
        DNAT for the `kubernetes` service; a leftover of an earlier crashed run is replaced."""
        self._network_down()
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        # Packets from pods DNATed to 127.0.0.1 are otherwise dropped as martians.
        Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/route_localnet").write_text("1")
        port = self.cp.port
        _run("iptables", "-t", "nat", "-N", CHAIN)
        _run("iptables", "-t", "nat", "-A", CHAIN, "-s", POD_SUBNET, "-d", API_SERVICE_IP, "-p",
             "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", f"127.0.0.1:{port}")
        _run("iptables", "-t", "nat", "-I", "PREROUTING", "-i", BRIDGE, "-j", CHAIN)

    def _network_down(self) -> None:
        _run("iptables", "-t", "nat", "-D", "PREROUTING", "-i", BRIDGE, "-j", CHAIN, check=False)
        _run("iptables", "-t", "nat", "-F", CHAIN, check=False)
        _run("iptables", "-t", "nat", "-X", CHAIN, check=False)
        _run("ip", "link", "del", BRIDGE, check=False)

    def pods(self) -> list[dict[str, Any]]:
        code, body = self.cp.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{self.name}")
        return json.loads(body).get("items") or [] if code == 200 else []

    def stop(self, timeout: float = 90) -> None:
        """Remove everything the node made: pods (through kubelet, so CNI tears their
        networks down), then containers, netns mounts, the bridge, the chain, cgroups, mounts."""
        self.stop_policy_engine()
        if self.kubelet.proc is not None and self.kubelet.proc.poll() is None:
            self._drain(timeout)
        for c in (self.deviceplugin, self.kubelet, self.scheduler, self.lifecycle, self.dns):
            c.stop()
        if self.containerd.proc is not None and self.containerd.proc.poll() is None:
            self._remove_containers()
        self.containerd.stop()
        self._started.clear()
        self._unmount_all()
        self._network_down()
        self._remove_cgroups()
        shutil.rmtree(self.root, ignore_errors=True)
        if self._made_kubelet_dir:  # only the kubelet's device-plugin folder was in it
            shutil.rmtree(DEVICE_PLUGINS.parent, ignore_errors=True)
        NODE_LOCK.release()

    def _drain(self, timeout: float) -> None:
        from .kit import Api  # kit imports the test tools; only needed here

        api = Api(self.cp)
        for pod in self.pods():
            meta = pod["metadata"]
            api.request("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                        {"gracePeriodSeconds": 0})
        deadline = time.monotonic() + timeout
        while self.pods() and time.monotonic() < deadline:
            time.sleep(0.5)
        api.delete("v1/nodes", None, self.name)

    def _remove_containers(self) -> None:
        tasks = self.ctr("tasks", "ls", "-q", timeout=30).stdout.split()
        for task in tasks:
            _run(str(self.bins["ctr"]), "--address", str(self.socket), "-n", NAMESPACE, "tasks",
                 "kill", "-s", "SIGKILL", task, check=False)
        for task in tasks:
            _run(str(self.bins["ctr"]), "--address", str(self.socket), "-n", NAMESPACE, "tasks",
                 "delete", "-f", task, check=False)
        for container in self.ctr("containers", "ls", "-q", timeout=30).stdout.split():
            _run(str(self.bins["ctr"]), "--address", str(self.socket), "-n", NAMESPACE,
                 "containers", "rm", container, check=False)

    def _unmount_all(self) -> None:
        """Mounts under the node's folder (netns bind mounts, overlay rootfs, kubelet's
        volume tmpfs), deepest first; a netns unmounted with no process in it is freed,
        its veth with it."""
        prefix = str(self.root) + "/"
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        for point in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
            _run("umount", "-l", point, check=False)

    def _remove_cgroups(self) -> None:
        if cgroup_version() == 2:
            bases = [Path("/sys/fs/cgroup/kubepods"), Path("/sys/fs/cgroup/kubepods.slice")]
        else:
            bases = [p / name for p in Path("/sys/fs/cgroup").iterdir() if p.is_dir()
                     for name in ("kubepods", "kubepods.slice")]
        for base in bases:
            if not base.is_dir():
                continue
            for dirpath, _, _ in sorted(os.walk(base), key=lambda w: len(w[0]), reverse=True):
                with contextlib.suppress(OSError):
                    os.rmdir(dirpath)

    def __enter__(self) -> RealNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
