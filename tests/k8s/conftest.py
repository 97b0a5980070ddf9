"""Fixtures: a real control plane (etcd, kube-apiserver, kube-controller-manager; one per
pytest-xdist worker, shared by its tests), a fresh namespace per test with the chart's RBAC
applied by kubectl from `helm template`, the real kopf operator running in a thread as the
chart's operator ServiceAccount, and a webhook receiver.

Nothing here emulates the API: reads and writes go to kube-apiserver over TLS; the Job and
garbage-collector controllers are the real ones. No scheduler or kubelet runs, so pods stay
Pending unless a test starts the fake node of `kubelet.py` or takes kwok's node pools
(`slice_pools`: kwok and the real kube-scheduler).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from controlplane import kwok
from controlplane.cluster import ControlPlane
from controlplane.jobset import JobSetController
from controlplane.kit import (
    NOT_APPLIED,
    OPERATOR_SA,
    RELEASE_NS,
    Api,
    apply,
    chart_operator_flags,
    helm_template,
    kubectl,
)
from controlplane.kubelet import FakeNode
from controlplane.kwok import Kwok, tpu_pool
from tools import REPO_ROOT
from xla_sentinel_operator.config import (
    AlertingConfig,
    Config,
    JobsConfig,
    MetricsConfig,
    PeeringConfig,
)
from xla_sentinel_operator.kube import Kube, connection_from_kubeconfig, path
from xla_sentinel_operator.main import operate
from xla_sentinel_operator.runtime import Runtime

ROOT = REPO_ROOT
CRDS = ROOT / "crds"
API = "xlasentinel.dev/v1alpha1"


ALERT_SECRET = "alert-hook"
REPORT_POLICY = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
WORKER_SA = chart_operator_flags()["--service-account"]  # worker pods run as the chart's
RUNNER = [str(ROOT / ".venv" / "bin" / "xla-sentinel")]  # what the runner image stands for


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(tmp_path_factory.mktemp("controlplane")).start()
    try:
        kubectl(cp, "create", "namespace", RELEASE_NS)
        # The chart's CRDs and cluster-scoped objects, once: as `helm install` would.
        base = [o for o in helm_template() if o["kind"] == "CustomResourceDefinition"
                or (o["kind"] == "ServiceAccount" and o["metadata"].get("name") == OPERATOR_SA)]
        apply(cp, base)
        for crd in (o["metadata"]["name"] for o in base if o["kind"] == "CustomResourceDefinition"):
            done = kubectl(cp, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
            assert done.returncode == 0, done.stderr
        # The garbage collector must know the CRDs, as in a cluster where they were installed
        # long before: it removes a deleted campaign's Jobs and reports with no operator.
        cp.restart_controller_manager()
        garbage_collected(Api(cp))
        yield cp
    finally:
        cp.stop()


def garbage_collected(api: Api, timeout: float = 60) -> None:
    """Wait until the garbage collector removes the dependent of a deleted FuzzCampaign."""
    owner = api.create(f"{API}/fuzzcampaigns", RELEASE_NS, {
        "apiVersion": API, "kind": "FuzzCampaign", "metadata": {"name": "gc-probe"},
        "spec": {"suspend": True}})
    api.create("v1/configmaps", RELEASE_NS, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gc-probe", "ownerReferences": [
            {"apiVersion": API, "kind": "FuzzCampaign", "name": "gc-probe",
             "uid": owner["metadata"]["uid"]}]}})
    api.delete(f"{API}/fuzzcampaigns", RELEASE_NS, "gc-probe")
    deadline = time.monotonic() + timeout
    while api.get("v1/configmaps", RELEASE_NS, "gc-probe") is not None:
        assert time.monotonic() < deadline, "the garbage collector does not collect CRD dependents"
        time.sleep(0.2)


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> Api:
    return Api(control_plane)


@pytest.fixture
def ns(control_plane: ControlPlane, api: Api) -> Iterator[str]:
    """A fresh namespace holding what the chart renders for it (Roles, bindings, the worker
    ServiceAccount, the peering object) when the operator is told to watch it."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    api.create("v1/namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": name}})
    # As a user installs it for campaigns that alert through a Secret named alert-hook.
    # Not the WorkerReport admission policy: the test workers and the fake node log in with
    # tokens bound to no pod, which it refuses; test_report_binding.py applies and tests it.
    objs = [o for o in helm_template(f"operator.watchNamespaces={{{name}}}",
                                     f"alerts.extraSecretNames={{{ALERT_SECRET}}}")
            if o["kind"] not in NOT_APPLIED and o["kind"] != "CustomResourceDefinition"
            and o["kind"] not in REPORT_POLICY]
    apply(control_plane, objs)
    yield name
    # Nothing of the operator's holds it up (no finalizers: test_deletion.py).
    api.delete("v1/namespaces", None, name)



