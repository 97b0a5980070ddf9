"""kmock's Kubernetes emulator, extended where the operator needs real API server behaviour:
uid/resourceVersion/generation stamping, label selectors on lists and watches, the status
subresource (status writes touch only status, spec writes never status), merge and JSON
patches with resourceVersion preconditions, owner-reference garbage collection, `kind` in
lists, and admission by the CRDs in crds/ (defaults, schema, CEL) via crd_validation.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
import yaml
from kmock._internal import apps, dicts, enums, rendering
from xla_sentinel_operator import crd_validation

VERBS = {"list", "watch", "get", "create", "update", "patch", "delete"}
BUILTINS = {
    # resource: (kind, namespaced, has status subresource)
    "v1/configmaps": ("ConfigMap", True, False),
    "v1/secrets": ("Secret", True, False),
    "v1/events": ("Event", True, False),
    "v1/pods": ("Pod", True, True),
    "v1/namespaces": ("Namespace", False, True),
    "batch/v1/jobs": ("Job", True, True),
    "events.k8s.io/v1/events": ("Event", True, False),
    "coordination.k8s.io/v1/leases": ("Lease", True, False),
}
_REQUIREMENT = re.compile(
    r"^\s*(?P<neg>!)?(?P<key>[A-Za-z0-9./_-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9._-]*)|\s+(?P<setop>in|notin)\s*\((?P<set>[^)]*)\))?\s*$")


def parse_selector(text: str) -> list[tuple[str, str, set[str]]]:
    """A label selector as (key, op, values) requirements; op in =, !=, in, notin, exists, !."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for part in filter(str.strip, parts):
        m = _REQUIREMENT.match(part)
        if not m:
            raise kmock.KubernetesError(status=400, reason="BadRequest",
                                        message=f"unable to parse requirement: {part!r}")
        key = m["key"]
        if m["neg"]:
            out.append((key, "!", set()))
        elif m["op"]:
            out.append((key, "!=" if m["op"] == "!=" else "=", {m["value"]}))
        elif m["setop"]:
            out.append((key, m["setop"], {v.strip() for v in m["set"].split(",") if v.strip()}))
        else:
            out.append((key, "exists", set()))
    return out


