"""The worker pod's side of the report channel (cluster/report.py): writes a worker's
WorkerReport, and one-off Jobs' results, through the kubernetes client. Apart from the
report format so that the operator's planning modules, which read that format, import no
Kubernetes client (pyproject's import contracts).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from xla_sentinel.cluster.report import (
    CAMPAIGN_LABEL,
    GROUP,
    LIMITS,
    REPORT_LABEL,
    REPORT_PLURAL,
    REVISION_LABEL,
    VERSION,
    WORKER_LABEL,
    Limits,
    WorkerReport,
    coverage_of,
    label_value,
    merge,
    now_iso,
    report_from_object,
    report_name,
    storage_of,
)
from xla_sentinel.spec.campaign import API_VERSION

# The API server's answers to a write it will never accept as sent: 413 (request body too
# large), 422 (invalid: spec.report over its maxLength), or etcd's "request is too large"
# (a 500). Retrying them cannot help; the worker records the error and keeps fuzzing.
REFUSED = (413, 422)


def refused(status: int | None, body: str) -> bool:
    return status in REFUSED or (status == 500 and "too large" in (body or ""))


# The least time between two progress writes of one worker, set by the operator from the
# campaign's size (desired.report_interval): every worker writing every 5 s makes 820
# writes/s at 4,096 workers, each a whole report, for etcd, the API server and every watch.
REPORT_INTERVAL_ENV = "XLA_SENTINEL_REPORT_INTERVAL"


def report_interval(default: float, env: Any = None) -> float:
    """The progress interval: the operator's (REPORT_INTERVAL_ENV) when longer than
    `default`; a bad value is ignored."""
    import os

    try:
        given = float((env if env is not None else os.environ).get(REPORT_INTERVAL_ENV) or 0)
    except ValueError:
        given = 0.0
    return max(default, given)


class K8sReporter:
    """The engine's reporter in a worker pod: writes the worker's WorkerReport object
    through `api`, a kubernetes.client.CustomObjectsApi.

    Writes are bounded in rate: `finding()` writes through when it adds a signature or a
    sample (at most Limits.signatures x Limits.samples times per attempt, so a new bug
    reaches the operator at once), otherwise at most every `progress_interval` seconds (or
    the operator's longer REPORT_INTERVAL_ENV), like `progress()`; `close()` flushes. A
    report that would read as the one last written (its time apart) is not written at all.
    Counts a kill loses since the last write come back: the next attempt replays the shard
    and counts them again.
    """

    def __init__(self, api: Any, *, namespace: str, campaign: str, campaign_uid: str,
                 worker: str, revision: str = "", samples: int = 1,
                 progress_interval: float = 5.0, retries: int = 6,
                 versions: dict[str, str] | None = None, limits: Limits = LIMITS,
                 local: WorkerReport | None = None,
                 clock: Callable[[], float] = time.monotonic, name: str | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.campaign = campaign
        self.campaign_uid = campaign_uid
        self.revision = revision
        # In a pod, its writer_name(); elsewhere (tests, local runs) derived from the worker.
        self.name = name or report_name(campaign, worker, revision)
        self.limits = dataclasses.replace(limits, samples=max(1, min(samples, limits.samples)))
        self.progress_interval = report_interval(progress_interval)
        self.retries = retries
        self.versions = dict(versions or {})
        self.clock = clock
        # Earlier attempts (as stored), and this attempt's own counts: published is their join.
        self.base = WorkerReport(worker=worker, revision=revision)
        self.mine = local if local is not None else WorkerReport(worker=worker, revision=revision)
        self.mine.worker, self.mine.revision = worker, revision
        self.report = self.base
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._elapsed_base = 0.0
        self._version: str | None = None  # resourceVersion last read or written
        self._last_write = float("-inf")
        self._dirty = False
        self._written: str | None = None  # the last report written, its time left out
        self.error = ""
        self.writes = 0
        self.skipped = 0  # writes left out: nothing changed since the last
        self._lock = threading.RLock()

    def start(self) -> WorkerReport:
        """Load the report of earlier attempts (if any), count this attempt, and write it."""
        from kubernetes.client.exceptions import ApiException

        try:
            body = self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace,
                                                         REPORT_PLURAL, self.name)
        except ApiException as e:
            if e.status != 404:
                raise
            body = None
        if body is not None:
            self._fold(body)
        else:
            try:
                created = self._call(self.api.create_namespaced_custom_object, GROUP, VERSION,
                                     self.namespace, REPORT_PLURAL, self._object())
                self._version = _resource_version(created)
            except ApiException as e:
                if e.status != 409:  # 409: an earlier attempt created it just now
                    raise
                self._fold(self.api.get_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, REPORT_PLURAL, self.name))
        self.mine.attempts = self.base.attempts + 1
        self._elapsed_base = self.base.elapsed_s
        self._write()
        return self.report

    def finding(self, record: dict[str, Any]) -> None:
        with self._lock:  # the engine reports from its scheduler and its progress thread
            self._finding(record)

    def _finding(self, record: dict[str, Any]) -> None:
        fid = str(record.get("id") or "")
        if fid:
            # The engine's store drops a finding it already holds; this drops repeated calls.
            if fid in self._recent:
                return
            self._recent[fid] = None
            if len(self._recent) > self.limits.recent_ids:
                self._recent.popitem(last=False)
        changed = self.mine.add_finding(record, self.limits)
        self._dirty = True
        if changed in ("signature", "sample") or self._due():
            self._write()

    def progress(self, counters: dict[str, Any]) -> None:
        with self._lock:
            self._progress(counters)

    def _progress(self, counters: dict[str, Any]) -> None:
        self.mine.programs = int(counters.get("programs", 0))
        self.mine.executions = int(counters.get("executions", 0))
        self.mine.elapsed_s = round(self._elapsed_base + float(counters.get("elapsed_s", 0.0)), 3)
        if counters.get("coverage"):
            self.mine.coverage = coverage_of(counters["coverage"], self.limits)
        self._dirty = True
        if self._due():
            self._write()

    def storage(self, status: dict[str, Any]) -> None:
        """The artifact store's condition changed (storage.Mirror's on_change, called on the
        Mirror's thread): it goes into the report, written through when the store goes down
        or comes back so the operator hears at once, else at the progress rate (the Mirror
        calls again on every failed attempt, to keep the pending count current)."""
        with self._lock:
            before = self.mine.storage.get("ok")
            self.mine.storage = storage_of(status, self.limits)
            self._dirty = True
            if before != self.mine.storage["ok"] or self._due():
                self._write()

    def close(self, done: bool = True) -> None:
        """Flush; `done` marks the shard finished (its budget is spent)."""
        with self._lock:
            self.mine.done = done
            if self._dirty or done:
                self._write()

    def _due(self) -> bool:
        return self.clock() - self._last_write >= self.progress_interval

    def _fold(self, body: Any) -> None:
        data = body.to_dict() if hasattr(body, "to_dict") else body
        self._version = _resource_version(data)
        stored = report_from_object(data)
        if stored is not None:
            self.base = merge(self.base, stored, self.limits)

    def _object(self) -> dict[str, Any]:
        owner = {"apiVersion": API_VERSION, "kind": "FuzzCampaign", "name": self.campaign,
                 "uid": self.campaign_uid, "blockOwnerDeletion": False, "controller": False}
        labels = {CAMPAIGN_LABEL: label_value(self.campaign),
                  WORKER_LABEL: label_value(self.mine.worker), REPORT_LABEL: "true"}
        if self.revision:
            labels[REVISION_LABEL] = label_value(self.revision)
        spec = {"campaign": self.campaign, "worker": self.mine.worker,
                "report": self.published().to_json()}
        if self.revision:
            spec["revision"] = self.revision
        return {
            "apiVersion": API_VERSION, "kind": "WorkerReport",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": labels,
                         "ownerReferences": [owner] if self.campaign_uid else []},
            "spec": spec,
        }

    def published(self) -> WorkerReport:
        self.mine.versions = self.versions or self.mine.versions
        self.mine.updated = now_iso()
        return merge(self.base, self.mine, self.limits)

    def _write(self) -> None:
        from kubernetes.client.exceptions import ApiException

        for _ in range(5):
            self.report = self.published()
            content = dataclasses.replace(self.report, updated="").to_json()
            if content == self._written and not self.error:
                # Nothing a reader would see but the time: a worker waiting on its store,
                # or finished and flushed, writes nothing.
                self.skipped += 1
                self._last_write = self.clock()
                self._dirty = False
                return
            spec: dict[str, Any] = {"report": self.report.to_json()}
            if self.error:
                spec["error"] = None  # this write goes through: the refusal is over
            patch: dict[str, Any] = {"spec": spec}
            if self._version:
                patch["metadata"] = {"resourceVersion": self._version}
            try:
                written = self._call(self.api.patch_namespaced_custom_object, GROUP, VERSION,
                                     self.namespace, REPORT_PLURAL, self.name, patch,
                                     _content_type="application/merge-patch+json")
            except ApiException as e:
                if e.status == 409:  # another pod of this worker wrote: fold it in, redo
                    self._fold(self.api.get_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, REPORT_PLURAL, self.name))
                    continue
                if refused(e.status, str(e.body or "")):
                    self._refused(e, len(spec["report"]))
                    return
                raise
            self._version = _resource_version(written)
            self._written = content
            self.error = ""
            self.writes += 1
            self._last_write = self.clock()
            self._dirty = False
            return
        # Still conflicting after 5 reads: another pod writes as fast; stay dirty, next time.

    def _refused(self, e: Any, size: int) -> None:
        """The API server will not take this report: say so where people and the operator
        look (the object's spec.error, a small write), keep counting, try again later."""
        reason = str(getattr(e, "reason", "") or "")
        self.error = (f"report write refused by the API server ({e.status} {reason}): "
                      f"{size} bytes of report JSON; findings are kept in the worker's store")
        try:
            self._call(self.api.patch_namespaced_custom_object, GROUP, VERSION, self.namespace,
                       REPORT_PLURAL, self.name, {"spec": {"error": self.error}},
                       _content_type="application/merge-patch+json")
        except Exception:  # noqa: BLE001 - the error stays in the worker's log below
            pass
        import structlog

        structlog.get_logger("xla_sentinel.cluster.report").error(
            "report.refused", report=self.name, status=e.status, bytes=size)
        self._last_write = self.clock()  # retried at the progress rate, not per finding

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Retry transient API failures (connection errors, 429, 5xx) with backoff."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                return fn(*args, **kwargs)
            except ApiException as e:
                if (e.status not in (429, 500, 502, 503, 504) or attempt == self.retries
                        or refused(e.status, str(e.body or ""))):
                    raise
            except (OSError, HTTPError):
                if attempt == self.retries:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
        raise AssertionError("unreachable")


def _resource_version(body: Any) -> str | None:
    if body is None:
        return None
    data = body.to_dict() if hasattr(body, "to_dict") else body
    if not isinstance(data, dict):
        return None
    return (data.get("metadata") or {}).get("resourceVersion")



def write_result(api: Any, obj: dict[str, Any]) -> None:
    """Create the result object, or replace its result when a retried Job wrote one."""
    from kubernetes.client.exceptions import ApiException

    meta = obj["metadata"]
    try:
        api.create_namespaced_custom_object(GROUP, VERSION, meta["namespace"], REPORT_PLURAL, obj)
    except ApiException as e:
        if e.status != 409:
            raise
        api.patch_namespaced_custom_object(GROUP, VERSION, meta["namespace"], REPORT_PLURAL,
                                           meta["name"], {"spec": {"result": obj["spec"]["result"]}},
                                           _content_type="application/merge-patch+json")
