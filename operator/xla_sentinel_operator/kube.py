"""A small async Kubernetes API client on aiohttp, built from kopf's login credentials, so
the operator's own calls (Jobs, Secrets, BugSignatures) share kopf's connection settings.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, cast, overload
from urllib.parse import quote

import aiohttp
import kopf
import yaml

MERGE_PATCH = "application/merge-patch+json"
# A body type of bodies.py. The API's JSON is not checked against it (kopf's Body is not
# either): the CRDs' schemas and the API server decide what an object holds.
T = TypeVar("T")
Body = TypeVar("Body", bound=Mapping[str, object])


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None,
         subresource: str | None = None) -> str:
    """The URL path of a collection or an object: core `v1` or `group/version`."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{quote(namespace)}"
    base += f"/{plural}"
    if name:
        base += f"/{quote(name)}"
    if subresource:
        base += f"/{subresource}"
    return base


def connection_from_kubeconfig(kubeconfig: str | Path) -> kopf.ConnectionInfo:
    """The current context of one kubeconfig file as kopf's connection info: server, CA,
    and a bearer token or a client certificate (paths relative to the file, as kubectl
    resolves them). kopf's own login reads only $KUBECONFIG or ~/.kube/config."""
    file = Path(kubeconfig)
    try:
        config = yaml.safe_load(file.read_text()) or {}
        context_name = config.get("current-context")
        context = _named(config, "contexts", context_name)["context"]
        cluster = _named(config, "clusters", context["cluster"])["cluster"]
        user = _named(config, "users", context["user"]).get("user") or {}
    except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
        raise kopf.LoginError(f"{file}: not a usable kubeconfig ({e})") from None

    def local(key: str) -> str | None:
        value = cluster.get(key) if key == "certificate-authority" else user.get(key)
        return str(file.parent / value) if value else None

    return kopf.ConnectionInfo(
        server=cluster["server"], ca_path=local("certificate-authority"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        token=user.get("token"), certificate_path=local("client-certificate"),
        private_key_path=local("client-key"), default_namespace=context.get("namespace"))


SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_TOKEN = SERVICE_ACCOUNT_DIR / "token"


class TokenFile:
    """A projected service-account token. The kubelet rewrites the file before the token
    expires (about hourly), so it is read again whenever its mtime moves, or on demand
    after the API server answered 401."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime: int | None = None
        self._token = ""

    def token(self, *, reread: bool = False) -> str:
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError:
            return self._token  # mid-rotation: the last token is still the best one
        if reread or mtime != self._mtime:
            self._token = self.path.read_text().strip()
            self._mtime = mtime
        return self._token


def connection_in_cluster(env: Mapping[str, str], account: Path = SERVICE_ACCOUNT_DIR
                          ) -> kopf.ConnectionInfo | None:
    """The pod's service account, reaching the API at $KUBERNETES_SERVICE_HOST:PORT as
    client-go's in-cluster config does. kopf's own login dials kubernetes.default.svc, a DNS
    name: on a cluster whose DNS is not up (or not reachable from the operator) it never
    starts. None outside a pod."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token_file = account / "token"
    if not host or not port or not token_file.exists():
        return None
    ca, ns = account / "ca.crt", account / "namespace"
    # An IPv6 service address needs brackets in a URL.
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return kopf.ConnectionInfo(
        server=server, ca_path=str(ca) if ca.exists() else None,
        token=token_file.read_text().strip() or None,
        default_namespace=(ns.read_text().strip() or None) if ns.exists() else None)


def _named(config: dict[str, Any], section: str, name: str | None) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    raise KeyError(f"no {section[:-1]} named {name!r}")


def _ssl_context(info: kopf.ConnectionInfo) -> ssl.SSLContext | bool:
    if not info.server.startswith("https"):
        return False
    if info.insecure:
        return False
    ctx = ssl.create_default_context(
        cafile=str(info.ca_path) if info.ca_path else None,
        cadata=info.ca_data.decode() if isinstance(info.ca_data, bytes) else info.ca_data)
    if info.certificate_path and info.private_key_path:
        ctx.load_cert_chain(str(info.certificate_path), str(info.private_key_path))
    return ctx


class Kube:
    """JSON in, JSON out; non-2xx answers raise ApiError with the server's message."""

    def __init__(self, info: kopf.ConnectionInfo, token_file: Path | None = None) -> None:
        """`token_file`: where info.token came from, read again as it rotates."""
        self.server = info.server.rstrip("/")
        self._ssl = _ssl_context(info)
        self._scheme = info.scheme or "Bearer"
        self._token = info.token
        self._token_file = TokenFile(token_file) if token_file else None
        self._session: aiohttp.ClientSession | None = None

    def auth_headers(self, *, reread: bool = False) -> dict[str, str]:
        token = self._token_file.token(reread=reread) if self._token_file else self._token
        return {"Authorization": f"{self._scheme} {token}"} if token else {}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, url_path: str, *, body: Mapping[str, object] | None = None,
                      params: dict[str, str] | None = None,
                      content_type: str = "application/json") -> dict[str, Any]:
        status, data = await self._send(method, url_path, body, params, content_type)
        if status == 401 and self._token_file:
            # The token rotated between the stat and the request: once more, read afresh.
            status, data = await self._send(method, url_path, body, params, content_type,
                                            reread=True)
        if status >= 400:
            message = data.get("message") if isinstance(data, dict) else str(data)
            raise ApiError(status, str(message))
        return data if isinstance(data, dict) else {}

    async def _send(self, method: str, url_path: str, body: Mapping[str, object] | None,
                    params: dict[str, str] | None, content_type: str, *,
                    reread: bool = False) -> tuple[int, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(headers={"User-Agent": "xla-sentinel-operator"},
                                                  timeout=aiohttp.ClientTimeout(total=30))
        headers = self.auth_headers(reread=reread)
        if body is not None:
            headers["Content-Type"] = content_type
        async with self._session.request(method, self.server + url_path, json=body,
                                         params=params, headers=headers, ssl=self._ssl) as resp:
            try:
                data = await resp.json(content_type=None)
            except ValueError:
                data = {"message": (await resp.text())[:500]}
            return resp.status, data

    async def get(self, url_path: str, shape: type[T]) -> T | None:
        """The object as `shape` (a body type of bodies.py), or None when it does not exist."""
        try:
            return cast(T, await self.request("GET", url_path))
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    async def list(self, url_path: str, shape: type[T],
                   labels: dict[str, str] | None = None) -> list[T]:
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())} if labels else None
        data = await self.request("GET", url_path, params=params)
        return cast(list[T], list(data.get("items") or []))

    async def create(self, url_path: str, body: Body) -> tuple[Body, bool]:
        """Create; (object, True), or (the existing object, False) when the name is taken."""
        try:
            return cast(Body, await self.request("POST", url_path, body=body)), True
        except ApiError as e:
            if e.status != 409:
                raise
        metadata = body["metadata"]
        name = str(metadata["name"]) if isinstance(metadata, Mapping) else ""
        existing = await self.get(f"{url_path}/{quote(name)}", type(body))
        if existing is None:
            raise ApiError(409, f"{name} exists but cannot be read")
        return existing, False

    @overload
    async def patch(self, url_path: str, body: Mapping[str, object]) -> dict[str, Any]: ...

    @overload
    async def patch(self, url_path: str, body: Mapping[str, object], shape: type[T]) -> T: ...

    async def patch(self, url_path: str, body: Mapping[str, object],
                    shape: type[T] | None = None) -> T | dict[str, Any]:
        """Merge-patch; the object after it, as `shape` when given."""
        return await self.request("PATCH", url_path, body=body, content_type=MERGE_PATCH)


    async def delete(self, url_path: str) -> bool:
        """Delete in the background (children go with it); False when already gone."""
        try:
            await self.request("DELETE", url_path, body={"kind": "DeleteOptions",
                                                         "apiVersion": "v1",
                                                         "propagationPolicy": "Background"})
            return True
        except ApiError as e:
            if e.status == 404:
                return False
            raise
