"""How a worker pod reports findings and counters to the cluster, and the report format the
operator reads back.

Channel: one WorkerReport object (crds/workerreport.yaml) per worker (campaign x worker
group x shard index), written only by that worker, holding its *cumulative* report as JSON
in `spec.report`. Cumulative state, not deltas, is what
makes ingestion idempotent: the operator recomputes totals from the latest reports, so a
restarted operator cannot count anything twice. Findings are keyed by their stable id, so a
worker pod that is killed and restarted (same shard, same seeds) re-finds the same ids and
adds nothing; and each finding is written before `finding()` returns, so a kill loses none.

No jax here: the operator imports the report model from this module.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

CAMPAIGN_LABEL = "xlasentinel.dev/campaign"
WORKER_LABEL = "xlasentinel.dev/worker"
REPORT_LABEL = "xlasentinel.dev/report"
API_VERSION = "xlasentinel.dev/v1alpha1"
GROUP, VERSION = API_VERSION.split("/")
REPORT_PLURAL = "workerreports"

# Fields of a finding record kept in the report; evidence stays in the artifact store.
_SAMPLE_FIELDS = ("id", "program", "target", "verdict", "signature", "culprit_op",
                  "culprit_pass", "fusion_kind", "dtype", "dir", "known_bug", "time")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# A label value: at most 63 characters, alphanumeric at both ends, [-_.] inside. Object
# names derived from a campaign name (up to 253 characters) must fit their own limits too.
LABEL_VALUE_MAX = 63
SUBDOMAIN_MAX = 253
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _digest(text: str, n: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def label_value(text: str) -> str:
    """`text` as a legal label value: itself when it is one, else a cleaned prefix and a hash
    of the whole text (so two long names that share a prefix stay apart). Everything that
    labels or selects by a name goes through this one function."""
    if len(text) <= LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(text):
        return text
    head = re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:LABEL_VALUE_MAX - 11].strip("-_.")
    return f"{head}-{_digest(text)}" if head else _digest(text)


def dns_name(*parts: str, limit: int = SUBDOMAIN_MAX) -> str:
    """Join parts into a lowercase DNS-1123 name of at most `limit` characters (63 and no
    dots for a label, 253 for a subdomain), shortened with a hash when too long."""
    name = "-".join(p for p in parts if p).lower()
    if limit <= LABEL_VALUE_MAX:
        name = name.replace(".", "-")  # a DNS label (pod hostname, Service name) has no dots
    if len(name) <= limit:
        return name
    return f"{name[:limit - 11].rstrip('-.')}-{_digest(name)}"


def report_name(campaign: str, worker: str) -> str:
    return dns_name(campaign, "report", worker)


@dataclass
class SignatureEntry:
    """What one worker knows about one signature: how often, and the first few findings."""

    verdict: str
    count: int = 0
    first_seen: str = ""
    last_seen: str = ""
    samples: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class WorkerReport:
    """The cumulative report of one worker; `findings` maps finding id -> signature."""

    worker: str
    attempts: int = 0
    programs: int = 0
    executions: int = 0
    elapsed_s: float = 0.0
    findings: dict[str, str] = field(default_factory=dict)
    signatures: dict[str, SignatureEntry] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)  # jax, jaxlib of the runner image
    done: bool = False
    updated: str = ""

    def add_finding(self, record: dict[str, Any], samples: int) -> bool:
        """Record a finding; False when its id was already reported (nothing changes)."""
        fid, sig = str(record["id"]), str(record["signature"])
        if fid in self.findings:
            return False
        self.findings[fid] = sig
        seen = str(record.get("time") or now_iso())
        entry = self.signatures.setdefault(sig, SignatureEntry(verdict=str(record["verdict"]),
                                                               first_seen=seen))
        entry.count += 1
        entry.last_seen = max(entry.last_seen, seen)
        if len(entry.samples) < samples:
            entry.samples.append({k: record.get(k) for k in _SAMPLE_FIELDS})
        return True

    def findings_by_verdict(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for entry in self.signatures.values():
            out[entry.verdict] = out.get(entry.verdict, 0) + entry.count
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> WorkerReport:
        data = json.loads(text)
        sigs = {k: SignatureEntry(**v) for k, v in (data.pop("signatures", None) or {}).items()}
        return cls(signatures=sigs, **data)


def report_from_object(body: dict[str, Any]) -> WorkerReport | None:
    """The report in a WorkerReport object, or None when it holds none or garbage."""
    text = (body.get("spec") or {}).get("report")
    if not text:
        return None
    try:
        return WorkerReport.from_json(text)
    except (ValueError, TypeError, KeyError):
        return None


class K8sReporter:
    """The engine's reporter in a worker pod: writes the worker's WorkerReport object
    through `api`, a kubernetes.client.CustomObjectsApi.

    `finding()` writes through (a finding is durable in the API before the engine goes on);
    `progress()` writes at most every `progress_interval` seconds; `close()` flushes.
    """

    def __init__(self, api: Any, *, namespace: str, campaign: str, campaign_uid: str,
                 worker: str, samples: int = 1, progress_interval: float = 5.0,
                 retries: int = 6, versions: dict[str, str] | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.campaign = campaign
        self.campaign_uid = campaign_uid
        self.name = report_name(campaign, worker)
        self.samples = max(1, samples)
        self.progress_interval = progress_interval
        self.retries = retries
        self.report = WorkerReport(worker=worker)
        self.versions = dict(versions or {})
        # Counters of earlier attempts: a restarted pod re-runs the same shard from its start,
        # so its programs are a replay until it passes the previous attempt's count.
        self._base = (0, 0, 0.0)
        self._last_write = 0.0
        self._dirty = False

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
            data = body.to_dict() if hasattr(body, "to_dict") else body
            previous = report_from_object(data)
            if previous is not None:
                self.report = previous
        else:
            try:
                self._call(self.api.create_namespaced_custom_object, GROUP, VERSION,
                           self.namespace, REPORT_PLURAL, self._object())
            except ApiException as e:
                if e.status != 409:  # 409: an earlier attempt created it just now
                    raise
        self.report.done = False
        self.report.versions = self.versions or self.report.versions
        self.report.attempts += 1
        self._base = (self.report.programs, self.report.executions, self.report.elapsed_s)
        self._write()
        return self.report

    def finding(self, record: dict[str, Any]) -> None:
        if self.report.add_finding(record, self.samples):
            self._write()

    def progress(self, counters: dict[str, Any]) -> None:
        base_programs, base_executions, base_elapsed = self._base
        self.report.programs = max(base_programs, int(counters.get("programs", 0)))
        self.report.executions = max(base_executions, int(counters.get("executions", 0)))
        self.report.elapsed_s = round(base_elapsed + float(counters.get("elapsed_s", 0.0)), 3)
        self._dirty = True
        if time.monotonic() - self._last_write >= self.progress_interval:
            self._write()

    def close(self, done: bool = True) -> None:
        """Flush; `done` marks the shard finished (its budget is spent)."""
        self.report.done = done
        if self._dirty or done:
            self._write()

    def _object(self) -> dict[str, Any]:
        owner = {"apiVersion": API_VERSION, "kind": "FuzzCampaign", "name": self.campaign,
                 "uid": self.campaign_uid, "blockOwnerDeletion": False, "controller": False}
        return {
            "apiVersion": API_VERSION, "kind": "WorkerReport",
            "metadata": {
                "name": self.name, "namespace": self.namespace,
                "labels": {CAMPAIGN_LABEL: label_value(self.campaign),
                           WORKER_LABEL: label_value(self.report.worker),
                           REPORT_LABEL: "true"},
                "ownerReferences": [owner] if self.campaign_uid else [],
            },
            "spec": {"campaign": self.campaign, "worker": self.report.worker,
                     "report": self.report.to_json()},
        }

    def _write(self) -> None:
        self.report.updated = now_iso()
        patch = {"spec": {"report": self.report.to_json()}}
        self._call(self.api.patch_namespaced_custom_object, GROUP, VERSION, self.namespace,
                   REPORT_PLURAL, self.name, patch,
                   _content_type="application/merge-patch+json")
        self._last_write = time.monotonic()
        self._dirty = False

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Retry transient API failures (connection errors, 429, 5xx) with backoff."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                return fn(*args, **kwargs)
            except ApiException as e:
                if e.status not in (429, 500, 502, 503, 504) or attempt == self.retries:
                    raise
            except (OSError, HTTPError):
                if attempt == self.retries:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
        raise AssertionError("unreachable")