@pytest.fixture
def jobset(control_plane: ControlPlane, ns: str) -> Iterator[JobSetController]:
    """JobSet's real controller and webhooks (tests/controlplane/jobset.py), for `ns`."""
    controller = JobSetController(control_plane, [ns]).start()
    yield controller
    controller.stop()


@pytest.fixture
def slice_pools(control_plane: ControlPlane, ns: str) -> Iterator[dict[str, list[str]]]:
    """Two GKE TPU v6e 4x4 node pools, `<ns>-pool-a` and `<ns>-pool-b`, that kwok runs with
    the real kube-scheduler placing pods (tests/controlplane/kwok.py): 4 VMs of 4 chips each
    (ct6e-standard-4t), so one 4-host slice fills a pool. Each pool's node names by its name
    (the nodes' cloud.google.com/gke-nodepool). For JobSet's multi-host slices, beside the
    `jobset` fixture."""
    if not kwok.built():
        pytest.skip("kwok not built: run `make kwok`")
    with Kwok(control_plane, name=f"kwok-{ns}") as k:
        yield {pool.name: k.add_pool(pool) for pool in (
            tpu_pool(f"{ns}-pool-{x}", 4, "tpu-v6e-slice", "4x4", 4, "ct6e-standard-4t") for x in "ab")}


@pytest.fixture
def worker_kubeconfig(control_plane: ControlPlane, api: Api, ns: str) -> Path:
    """A worker pod's identity: the chart's worker ServiceAccount and its RBAC."""
    return as_service_account(control_plane, api, ns, WORKER_SA)


@pytest.fixture
def node(api: Api, ns: str) -> Iterator[Callable[..., FakeNode]]:
    """Start the fake node for this test's namespace: `node(images={...}, labels={...})`;
    the runner image of the operator's test config runs this checkout's engine."""
    started: list[FakeNode] = []

    def start(images: dict[str, list[str]] | None = None, **kwargs: Any) -> FakeNode:
        n = FakeNode(api, images={"runner:test": RUNNER, **(images or {})},
                     name=f"node-{ns}", namespace=ns, host_paths=[ROOT], **kwargs).start()
        started.append(n)
        return n

    yield start
    for n in started:
        n.stop()
        api.delete("v1/nodes", None, n.name)


@pytest.fixture
async def client(control_plane: ControlPlane) -> AsyncIterator[Kube]:
    kube = Kube(connection_from_kubeconfig(control_plane.kubeconfig_path))
    yield kube
    await kube.close()


def as_service_account(cp: ControlPlane, api: Api, ns: str, sa: str) -> Path:
    """A kubeconfig that authenticates as a ServiceAccount by a bound token."""
    return cp.write_kubeconfig(f"system:serviceaccount:{ns}:{sa}", token=api.token(ns, sa),
                               namespace=ns)


