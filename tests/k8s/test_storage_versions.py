"""A CRD version change on the real API server: objects stored at v1alpha1 keep v1alpha1 in
the CRD's status.storedVersions, so the API server refuses to drop v1alpha1; `migrate-storage`
rewrites every object (etcd then holds each one at v1beta1, read from etcd itself) and records
it, after which v1alpha1 can be removed. A test CRD of its own group, so the project's CRDs
the other tests use stay as they are."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.kit import Api
from xla_sentinel.cli.entry import main as entry
from xla_sentinel_operator.kube import Kube
from xla_sentinel_operator.storage_versions import migrate

from .conftest import eventually

GROUP, PLURAL = "migrate.test.xlasentinel.dev", "widgets"
CRD = f"{PLURAL}.{GROUP}"
CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}


def versions(*names: str, storage: str) -> list[dict[str, Any]]:
    return [{"name": n, "served": True, "storage": n == storage, "schema": SCHEMA}
            for n in names]


def stored_api_version(cp: ControlPlane, ns: str, name: str) -> str:
    """The apiVersion etcd holds the object at (custom resources are stored as JSON)."""
    key = f"/registry/{GROUP}/{PLURAL}/{ns}/{name}".encode()
    body = json.dumps({"key": base64.b64encode(key).decode()}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{cp.etcd_port}/v3/kv/range", data=body,
                                 method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        kvs = json.loads(r.read()).get("kvs") or []
    assert len(kvs) == 1, f"etcd holds no {key!r}"
    return str(json.loads(base64.b64decode(kvs[0]["value"]))["apiVersion"])


@pytest.fixture
def widgets(api: Api) -> Any:
    api.create(CRDS, None, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
                 "versions": versions("v1alpha1", storage="v1alpha1")}})
    yield
    api.delete(CRDS, None, CRD)


async def test_migrate_storage_lets_the_old_version_go(
        control_plane: ControlPlane, api: Api, ns: str, widgets: Any, client: Kube,
        capsys: pytest.CaptureFixture[str]) -> None:
    def established() -> bool:
        crd = api.get(CRDS, None, CRD) or {}
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    await eventually(established)
    old = f"{GROUP}/v1alpha1"
    await eventually(lambda: api.request("GET", f"/apis/{old}/namespaces/{ns}/{PLURAL}")[0] == 200)
    names = [f"w{i}" for i in range(7)]
    for n in names:
        api.create(f"{old}/{PLURAL}", ns, {"apiVersion": old, "kind": "Widget",
                                           "metadata": {"name": n}, "spec": {"size": len(n)}})

    # The new version becomes the storage version; what is in etcd stays at v1alpha1.
    api.patch(CRDS, None, CRD, {"spec": {"versions": versions("v1alpha1", "v1beta1",
                                                              storage="v1beta1")}})
    new = f"{GROUP}/v1beta1"
    await eventually(lambda: api.request("GET", f"/apis/{new}/namespaces/{ns}/{PLURAL}")[0] == 200)
    api.create(f"{new}/{PLURAL}", ns, {"apiVersion": new, "kind": "Widget",
                                       "metadata": {"name": "fresh"}, "spec": {}})
    assert (api.get(CRDS, None, CRD) or {})["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]
    assert {stored_api_version(control_plane, ns, n) for n in names} == {old}
    assert stored_api_version(control_plane, ns, "fresh") == new

    # Before the migration the API server will not drop a version objects are stored at.
    code, answer = api.request("PATCH", f"/apis/{CRDS}/{CRD}",
                               {"spec": {"versions": versions("v1beta1", storage="v1beta1")}},
                               "application/merge-patch+json")
    assert code == 422 and "storedVersions" in answer["message"], answer

    lines: list[str] = []
    m = await migrate(client, CRD, page=3, progress=lines.append)  # 3 pages of 3
    assert m is not None and m.stale == ("v1alpha1",) and m.storage == "v1beta1"
    assert {stored_api_version(control_plane, ns, n) for n in [*names, "fresh"]} == {new}
    assert (api.get(CRDS, None, CRD) or {})["status"]["storedVersions"] == ["v1beta1"]
    assert lines[-1] == f"{CRD}: 8 objects at v1beta1; storedVersions is now [v1beta1]"
    assert f"{CRD}: 3 rewritten" in lines and f"{CRD}: 6 rewritten" in lines

    api.patch(CRDS, None, CRD, {"spec": {"versions": versions("v1beta1", storage="v1beta1")}})
    assert [o["spec"] for o in api.all(f"{new}/{PLURAL}", ns)
            if o["metadata"]["name"] == "w3"] == [{"size": 2}]

    # Again, through the command (its own event loop, so in a thread): nothing left to do;
    # a CRD that does not exist is an error naming it.
    def command(crd: str) -> int:
        return entry(["operator", "migrate-storage", "--kubeconfig",
                      str(control_plane.kubeconfig_path), "--crd", crd])

    assert await asyncio.to_thread(command, CRD) == 0
    assert "every object is stored at the storage version already" in capsys.readouterr().out
    assert await asyncio.to_thread(command, "nosuch.example.dev") == 1
    assert "migrate-storage: nosuch.example.dev: HTTP 404" in capsys.readouterr().err