def selected(labels: dict[str, str], requirements: list[tuple[str, str, set[str]]]) -> bool:
    for key, op, values in requirements:
        present, value = key in labels, labels.get(key)
        ok = {"=": present and value in values, "in": present and value in values,
              "!=": not present or value not in values, "notin": not present or value not in values,
              "exists": present, "!": not present}[op]
        if not ok:
            return False
    return True


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesEmulator):
    crd_dir: str | None = None
    namespaces: set[str] = attrs.field(factory=lambda: {"default"})
    _rv: int = attrs.field(default=0, init=False)
    _status_subresource: set[Any] = attrs.field(factory=set, init=False)
    _kinds: dict[Any, str] = attrs.field(factory=dict, init=False)
    # (HTTP method, plural) -> how many more such requests to answer with a 500.
    _failures: dict[tuple[str, str], int] = attrs.field(factory=dict, init=False)

    def fail(self, method: str, plural: str, times: int = 1) -> None:
        """Answer the next `times` METHOD requests on `plural` with HTTP 500 (an outage)."""
        self._failures[(method.upper(), plural)] = times

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for key, (kind, namespaced, status) in BUILTINS.items():
            self.declare(key, kind, namespaced=namespaced, status=status)
        if self.crd_dir:
            for path in sorted(Path(self.crd_dir).glob("*.yaml")):
                for doc in yaml.safe_load_all(path.read_text()):
                    if doc and doc.get("kind") == "CustomResourceDefinition":
                        spec = doc["spec"]
                        for v in spec["versions"]:
                            self.declare(f"{spec['group']}/{v['name']}/{spec['names']['plural']}",
                                         spec["names"]["kind"],
                                         namespaced=spec["scope"] == "Namespaced",
                                         status="status" in (v.get("subresources") or {}))

    def declare(self, key: str, kind: str, *, namespaced: bool, status: bool) -> None:
        res = kmock.resource(key)
        self.resources[res] = kmock.ResourceInfo(
            kind=kind, namespaced=namespaced, verbs=VERBS,
            subresources={"status"} if status else set())
        self._kinds[res] = kind
        if status:
            self._status_subresource.add(res)

    # Reading helpers for tests.
    def get(self, key: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        k = (kmock.resource(key), namespace, name)
        if k not in self._objects or self._objects[k].deleted:
            return None
        return copy.deepcopy(self._objects[k].raw)

    def all(self, key: str, namespace: str | None = None) -> list[dict[str, Any]]:
        res = kmock.resource(key)
        return [copy.deepcopy(o.raw) for (r, ns, _), o in self._objects.items()
                if r == res and not o.deleted and (namespace is None or ns == namespace)]

    # The request path.
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # kmock's path parser reads /api/v1/namespaces as "namespace <missing>" and fails;
        # kopf lists and watches namespaces when it serves a list of them.
        if raw_request.path.rstrip("/") == "/api/v1/namespaces":
            return await self._serve_namespaces(raw_request)
        return await super().__call__(raw_request)

    async def _serve_namespaces(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        names = self.namespaces | {ns for (_, ns, _) in self._objects if ns}
        if raw_request.query.get("watch") in ("true", "1"):
            response = aiohttp.web.StreamResponse()
            await response.prepare(raw_request)
            await asyncio.sleep(3600)  # namespaces never change here; hold the watch open
            return response
        return aiohttp.web.json_response({
            "apiVersion": "v1", "kind": "NamespaceList", "metadata": {"resourceVersion": str(self._rv)},
            "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                      for n in sorted(names)]})

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None or not request.resource.plural:  # discovery: kmock's
            return await apps.RawHandler._handle(self, request)
        key = (str(request.method.value), str(request.resource.plural))
        if self._failures.get(key):
            self._failures[key] -= 1
            return await self._render_error(kmock.KubernetesError(
                status=500, reason="InternalError", message="injected outage"))
        try:
            if request.action == enums.action.CREATE:
                return aiohttp.web.json_response(await self._create(request), status=201)
            if request.action == enums.action.UPDATE or (
                    request.method == enums.method.PUT and request.name):
                return aiohttp.web.json_response(await self._update(request))
            if request.action == enums.action.DELETE and request.name:
                return aiohttp.web.json_response(await self._delete(request))
            # Reads are served here too: kmock's reaction lookup scans every past request
            # per request (quadratic), which a benchmark of 10,000s of requests cannot afford.
            if request.action == enums.action.FETCH:
                return aiohttp.web.json_response(await self._serve_fetch(request))
            if request.action == enums.action.LIST:
                return aiohttp.web.json_response(await self._serve_list(request))
            if request.action == enums.action.WATCH:
                return await self._stream_watch(request)
        except kmock.KubernetesError as e:
            return await self._render_error(e)
        return await apps.RawHandler._handle(self, request)

    async def _stream_watch(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        try:
            async for event in self._serve_watch(request):
                if event != b"":
                    await response.write(json.dumps(event).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the client went away
        return response

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _admit(self, obj: dict[str, Any]) -> dict[str, Any]:
        if not self.crd_dir or crd_validation.schema_for(
                obj.get("apiVersion", ""), obj.get("kind", ""), self.crd_dir) is None:
            return obj
        errors = crd_validation.validate(obj, self.crd_dir)
        if errors:
            name = (obj.get("metadata") or {}).get("name")
            raise kmock.KubernetesError(
                status=422, reason="Invalid",
                message=f"{obj.get('kind')} {name!r} is invalid: " + "; ".join(errors))
        return crd_validation.defaulted(obj, self.crd_dir)

    async def _emit(self, res: Any, kind: str, obj: dict[str, Any]) -> None:
        await self._buses[res].put({"type": kind, "object": copy.deepcopy(obj)})

    def _store(self, key: Any, obj: dict[str, Any]) -> None:
        if key not in self._objects:
            self._objects[key] = obj
        else:
            self._objects[key].create(obj)
            # Keep only the newest versions: the history is not needed and costs memory.
            del self._objects[key].history[:-1]

    async def _create(self, request: rendering.Request) -> dict[str, Any]:
        res = request.resource
        body = copy.deepcopy(request.data) if isinstance(request.data, dict) else None
        if body is None:
            raise kmock.KubernetesError(status=400, reason="BadRequest", message="body must be an object")
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        ns = request.namespace or meta.get("namespace")
        key = (res, ns, meta.get("name"))
        body.setdefault("apiVersion", f"{res.group}/{res.version}".lstrip("/"))
        body.setdefault("kind", self._kinds.get(res, str(res.plural).capitalize()))
        async with self._lock:
            if key in self._objects and not self._objects[key].deleted:
                raise kmock.KubernetesError(status=409, reason="AlreadyExists",
                                            message=f"{res.plural} {meta.get('name')!r} already exists")
            body = self._admit(body)
            meta = body["metadata"]
            if ns:
                meta["namespace"] = ns
            meta.update(uid=str(uuid.uuid4()), resourceVersion=self._next_rv(), generation=1,
                        creationTimestamp=_now())
            meta.pop("deletionTimestamp", None)
            self._store(key, body)
            await self._emit(res, "ADDED", body)
        return body

    async def _update(self, request: rendering.Request) -> dict[str, Any]:
        res, key = request.resource, (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self._objects or self._objects[key].deleted:
                raise kmock.KubernetesObjectNotFoundError()
            old = copy.deepcopy(self._objects[key].raw)
            new = self._apply(request, old)
            if request.subresource == "status":
                new = {**old, "status": new.get("status")} if new.get("status") is not None else \
                    {k: v for k, v in old.items() if k != "status"}
            elif res in self._status_subresource:
                new = {k: v for k, v in new.items() if k != "status"}
                if "status" in old:
                    new["status"] = old["status"]
            for field in ("uid", "creationTimestamp", "deletionTimestamp", "generation", "name",
                          "namespace", "resourceVersion"):
                if field in old["metadata"]:
                    new.setdefault("metadata", {})[field] = old["metadata"][field]
                else:
                    new.setdefault("metadata", {}).pop(field, None)
            if new == old:
                return old  # a no-op write keeps the resourceVersion, as in the API server
            new = self._admit(new)
            spec_of = lambda o: {k: v for k, v in o.items() if k not in ("metadata", "status")}  # noqa: E731
            if spec_of(new) != spec_of(old):
                new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
            new["metadata"]["resourceVersion"] = self._next_rv()
            if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
                await self._finalize(key, new)
                return new
            self._store(key, new)
            await self._emit(res, "MODIFIED", new)
            return new

    def _apply(self, request: rendering.Request, old: dict[str, Any]) -> dict[str, Any]:
        data = request.data
        ctype = request.headers.get("Content-Type", "")
        if request.method == enums.method.PUT:
            if not isinstance(data, dict):
                raise kmock.KubernetesError(status=400, reason="BadRequest", message="body must be an object")
            self._precondition(data, old)
            return copy.deepcopy(data)
        if "json-patch" in ctype or isinstance(data, list):
            try:
                return jsonpatch.apply_patch(old, data, in_place=False)
            except jsonpatch.JsonPatchTestFailed as e:
                raise kmock.KubernetesError(status=422, reason="Invalid", message=f"test failed: {e}") from None
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                raise kmock.KubernetesError(status=422, reason="Invalid", message=str(e)) from None
        if not isinstance(data, dict):
            raise kmock.KubernetesError(status=400, reason="BadRequest", message="patch must be an object")
        self._precondition(data, old)
        try:
            return dict(dicts.merge_patch_dict(old, data))
        except ValueError as e:
            raise kmock.KubernetesError(status=422, reason="Invalid", message=str(e)) from None

    @staticmethod
    def _precondition(data: dict[str, Any], old: dict[str, Any]) -> None:
        want = (data.get("metadata") or {}).get("resourceVersion")
        if want and want != old["metadata"].get("resourceVersion"):
            raise kmock.KubernetesError(
                status=409, reason="Conflict",
                message="the object has been modified; please apply your changes to the latest version")

    async def _delete(self, request: rendering.Request) -> dict[str, Any]:
        key = (request.resource, request.namespace, request.name)
        options = request.data if isinstance(request.data, dict) else {}
        orphan = options.get("propagationPolicy") == "Orphan" or request.params.get("propagationPolicy") == "Orphan"
        async with self._lock:
            if key not in self._objects or self._objects[key].deleted:
                raise kmock.KubernetesObjectNotFoundError()
            return await self._delete_locked(key, orphan=orphan)

    async def _delete_locked(self, key: Any, *, orphan: bool = False) -> dict[str, Any]:
        obj = copy.deepcopy(self._objects[key].raw)
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return obj
        if meta.get("finalizers"):
            meta["deletionTimestamp"] = _now()
            meta["resourceVersion"] = self._next_rv()
            self._store(key, obj)
            await self._emit(key[0], "MODIFIED", obj)
            return obj
        await self._finalize(key, obj, orphan=orphan)
        return obj

    async def _finalize(self, key: Any, obj: dict[str, Any], *, orphan: bool = False) -> None:
        """Remove the object for good, then collect what it owned (background cascade)."""
        self._store(key, obj)
        self._objects[key].delete()
        await self._emit(key[0], "DELETED", obj)
        if orphan:
            return
        uid = obj["metadata"].get("uid")
        owned = [k for k, o in list(self._objects.items()) if not o.deleted
                 and any(ref.get("uid") == uid for ref in o.raw.get("metadata", {}).get("ownerReferences") or [])]
        for child in owned:
            if not self._objects[child].deleted:
                await self._delete_locked(child)

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        # kmock names the core group "/v1"; clients (kubectl) only map "v1".
        payload = await super()._serve_version(request)
        payload["groupVersion"] = payload["groupVersion"].lstrip("/")
        return payload

    # Reads.
    def _matching(self, request: rendering.Request) -> list[dict[str, Any]]:
        requirements = parse_selector(request.params.get("labelSelector", ""))
        return [o.raw for (r, ns, _), o in self._objects.items()
                if r == request.resource and not o.deleted
                and (request.namespace is None or ns == request.namespace)
                and selected(o.raw.get("metadata", {}).get("labels") or {}, requirements)]

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self._objects or self._objects[key].deleted:
                raise kmock.KubernetesObjectNotFoundError()
            return copy.deepcopy(self._objects[key].raw)

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        res = request.resource
        if res not in set(self._get_resources()):
            raise kmock.KubernetesResourceNotFoundError()
        async with self._lock:
            items = copy.deepcopy(self._matching(request))
            rv = str(self._rv)
        return {"apiVersion": f"{res.group}/{res.version}".lstrip("/"),
                "kind": f"{self._kinds.get(res, str(res.plural).capitalize())}List",
                "metadata": {"resourceVersion": rv}, "items": items}

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""
        res = request.resource
        requirements = parse_selector(request.params.get("labelSelector", ""))
        since = int(request.params.get("resourceVersion") or 0) if \
            (request.params.get("resourceVersion") or "0").isdigit() else 0
        async with self._lock:
            mark = await self._buses[res].mark()
            # Objects changed after the client's list (resourceVersion) are replayed; with no
            # resourceVersion, everything is (as ADDED), like a fresh watch.
            events = [{"type": "ADDED", "object": copy.deepcopy(o)} for o in self._matching(request)
                      if int(o["metadata"].get("resourceVersion", 0)) > since]
        for event in events:
            yield event
        async for event in self._buses[res].stream(since=mark):
            meta = event["object"].get("metadata", {})
            if request.namespace is not None and meta.get("namespace") != request.namespace:
                continue
            if int(meta.get("resourceVersion") or 0) <= since:
                continue
            if selected(meta.get("labels") or {}, requirements):
                yield event


def request_counts(server: ApiServer) -> dict[str, int]:
    """Requests served so far, by HTTP method (for benchmarks)."""
    counts: dict[str, int] = {}
    for r in server._requests:
        counts[str(r.method.value)] = counts.get(str(r.method.value), 0) + 1
    return counts


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, default=str)
