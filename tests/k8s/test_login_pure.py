"""The operator's in-cluster login: the API address from the service environment, as
client-go reads it, never a DNS name (kopf's own login dials kubernetes.default.svc, which
failed on the real node of tests/node before CoreDNS ran)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import kopf
from aiohttp import web
from aiohttp.test_utils import TestServer
from xla_sentinel_operator.kube import Kube, connection_in_cluster


def _account(tmp_path: Path, token: str = "tok\n") -> Path:
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "namespace").write_text("xla-sentinel\n")
    return tmp_path


def test_the_service_address_is_used_and_the_files_are_read(tmp_path: Path) -> None:
    info = connection_in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1",
                                  "KUBERNETES_SERVICE_PORT": "443"}, _account(tmp_path))
    assert info is not None
    assert info.server == "https://10.96.0.1:443"
    assert info.token == "tok"
    assert info.ca_path == str(tmp_path / "ca.crt")
    assert info.default_namespace == "xla-sentinel"


def test_an_ipv6_service_address_is_bracketed(tmp_path: Path) -> None:
    info = connection_in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1",
                                  "KUBERNETES_SERVICE_PORT": "6443"}, _account(tmp_path))
    assert info is not None and info.server == "https://[fd00::1]:6443"


def test_outside_a_pod_there_is_no_in_cluster_login(tmp_path: Path) -> None:
    assert connection_in_cluster({}, _account(tmp_path)) is None
    assert connection_in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1",
                                  "KUBERNETES_SERVICE_PORT": "443"}, tmp_path / "absent") is None


def _serve(tokens_seen: list[str], accepted: set[str]) -> Any:
    """An API server on localhost that records each request's token and answers 401 to
    any it no longer accepts."""
    async def handle(request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "")
        tokens_seen.append(token)
        if token not in accepted:
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response({"kind": "Namespace"})
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/fuzz", handle)
    return app


def _rotate(token_file: Path, token: str) -> None:
    """What the kubelet does: a new file content, a new mtime."""
    before = token_file.stat().st_mtime_ns
    token_file.write_text(token + "\n")
    os.utime(token_file, ns=(before + 10**9, before + 10**9))


def test_a_rotated_token_is_read_again_before_the_next_request(tmp_path: Path) -> None:
    seen: list[str] = []
    account = _account(tmp_path, "old\n")

    async def run() -> None:
        async with TestServer(_serve(seen, {"Bearer old", "Bearer new"})) as server:
            kube = Kube(kopf.ConnectionInfo(server=str(server.make_url(""))),
                        token_file=account / "token")
            await kube.request("GET", "/api/v1/namespaces/fuzz")
            _rotate(account / "token", "new")
            await kube.request("GET", "/api/v1/namespaces/fuzz")
            await kube.close()

    asyncio.run(run())
    assert seen == ["Bearer old", "Bearer new"]


def test_a_401_reads_the_token_file_again_and_retries_once(tmp_path: Path) -> None:
    seen: list[str] = []
    account = _account(tmp_path, "old\n")

    async def run() -> None:
        async with TestServer(_serve(seen, {"Bearer new"})) as server:
            kube = Kube(kopf.ConnectionInfo(server=str(server.make_url(""))),
                        token_file=account / "token")
            kube.auth_headers()  # the old token is read (and its mtime kept)
            # Rotated with the mtime unchanged (same clock tick): only the 401 tells.
            stat = (account / "token").stat()
            (account / "token").write_text("new\n")
            os.utime(account / "token", ns=(stat.st_atime_ns, stat.st_mtime_ns))
            assert await kube.request("GET", "/api/v1/namespaces/fuzz") == {"kind": "Namespace"}
            await kube.close()

    asyncio.run(run())
    assert seen == ["Bearer old", "Bearer new"]
