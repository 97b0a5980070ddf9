"""Storage-version migration of the project's CRDs (`xla-sentinel operator migrate-storage`).

A CRD version that objects were once stored at stays in the CRD's `status.storedVersions`
until someone says every object has been rewritten at the current storage version; until
then the API server refuses to drop that version from `spec.versions`, and etcd may still
hold objects encoded at it. Moving the CRDs from v1alpha1 to a later version therefore
takes four steps (docs/deploy.md, "CRD versions"): serve the new version beside the old,
make it the storage version, run this migration, then stop serving and remove the old one.

The migration is what kube-storage-version-migrator does for one resource: read every
object and write it back unchanged. The API server encodes the write at the current storage
version, and because those bytes differ from what etcd holds (the old apiVersion), the write
is not skipped as a no-op. Then `status.storedVersions` is set to the storage version alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .kube import ApiError, Kube, connection_from_kubeconfig, connection_in_cluster, path

CRD_API = "apiextensions.k8s.io/v1"
# The project's own CRDs (crds/): the kinds whose storage version the project changes.
PROJECT_CRDS = ("fuzzcampaigns.xlasentinel.dev", "bugsignatures.xlasentinel.dev",
                "workerreports.xlasentinel.dev")
PAGE = 500  # objects per list call: a month of WorkerReports is thousands of objects


class MigrationError(RuntimeError):
    """The CRD cannot be migrated as it stands (no storage version, not established)."""


@dataclass(frozen=True)
class Migration:
    """What one CRD needs: rewrite every object at `storage`, then forget `stale`."""

    crd: str
    group: str
    plural: str
    storage: str
    stale: tuple[str, ...]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.storage}"


def plan(crd: Mapping[str, Any]) -> Migration | None:
    """The migration a CRD object needs, or None when every stored version is the storage
    version. Pure: reads `spec.versions` and `status.storedVersions` only."""
    name = str((crd.get("metadata") or {}).get("name") or "?")
    spec = crd.get("spec") or {}
    storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    if len(storage) != 1:
        raise MigrationError(f"{name}: {len(storage)} storage versions in spec.versions, "
                             "the API server allows exactly one")
    stored = list((crd.get("status") or {}).get("storedVersions") or [])
    stale = tuple(v for v in stored if v != storage[0])
    if not stale:
        return None
    return Migration(crd=name, group=str(spec.get("group")),
                     plural=str((spec.get("names") or {}).get("plural")),
                     storage=storage[0], stale=stale)


async def rewrite_all(api: Kube, m: Migration, *, page: int = PAGE,
                      progress: Callable[[int], None] | None = None) -> int:
    """Write every object of the resource back as read; the number rewritten. An object
    changed (409) or deleted (404) since it was listed needs nothing: whoever changed it
    wrote it at the storage version, and a deleted one is not stored at all."""
    collection = path(m.api_version, m.plural)  # all namespaces
    done, token = 0, ""
    while True:
        params = {"limit": str(page)} | ({"continue": token} if token else {})
        try:
            data = await api.request("GET", collection, params=params)
        except ApiError as e:
            if e.status != 410:
                raise
            # The continue token expired (etcd compacted past it): start over; rewriting an
            # object twice is harmless.
            token = ""
            continue
        for obj in data.get("items") or []:
            meta = obj.get("metadata") or {}
            url = path(m.api_version, m.plural, meta.get("namespace"), meta["name"])
            obj.setdefault("apiVersion", m.api_version)
            try:
                await api.request("PUT", url, body=obj)
            except ApiError as e:
                if e.status not in (404, 409):
                    raise
            done += 1
        if progress is not None:
            progress(done)
        token = str((data.get("metadata") or {}).get("continue") or "")
        if not token:
            return done


async def migrate(api: Kube, crd_name: str, *, page: int = PAGE,
                  progress: Callable[[str], None] | None = None) -> Migration | None:
    """Migrate one CRD's objects to its storage version and record that in its status;
    None when nothing was stored at another version. Safe to run again at any point: an
    interrupted run leaves storedVersions as it was, and the next run rewrites from the start."""
    crd = await api.request("GET", path(CRD_API, "customresourcedefinitions", name=crd_name))
    m = plan(crd)
    if m is None:
        return None
    say = progress or (lambda _line: None)
    say(f"{m.crd}: rewriting every object at {m.storage} (stored also at {', '.join(m.stale)})")
    n = await rewrite_all(api, m, page=page, progress=lambda k: say(f"{m.crd}: {k} rewritten"))
    # storedVersions is a list: a merge patch replaces it whole.
    await api.request("PATCH", path(CRD_API, "customresourcedefinitions", name=crd_name,
                                    subresource="status"),
                      body={"status": {"storedVersions": [m.storage]}},
                      content_type="application/merge-patch+json")
    say(f"{m.crd}: {n} objects at {m.storage}; storedVersions is now [{m.storage}]")
    return m


def run(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="xla-sentinel operator migrate-storage",
        description="Rewrite every object of the project's CRDs at their current storage "
                    "version and drop the older versions from status.storedVersions (a step "
                    "of a CRD version change: docs/deploy.md).")
    p.add_argument("--kubeconfig", default=None,
                   help="this kubeconfig's current context (default: in-cluster)")
    p.add_argument("--crd", action="append", default=[],
                   help=f"a CRD by name (repeatable; default: {', '.join(PROJECT_CRDS)})")
    args = p.parse_args(list(argv))

    info = (connection_from_kubeconfig(args.kubeconfig) if args.kubeconfig
            else connection_in_cluster(os.environ))
    if info is None:
        p.error("not in a pod: name a cluster with --kubeconfig")

    async def main() -> int:
        api = Kube(info)
        try:
            for name in args.crd or PROJECT_CRDS:
                try:
                    m = await migrate(api, name, progress=lambda line: print(line, flush=True))
                except (ApiError, MigrationError) as e:
                    print(f"migrate-storage: {name}: {e}", file=sys.stderr)
                    return 1
                if m is None:
                    print(f"{name}: every object is stored at the storage version already")
        finally:
            await api.close()
        return 0

    return asyncio.run(main())