async def eventually(check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Poll an (async or sync) check until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        last = check()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")
        await asyncio.sleep(interval)


class RunningOperator:
    """One kopf operator (own registry, runtime and event loop) in a thread, as in a pod.

    Not a task of the test's loop: at exit kopf cancels every task started after it."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.runtime = Runtime(config)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def _main(self, ready: threading.Event) -> None:
        try:
            asyncio.run(operate(self.config, stop_flag=self._stop, ready_flag=ready,
                                runtime=self.runtime))
        except asyncio.CancelledError:
            pass  # kopf ends its own task as cancelled after a stop request: a clean exit
        except BaseException as e:  # surfaced by stop()
            self.error = e

    async def start(self) -> RunningOperator:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(ready,), daemon=True)
        self._thread.start()
        assert await asyncio.to_thread(ready.wait, 60), "the operator did not start within 60s"
        return self

    async def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 30)
        alive, self._thread = self._thread.is_alive(), None
        assert not alive, "the operator did not stop within 30s"
        if self.error is not None:
            raise self.error


@pytest.fixture
def operator_kubeconfig(control_plane: ControlPlane, api: Api) -> Path:
    """The chart's operator ServiceAccount: the operator has exactly the chart's RBAC."""
    return as_service_account(control_plane, api, RELEASE_NS, OPERATOR_SA)


def make_operator_config(ns: str, kubeconfig: Path, **overrides: Any) -> Config:
    """The Config of a test operator watching `ns` as `kubeconfig`; a group's override is a
    dict of the fields it changes, e.g. `peering={"standalone": False}`."""
    groups = {"jobs": JobsConfig(runner_image="runner:test", service_account=WORKER_SA),
              # Re-sends of open alerts only where a test asks (test_alert_resend.py):
              # elsewhere a test counts the alerts each change sends.
              "alerting": AlertingConfig(retry_interval=0.5, resend_interval=3600,
                                         attempts=3, backoff=0.05),
              "metrics": MetricsConfig(host="127.0.0.1", port=0),
              "peering": PeeringConfig(name="xla-sentinel", standalone=True)}
    for name, group in groups.items():
        groups[name] = dataclasses.replace(group, **overrides.pop(name, {}))
    base: dict[str, Any] = dict(namespaces=[ns], kubeconfig=str(kubeconfig), rollup_interval=0.3)
    base.update(overrides)
    return Config(**base, **groups)


@pytest.fixture
def operator_config(ns: str, operator_kubeconfig: Path) -> Callable[..., Config]:
    """make_operator_config(**overrides) for this test's namespace and operator identity."""
    return functools.partial(make_operator_config, ns, operator_kubeconfig)


@pytest.fixture
async def start_operator(operator_config: Callable[..., Config]
                         ) -> AsyncIterator[Callable[..., Any]]:
    running: list[RunningOperator] = []

    async def start(**overrides: Any) -> RunningOperator:
        op = await RunningOperator(operator_config(**overrides)).start()
        running.append(op)
        return op

    yield start
    for op in running:
        await op.stop()


class Receiver:
    """A local webhook receiver; `fail_first` answers 503 that many times."""

    def __init__(self, fail_first: int = 0) -> None:
        self.posts: list[Any] = []
        self.attempts = 0
        self.fail_first = fail_first
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.attempts += 1
        if self.attempts <= self.fail_first:
            return web.Response(status=503, text="try later")
        self.posts.append(await request.json())
        return web.json_response({"status": "success"})

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/api/v2/alerts", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/api/v2/alerts"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


def campaign(ns: str, name: str = "nightly", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "FuzzCampaign",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


async def create(client: Kube, obj: dict[str, Any]) -> dict[str, Any]:
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural = {"FuzzCampaign": "fuzzcampaigns", "BugSignature": "bugsignatures",
              "Secret": "secrets", "ConfigMap": "configmaps"}[kind]
    created, _ = await client.create(path(api_version, plural, obj["metadata"]["namespace"]), obj)
    return created
