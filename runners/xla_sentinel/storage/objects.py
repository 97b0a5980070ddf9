"""Object storage for campaign output: `--out` and `artifacts.bucketURI` as gs://, s3:// or
a local path, through fsspec (docs/architecture.md, "Storage layout").

The engine always works in a local staging folder (SQLite needs a local file); a Mirror
syncs what it finishes there (finding folders with their repro bundles, summary.json, a
snapshot of the store) to the URI under the same relative keys. Each object under
findings/ is written once and verified; while the store is down or denied the Mirror keeps
the files locally, retries with backoff and says so (a log line, `status()`), and uploads
them when it answers. Readers (`triage`, `report`, `bisect`) fetch the same tree back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sqlite3
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from xla_sentinel.core.errors import UserError
from xla_sentinel.core.model import Signature
from xla_sentinel.core.program import save_summary

log = structlog.get_logger("xla_sentinel.storage.objects")

# The version of a finding folder's layout (finding.json's "format"). A reader refuses a
# newer one rather than misread it; bump it when a field changes meaning or moves.
FINDING_FORMAT = 1

# Replaced on each write (the campaign's state); everything under findings/ is written once.
REPLACEABLE = ("summary.json", "campaign.sqlite", "coverage.png")
_MANIFEST = ".storage/uploaded"  # keys verified in the store, one a line (staging-local)


class StorageError(UserError, RuntimeError):
    """A store that cannot be used or an object that cannot be read; the message names the
    URI and the reason."""


def is_uri(out: str) -> bool:
    """Whether `out` names object storage rather than a local folder (file:// is local)."""
    return "://" in out and not out.startswith("file://")


def local_path(out: str) -> Path:
    return Path(out.removeprefix("file://"))


def join(uri: str, *keys: str) -> str:
    return "/".join([uri.rstrip("/"), *(k.strip("/") for k in keys if k)])


def default_staging(uri: str) -> Path:
    """A stable local folder per URI, so a second run into the same URI resumes there."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", uri)[:80]
    digest = hashlib.sha256(uri.encode()).hexdigest()[:8]
    base = os.environ.get("XLA_SENTINEL_STAGING") or Path.home() / ".cache" / "xla-sentinel" / "staging"
    return Path(base) / f"{slug}-{digest}"


def describe(e: BaseException, bucket: str) -> str:
    """Why a store call failed, in words a person can act on."""
    name = type(e).__name__
    text = str(e).strip().splitlines()[0] if str(e).strip() else name
    if name == "DefaultCredentialsError":
        return (f"no Google credentials ({text}); on GKE give the pod's Kubernetes service "
                "account Workload Identity (docs/deploy.md), elsewhere run "
                "`gcloud auth application-default login`")
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return f"no AWS credentials ({text})"
    if isinstance(e, PermissionError) or text.startswith("Forbidden") or getattr(e, "code", None) in (401, 403):
        return f"access denied ({text}); grant roles/storage.objectUser on bucket {bucket!r}"
    if isinstance(e, FileNotFoundError):
        return f"bucket {bucket!r} not found (misspelled, or not created yet)"
    if isinstance(e, (ConnectionError, TimeoutError, OSError)) or "Connect" in name:
        return f"unreachable ({name}: {text})"
    return f"{name}: {text}"


def _md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


@dataclass
class ObjectStore:
    """One URI (a bucket and prefix, or a local folder) opened through fsspec.

    `patient=False` makes each call one HTTP attempt: the Mirror is then the retry layer
    (with its own backoff, and a condition it reports), instead of gcsfs retrying six
    times for half a minute in silence inside every call."""

    uri: str
    patient: bool = True

    def __post_init__(self) -> None:
        self.uri = self.uri.rstrip("/")
        self.protocol, _, rest = self.uri.partition("://") if is_uri(self.uri) else ("file", "", self.uri)
        self.root = rest if self.protocol != "file" else str(local_path(self.uri).resolve())
        self.bucket = self.root.split("/", 1)[0] if self.protocol != "file" else self.root
        if self.protocol != "file" and not self.bucket:
            raise StorageError(f"{self.uri}: no bucket in the URI (gs://BUCKET/PREFIX)")
        if self.protocol == "s3":
            try:
                import s3fs  # noqa: F401
            except ImportError:
                raise StorageError(f"{self.uri}: s3:// needs s3fs: pip install 'xla-sentinel[s3]'") from None
        elif self.protocol not in ("gs", "gcs", "file"):
            import fsspec

            if self.protocol not in fsspec.available_protocols():
                raise StorageError(f"{self.uri}: unknown storage protocol {self.protocol!r}")
        self._fs: Any = None

    def fs(self) -> Any:
        """The fsspec filesystem, made on first use: credentials are looked up here, so a
        store without them fails when used (and is retried), not when named."""
        if self._fs is None:
            self._fs = _filesystem(self.protocol, self.patient)
        return self._fs

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def key_uri(self, key: str) -> str:
        return join(self.uri, key)

    def error(self, e: BaseException, key: str = "") -> StorageError:
        return StorageError(f"{self.key_uri(key)}: {describe(e, self.bucket)}")

    def check(self) -> None:
        """Raise StorageError unless the bucket (or folder) answers and exists."""
        try:
            fs = self.fs()
            if self.protocol == "file":
                Path(self.root).mkdir(parents=True, exist_ok=True)
            else:
                # A listing (storage.objects.list), not a bucket lookup: the workers' role,
                # roles/storage.objectUser, has no storage.buckets.get. A missing bucket is a 404.
                fs.find(self.root, maxdepth=1)
        except StorageError:
            raise
        except Exception as e:
            raise self.error(e) from None

    def put(self, local: Path, key: str, *, replace: bool = False) -> str:
        """Upload `local` as `key`, verified: "uploaded", "present" (the same bytes were
        already there) or "kept" (other bytes are there and the key is write-once)."""
        data = local.read_bytes()
        path = self.path(key)
        try:
            fs = self.fs()
            if not replace and fs.exists(path):
                return "present" if self._matches(path, data) else "kept"
            if self.protocol == "file":
                fs.makedirs(str(Path(path).parent), exist_ok=True)
            fs.pipe_file(path, data)
            fs.invalidate_cache(path)
            if not self._matches(path, data):
                raise StorageError(f"{self.key_uri(key)}: stored object differs from {local} after upload")
        except StorageError:
            raise
        except Exception as e:
            raise self.error(e, key) from None
        return "uploaded"

    def _matches(self, path: str, data: bytes) -> bool:
        info = self.fs().info(path)
        if info.get("md5Hash"):  # GCS JSON API
            return bool(info["md5Hash"] == _md5_b64(data))
        etag = str(info.get("ETag") or "").strip('"')
        if re.fullmatch(r"[0-9a-f]{32}", etag):  # S3, single-part upload
            return etag == hashlib.md5(data).hexdigest()
        return int(info.get("size", -1)) == len(data) and bool(self.fs().cat_file(path) == data)

    def read(self, key: str) -> bytes:
        try:
            data: bytes = self.fs().cat_file(self.path(key))
            return data
        except FileNotFoundError:
            raise StorageError(f"{self.key_uri(key)}: no such object") from None
        except Exception as e:
            raise self.error(e, key) from None

    def find(self, pattern: str) -> list[str]:
        """Keys (relative to the URI) matching a glob pattern."""
        try:
            found = self.fs().glob(self.path(pattern))
        except Exception as e:
            raise self.error(e) from None
        prefix = self.root.rstrip("/") + "/"
        return sorted(str(p).removeprefix(prefix) for p in found)

    def download(self, key: str, dest: Path) -> list[Path]:
        """Every object under `key` ("" for the URI itself) into `dest`, same relative
        layout; the files written."""
        base = self.path(key).rstrip("/")
        try:
            found = self.fs().find(base)
        except Exception as e:
            raise self.error(e, key) from None
        written = []
        for path in found:
            sub = str(path).removeprefix(base).lstrip("/")
            if not sub:
                continue
            target = dest / sub
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.read("/".join(filter(None, (key, sub)))))
            written.append(target)
        if not written:
            raise StorageError(f"{self.key_uri(key)}: no objects under this prefix")
        return written


def _filesystem(protocol: str, patient: bool) -> Any:
    if protocol in ("gs", "gcs"):
        return _gcs(patient)
    import fsspec

    # skip_instance_cache: a store that restarts must not be talked to over a dead session.
    return fsspec.filesystem(protocol, skip_instance_cache=True)


def _gcs(patient: bool) -> Any:
    # gcsfs.core.GCSFileSystem, not the package's default ExtendedGcsFileSystem: that one
    # asks the storage-control gRPC API for every bucket's layout (hierarchical or not) on
    # each call, which the GCS JSON API emulator does not serve (a warning and a failed RPC
    # per call, never cached) and which a flat findings tree does not need.
    from gcsfs.core import GCSFileSystem

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        token: Any = "anon"
    else:
        # Application Default Credentials: Workload Identity on GKE, a gcloud login on a
        # laptop. Asked here so that "no credentials" is said as such, where gcsfs would fall
        # back to anonymous access and fail later with a bare 401.
        import google.auth

        token, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/devstorage.read_write"])
    cls = GCSFileSystem if patient else _OneTryGCS
    return cls(token=token, skip_instance_cache=True)


def _one_try_gcs() -> type:
    from gcsfs.core import GCSFileSystem

    request = getattr(GCSFileSystem._request, "__wrapped__", None)
    if request is None:  # a gcsfs without the retry decorator's wrapper: keep its retries
        plain: type = GCSFileSystem
        return plain
    once: Callable[..., Awaitable[Any]] = request

    class OneTry(GCSFileSystem):  # type: ignore[misc]  # gcsfs has no type hints
        async def _request(self, *args: Any, **kwargs: Any) -> Any:
            return await once(self, *args, **kwargs)

    return OneTry


class _LazyOneTry:
    """Builds the one-try GCS class on first use (gcsfs is imported only for gs://)."""

    _cls: type | None = None

    def __call__(self, **kwargs: Any) -> Any:
        if self._cls is None:
            self._cls = _one_try_gcs()
        return self._cls(**kwargs)


_OneTryGCS = _LazyOneTry()


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Mirror:
    """Syncs a local staging folder to an ObjectStore: what is submitted is uploaded once,
    verified and recorded in the staging folder's manifest; nothing is deleted locally."""

    def __init__(self, staging: Path, store: ObjectStore, *, backoff: tuple[float, float] = (1.0, 60.0),
                 on_change: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.staging = Path(staging)
        self.store = store
        self.backoff = backoff
        self.on_change = on_change
        self._cond = threading.Condition()
        self._pending: deque[tuple[str, str, bool]] = deque()  # key, staging file, replace
        self._queued: set[str] = set()
        self._busy = False
        self._closed = False
        self._error: str | None = None
        self._since: str | None = None
        self._attempts = 0
        self._kept: list[str] = []
        self._draining = False  # back after an outage, with what it kept still to send
        manifest = self.staging / _MANIFEST
        self._uploaded = set(manifest.read_text().split()) if manifest.exists() else set()
        self._thread = threading.Thread(target=self._loop, name="storage-mirror", daemon=True)

    def start(self) -> Mirror:
        """Check the store (a failure is reported, not raised: the campaign runs on) and
        queue what an earlier run left unuploaded."""
        try:
            self.store.check()
        except StorageError as e:
            self._fail(str(e))
        else:
            # Said once at start too: a listener may still show an earlier pod's outage.
            self._changed()
        findings = self.staging / "findings"
        for folder in sorted(findings.iterdir()) if findings.is_dir() else []:
            if (folder / "finding.json").exists():
                self.submit_tree(f"findings/{folder.name}")
        self._thread.start()
        return self

    def submit_tree(self, rel: str) -> None:
        """Queue every file under staging/rel that is not in the store yet."""
        root = self.staging / rel
        files = [p for p in sorted(root.rglob("*")) if p.is_file()] if root.is_dir() else [root]
        with self._cond:
            for p in files:
                key = p.relative_to(self.staging).as_posix()
                if key not in self._uploaded and key not in self._queued:
                    self._queued.add(key)
                    self._pending.append((key, key, False))
            self._cond.notify_all()

    def submit_file(self, key: str, rel: str | None = None) -> None:
        """Queue a replaceable object (summary.json, the store's snapshot) for upload from
        staging/rel (default: the key)."""
        with self._cond:
            self._pending.append((key, rel or key, True))
            self._cond.notify_all()

    def _loop(self) -> None:
        delay = self.backoff[0]
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                key, rel, replace = self._pending[0]
                self._busy = True
            try:
                outcome = self.store.put(self.staging / rel, key, replace=replace)
            except StorageError as e:
                with self._cond:
                    self._busy = False
                self._fail(str(e), retry_in=delay)
                with self._cond:
                    self._cond.wait_for(lambda: self._closed and not self._pending, timeout=delay)
                delay = min(delay * 2, self.backoff[1])
                continue
            except OSError as e:  # the staging file went (a re-bisected bundle): nothing to send
                outcome = f"skipped ({e.strerror})"
            delay = self.backoff[0]
            self._done(key, replace, outcome)

    def _done(self, key: str, replace: bool, outcome: str) -> None:
        recovered, drained = None, False
        with self._cond:
            if self._pending and self._pending[0][0] == key:  # close() may have emptied it
                self._pending.popleft()
            self._queued.discard(key)
            self._busy = False
            if not replace and outcome in ("uploaded", "present"):
                self._uploaded.add(key)
                manifest = self.staging / _MANIFEST
                manifest.parent.mkdir(parents=True, exist_ok=True)
                with manifest.open("a") as f:
                    f.write(key + "\n")
            if outcome == "kept":
                self._kept.append(key)
            if self._error is not None:
                recovered, self._error, self._since = self._error, None, None
                self._draining = True
            elif self._draining and not self._pending:
                drained, self._draining = True, False
            self._cond.notify_all()
        if outcome == "kept":
            log.warning("storage object kept", uri=self.store.key_uri(key),
                        reason="a different object is already stored under this write-once key")
        if recovered is not None:
            log.info("storage available again", uri=self.store.uri, pending=len(self._pending))
        if recovered is not None or drained:
            self._changed()

    def _fail(self, error: str, retry_in: float | None = None) -> None:
        with self._cond:
            first = self._error != error
            self._error = error
            self._since = self._since or now()
            self._attempts += 1
            pending = len(self._pending)
        if first:
            # One line per new condition, not per attempt: a store down for an hour would
            # otherwise fill the log.
            log.warning("storage unavailable", error=error, pending_objects=pending,
                        kept_in=str(self.staging), retry_in_s=retry_in)
        # Every attempt (at most one per backoff step) keeps a listener's pending count current.
        self._changed()

    def _changed(self) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change(self.status())
        except Exception as e:  # noqa: BLE001 - a listener that fails must not stop the uploads
            log.warning("storage listener failed", error=f"{type(e).__name__}: {e}")

    def status(self) -> dict[str, Any]:
        """The storage condition as summary.json and the worker's report carry it."""
        with self._cond:
            return {"uri": self.store.uri, "available": self._error is None, "error": self._error,
                    "since": self._since, "failed_attempts": self._attempts,
                    "pending_objects": len(self._pending),
                    "pending_findings": len({k.split("/")[1] for k, _, _ in self._pending
                                             if k.startswith("findings/")}),
                    "uploaded_objects": len(self._uploaded), "kept_objects": list(self._kept),
                    "staging": str(self.staging)}

    def flush(self, timeout: float) -> bool:
        """Wait until everything submitted is stored; False if the time ran out first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout=timeout)

    def close(self, timeout: float) -> bool:
        """Flush for up to `timeout` seconds and stop; whether everything was stored."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            if not done:
                self._pending.clear()  # what is left stays in staging, queued by the next start
            self._cond.notify_all()
        self._thread.join(timeout=5)
        return done

    def listen(self, inner: Any = None) -> MirroringReporter:
        """A campaign Reporter that queues each finished finding folder, then tells `inner`."""
        return MirroringReporter(self, inner)


class MirroringReporter:
    """The engine reports a finding once it is final (recorded and, if chosen, bisected with
    its bundle written): the moment its folder can be uploaded once."""

    def __init__(self, mirror: Mirror, inner: Any) -> None:
        self.mirror = mirror
        self.inner = inner

    def finding(self, record: dict[str, Any]) -> None:
        self.mirror.submit_tree(str(record["dir"]))
        if self.inner is not None:
            self.inner.finding(record)

    def progress(self, counters: dict[str, Any]) -> None:
        if self.inner is not None:
            self.inner.progress(counters)


def snapshot_store(staging: Path) -> Path | None:
    """A consistent copy of campaign.sqlite (the live one is in WAL mode) for upload."""
    db = staging / "campaign.sqlite"
    if not db.exists():
        return None
    copy = staging / ".storage" / "campaign.sqlite"
    copy.parent.mkdir(parents=True, exist_ok=True)
    src, dst = sqlite3.connect(db), sqlite3.connect(copy)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return copy


def finish(mirror: Mirror, summary: dict[str, Any], timeout: float) -> bool:
    """End of a run: wait up to `timeout` s for the store, then upload summary.json (it
    gains the storage condition and points at the stored bundles) and a snapshot of the
    store, and stop the Mirror. Whether everything reached the store."""
    if snapshot_store(mirror.staging) is not None:
        mirror.submit_file("campaign.sqlite", ".storage/campaign.sqlite")
    for sig in summary.get("signatures", []):
        if sig.get("repro") and not is_uri(sig["repro"]):
            sig["repro"] = mirror.store.key_uri(sig["repro"])
    stored = mirror.flush(timeout)
    summary["storage"] = mirror.status()

    save_summary(mirror.staging, summary)
    mirror.submit_file("summary.json")
    # A store that did not answer in `timeout` gets no second wait.
    return mirror.close(timeout if stored else 0.0) and stored


def check_format(record: dict[str, Any], where: str) -> None:
    """StorageError unless `record` is a finding this version can read."""
    if not isinstance(record, dict) or not {"id", "verdict", "signature"} <= record.keys():
        raise StorageError(f"{where}: corrupt finding (no id, verdict or signature)")
    fmt = record.get("format", 1)  # findings from before the version field are format 1
    if not isinstance(fmt, int) or fmt > FINDING_FORMAT:
        raise StorageError(f"{where}: finding format {fmt!r} is newer than this xla-sentinel "
                           f"reads ({FINDING_FORMAT}); upgrade xla-sentinel to read it")


def read_finding(store: ObjectStore, key: str) -> dict[str, Any]:
    """finding.json of the finding folder `key` ("" for the store's root), checked:
    StorageError names the object and why it cannot be used."""
    name = "/".join(filter(None, (key, "finding.json")))
    where = store.key_uri(name)
    try:
        record = json.loads(store.read(name))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StorageError(f"{where}: corrupt finding (not JSON: {e})") from None
    check_format(record, where)
    finding: dict[str, Any] = record
    return finding


def stored_findings(store: ObjectStore) -> tuple[list[dict[str, Any]], list[str]]:
    """Every finding under the URI (a run's output, or a campaign's worker folders one level
    down), with its folder's key as "key"; and an error line per unusable one."""
    keys = [k.removesuffix("/finding.json") for pattern in
            ("findings/*/finding.json", "*/findings/*/finding.json") for k in store.find(pattern)]
    records, errors = [], []
    for key in keys:
        try:
            records.append({**read_finding(store, key), "key": key})
        except StorageError as e:
            errors.append(str(e))
    return records, errors


def stored_signatures(store: ObjectStore, records: list[dict[str, Any]] | None = None
                      ) -> tuple[list[Signature], list[str]]:
    """The signatures of the stored findings (read here unless `records` are given), counted
    as the campaign store counts them, with repro the URI of a stored bundle; and the error
    lines of unusable findings."""
    records, errors = stored_findings(store) if records is None else (records, [])
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(records, key=lambda r: str(r.get("time"))):
        groups.setdefault(str(r["signature"]), []).append(r)
    sigs = []
    for sig_id, rs in groups.items():
        first = rs[0]
        bundle = next((r for r in rs if r.get("repro")), None)
        sigs.append(Signature(
            id=sig_id, verdict=first["verdict"], target=first.get("target"),
            culprit_op=first.get("culprit_op"), culprit_pass=first.get("culprit_pass"),
            fusion_kind=first.get("fusion_kind"), dtype=first.get("dtype"), count=len(rs),
            first_seen=str(first.get("time")), last_seen=str(rs[-1].get("time")),
            repro=_bundle_uri(store, bundle) if bundle else None,
            known_bug=next((r["known_bug"] for r in rs if r.get("known_bug")), None)))
    return sigs, errors


def run_mirrored(uri: str, staging: Path, run: Callable[[Path, Any], dict[str, Any]], *,
                 reporter: Any = None, wait: float = 120.0, backoff: tuple[float, float] = (1.0, 60.0),
                 on_change: Callable[[dict[str, Any]], None] | None = None) -> tuple[dict[str, Any], bool]:
    """`run(staging, reporter)` (a campaign into the local staging folder) with a Mirror to
    `uri`; returns the summary and whether everything reached the store within `wait` s.
    A StorageError here is a URI that can never work (malformed, s3fs missing); a store that
    is down, denied or misspelled only makes the Mirror keep the findings and retry."""
    store = ObjectStore(uri, patient=False)
    staging.mkdir(parents=True, exist_ok=True)
    mirror = Mirror(staging, store, backoff=backoff, on_change=on_change).start()
    try:
        summary = run(staging, mirror.listen(reporter))
    except BaseException:
        mirror.close(min(wait, 30.0))  # what was finished still goes; the rest waits in staging
        raise
    return summary, finish(mirror, summary, wait)


def _bundle_uri(store: ObjectStore, record: dict[str, Any]) -> str:
    """The stored bundle of a finding: its "repro" is relative to the run's folder once the
    campaign refined it (findings/<id>/repro), to the finding's folder after `bisect`."""
    repro, key = str(record["repro"]), str(record["key"])
    if repro.startswith("findings/"):
        return store.key_uri(key.rsplit("findings/", 1)[0] + repro)
    return store.key_uri(f"{key}/{repro}")
