"""Fixtures: the extended kmock API server on a free loopback port, the real kopf operator
running in a thread against it over HTTP, and a webhook receiver."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import kmock
import pytest
from aiohttp import web
from xla_sentinel_operator import handlers
from xla_sentinel_operator.kube import Kube, path
from xla_sentinel_operator.main import operate

from .apiserver import ApiServer

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
NS = "fuzz"
API = "xlasentinel.dev/v1alpha1"


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    server = ApiServer(crd_dir=str(CRDS), namespaces={"default", NS})
    async with server, kmock.Server(server):
        yield server


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[Kube]:
    import kopf

    kube = Kube(kopf.ConnectionInfo(server=str(api.url)))
    yield kube
    await kube.close()


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

    Not a task of the test's loop: at exit kopf cancels every task started after it, which
    would include the API server's connection handlers."""

    def __init__(self, config: handlers.Config) -> None:
        self.config = config
        self.runtime = handlers.Runtime(config)
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
def operator_config(api: ApiServer) -> Callable[..., handlers.Config]:
    def make(**overrides: Any) -> handlers.Config:
        base = dict(namespaces=[NS], server=str(api.url), runner_image="runner:test",
                    rollup_interval=0.3, alert_retry_interval=0.5, alert_attempts=3,
                    alert_backoff=0.05, metrics_host="127.0.0.1", metrics_port=0,
                    peering_name="xla-sentinel", standalone=True)
        base.update(overrides)
        return handlers.Config(**base)
    return make


@pytest.fixture
async def start_operator(operator_config: Callable[..., handlers.Config]
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
    """A local Alertmanager-style webhook receiver; `fail_first` answers 503 that many times."""

    def __init__(self, fail_first: int = 0) -> None:
        self.posts: list[dict[str, Any]] = []
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
        app.router.add_post("/alerts", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/alerts"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


def campaign(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "FuzzCampaign",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


async def create(client: Kube, obj: dict[str, Any]) -> dict[str, Any]:
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural = {"FuzzCampaign": "fuzzcampaigns", "BugSignature": "bugsignatures",
              "Secret": "secrets", "ConfigMap": "configmaps"}[kind]
    created, _ = await client.create(path(api_version, plural, obj["metadata"].get("namespace", NS)), obj)
    return created

