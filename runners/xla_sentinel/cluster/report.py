"""How a worker pod reports findings and counters to the cluster, and the report format the
operator reads back.

Channel: one WorkerReport object (crds/workerreport.yaml) per worker and campaign revision
(campaign x revision x worker group x shard index), written only by that worker, holding
its *cumulative* report as JSON in `spec.report`. Cumulative state, not deltas, is what makes
ingestion idempotent: the operator recomputes totals from the latest reports, so a restarted
operator cannot count anything twice.

Bounded: a report holds aggregates only (counters; per signature the count, first/last seen
and the first few samples; at most `Limits.signatures` signatures, later ones counted in
`overflow`; the op and fusion-kind coverage counts, at most `Limits.coverage_ops` ops).
Finding ids and evidence stay in the worker's store and the artifact store, so the report's
size does not grow with the campaign's length (`Limits.cap` bytes at most), and it is
written at a bounded rate.

Restarts without finding ids: every field of a report is a maximum over the attempts that
wrote it (counts, programs, attempts; first seen is a minimum), so a report is a join of
its attempts. A restarted pod replays its shard from the start (same seeds): its own counts
climb from zero through the same findings, and max(earlier attempts, this attempt) counts
each finding once. A pod that resumes its store (a persistent artifacts volume) starts its
counts from that store (`K8sReporter(local=...)`), so the maximum is right there too. Two
pods of one worker at once (a replacement before the old pod is gone) merge the same way:
writes carry the resourceVersion they read, and after a 409 the stored report is folded in.

No jax here: the operator imports the report model from this module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from xla_sentinel.spec.campaign import API_VERSION, OP_NAMES

# Label keys on a campaign's reports and Jobs: the operator selects and sets the same keys.
CAMPAIGN_LABEL = "xlasentinel.dev/campaign"
WORKER_LABEL = "xlasentinel.dev/worker"
REPORT_LABEL = "xlasentinel.dev/report"
REVISION_LABEL = "xlasentinel.dev/revision"
# On a ConfigMap: each key a failure report for the reproduce agents of the campaign named by
# the value (agents/sources.py; docs/agents.md "Running a swarm").
FAILURE_REPORT_LABEL = "xlasentinel.dev/failure-report"
GROUP, VERSION = API_VERSION.split("/")
REPORT_PLURAL = "workerreports"

# Fields of a finding record kept in a sample; evidence stays in the artifact store.
_SAMPLE_FIELDS = ("id", "program", "target", "verdict", "signature", "culprit_op",
                  "culprit_pass", "fusion_kind", "dtype", "dir", "known_bug", "time")


@dataclass(frozen=True)
class Limits:
    """What bounds a report. With the defaults the worst case (every signature slot used,
    every sample full, every field at its length limit) is under `cap` bytes, which is
    far under the CRD's 1 MiB `spec.report` and etcd's 1.5 MiB object limit; tests check it."""

    signatures: int = 100  # signatures per report; findings of later ones count in `overflow`
    samples: int = 3  # finding records kept per signature (bisector Jobs start from these)
    configurations: int = 6  # configurations named per signature (SignatureEntry.configurations)
    configuration_chars: int = 63  # characters per configuration name
    field_chars: int = 120  # characters per sample field (ids and paths are far shorter)
    cap: int = 512 * 1024  # bytes of report JSON the limits above guarantee
    storage_chars: int = 400  # characters of the artifact store's URI and of its error
    recent_ids: int = 4096  # finding ids remembered in memory to drop repeated calls
    # Coverage counts (WorkerReport.coverage): ops kept (the generator's 108 always, then
    # the most reached; far above the op table and StableHLO's ops together, so in practice
    # none is dropped), fusion kinds kept (XLA:CPU has 5), characters per name.
    coverage_ops: int = 512
    coverage_fusion_kinds: int = 16
    coverage_key_chars: int = 63


LIMITS = Limits()


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


def writer_name(pod: str) -> str:
    """The one WorkerReport name a pod may write (the chart's ValidatingAdmissionPolicy checks
    it against the pod-name claim of the pod's token): the pod name without the suffix its
    Job generated, so `<job>-<index>` for a worker and `<job>` for a bisector or verifier,
    and a retried pod of the same index or Job writes the same report."""
    head, sep, _ = pod.rpartition("-")
    return head if sep and head else pod


def report_name(campaign: str, worker: str, revision: str = "") -> str:
    """One report per campaign revision and worker: a new revision counts afresh."""
    return dns_name(campaign, "report", revision, worker)


def sample_of(record: dict[str, Any], limits: Limits = LIMITS) -> dict[str, Any]:
    """The bounded part of a finding record a report keeps."""
    out: dict[str, Any] = {}
    for k in _SAMPLE_FIELDS:
        v = record.get(k)
        out[k] = v[:limits.field_chars] if isinstance(v, str) else v
    return out


def storage_of(status: dict[str, Any], limits: Limits = LIMITS) -> dict[str, Any]:
    """The bounded part of a storage.Mirror status a report keeps: whether the artifact
    store answers, which one, why not, how many findings wait on the pod's disk, since when."""
    n = limits.storage_chars
    return {"ok": bool(status.get("available")), "uri": str(status.get("uri") or "")[:n],
            "reason": str(status.get("error") or "")[:n],
            "pending": int(status.get("pending_findings") or 0),
            "since": str(status.get("since") or "")[:40]}


@dataclass
class SignatureEntry:
    """What one worker knows about one signature: how often, and the first few findings."""

    verdict: str
    count: int = 0
    first_seen: str = ""
    last_seen: str = ""
    samples: list[dict[str, Any]] = field(default_factory=list)
    # The configurations (targets, XLA float64 references) the bug shows in, first seen
    # first: one bug that several configurations show is one signature (campaign/recording.py
    # group_key). Additive: a report written before it has none, and every finding's target
    # is named here even past the samples' limit.
    configurations: list[str] = field(default_factory=list)


# The coverage sections a report carries (campaign/coverage.py's names; summary.json has
# them all): the ops reached and the fusion kinds seen, each with how many programs had it
# (ops: how often). What a swarm's stress tasks are computed from (agents/sources.py) when
# a campaign keeps no artifacts PVC or bucket.
COVERAGE_SECTIONS = ("ops", "fusion_kinds")
_TABLE_OPS = frozenset(OP_NAMES)


def coverage_of(data: Any, limits: Limits = LIMITS) -> dict[str, Any]:
    """The bounded part of a worker's coverage (`Coverage.to_json()`, or an earlier report's)
    a report keeps: `programs` and the COVERAGE_SECTIONS, each with at most its Limits'
    keys of `coverage_key_chars` characters: the ops of the generator's table first (their
    gaps are what stress agents work on), then the most often reached. ValueError when it
    is not coverage (a garbled report never reaches anyone's arithmetic)."""
    if not isinstance(data, dict):
        raise ValueError("coverage: not an object")
    programs = data.get("programs", 0)
    if not isinstance(programs, int) or isinstance(programs, bool) or programs < 0:
        raise ValueError("coverage.programs: not a count")
    out: dict[str, Any] = {"programs": programs}
    most = {"ops": limits.coverage_ops, "fusion_kinds": limits.coverage_fusion_kinds}
    for section in COVERAGE_SECTIONS:
        raw = data.get(section) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"coverage.{section}: not an object")
        counts: dict[str, int] = {}
        for k, v in raw.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"coverage.{section}.{k}: not a count")
            key = str(k)[:limits.coverage_key_chars]
            counts[key] = max(counts.get(key, 0), v)
        kept = sorted(counts.items(), key=lambda kv: (kv[0] not in _TABLE_OPS, -kv[1], kv[0]))[:most[section]]
        out[section] = dict(kept)
    return out


def _merge_coverage(a: dict[str, Any], b: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """The join of two attempts' coverage: each count the larger (a replayed shard climbs
    through the same programs), so an op reached by any attempt stays reached."""
    if not a or not b:
        return dict(b or a)
    out: dict[str, Any] = {"programs": max(a.get("programs", 0), b.get("programs", 0))}
    for section in COVERAGE_SECTIONS:
        x, y = a.get(section) or {}, b.get(section) or {}
        out[section] = {k: max(x.get(k, 0), y.get(k, 0)) for k in {*x, *y}}
    return coverage_of(out, limits)


def _merge_entry(a: SignatureEntry, b: SignatureEntry, samples: int,
                 configurations: int = LIMITS.configurations) -> SignatureEntry:
    by_id = {str(s.get("id")): s for s in [*a.samples, *b.samples]}
    kept = sorted(by_id.values(), key=lambda s: (str(s.get("time") or ""), str(s.get("id"))))
    return SignatureEntry(verdict=a.verdict or b.verdict, count=max(a.count, b.count),
                          first_seen=min(filter(None, [a.first_seen, b.first_seen]), default=""),
                          last_seen=max(a.last_seen, b.last_seen), samples=kept[:samples],
                          configurations=list(dict.fromkeys([*a.configurations, *b.configurations]))[:configurations])


@dataclass
class WorkerReport:
    """The cumulative report of one worker in one campaign revision (aggregates only)."""

    worker: str
    revision: str = ""
    attempts: int = 0
    programs: int = 0
    executions: int = 0
    elapsed_s: float = 0.0
    signatures: dict[str, SignatureEntry] = field(default_factory=dict)
    # verdict -> findings of signatures past Limits.signatures (counted, not itemized)
    overflow: dict[str, int] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)  # jax, jaxlib, image of the runner
    # The artifact store's condition as this worker last saw it (storage_of); {}: no store
    # or none heard of yet.
    storage: dict[str, Any] = field(default_factory=dict)
    # What the worker's programs exercised (coverage_of): {"programs": N, "ops": {op: n},
    # "fusion_kinds": {kind: n}}; {}: none counted yet, or a worker of an earlier version.
    coverage: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    updated: str = ""
    # Not part of the JSON: the object's spec.error (a write the API server refused).
    error: str = ""

    def add_finding(self, record: dict[str, Any], limits: Limits = LIMITS) -> str:
        """Count a finding; what changed: "signature" (a new one), "sample" (a new sample),
        "count" (a count only) or "overflow" (past the signature limit)."""
        n = limits.field_chars  # every string a report keeps is bounded
        sig, verdict = str(record["signature"])[:n], str(record["verdict"])[:n]
        seen = str(record.get("time") or now_iso())[:n]
        entry = self.signatures.get(sig)
        if entry is None:
            if len(self.signatures) >= limits.signatures:
                self.overflow[verdict] = self.overflow.get(verdict, 0) + 1
                return "overflow"
            entry = self.signatures[sig] = SignatureEntry(verdict=verdict, first_seen=seen)
            changed = "signature"
        else:
            changed = "count"
        entry.count += 1
        target = str(record.get("target") or "")[:limits.configuration_chars]
        if target and target not in entry.configurations and len(entry.configurations) < limits.configurations:
            entry.configurations.append(target)
            changed = "sample" if changed == "count" else changed
        entry.first_seen = min(entry.first_seen, seen)
        entry.last_seen = max(entry.last_seen, seen)
        if len(entry.samples) < limits.samples:
            entry.samples.append(sample_of(record, limits))
            changed = "sample" if changed == "count" else changed
        return changed

    def findings_by_verdict(self) -> dict[str, int]:
        out = dict(self.overflow)
        for entry in self.signatures.values():
            out[entry.verdict] = out.get(entry.verdict, 0) + entry.count
        return out

    def findings_total(self) -> int:
        return sum(self.findings_by_verdict().values())

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("error")
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> WorkerReport:
        """The report in `text`; ValueError when it is not one. Fields this version does not
        know (a newer worker's) are ignored, as are `findings` ids of reports written before
        reports were bounded; a known field of the wrong type or a negative count is refused,
        so a garbled report can never reach the operator's arithmetic."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a report is a JSON object")
        raw = data.pop("signatures", None) or {}
        if not isinstance(raw, dict):
            raise ValueError("signatures: not an object")
        sigs = {str(k): SignatureEntry(**_typed(SignatureEntry, v, f"signatures.{k}"))
                for k, v in raw.items()}
        fields = _typed(cls, data, "report", skip={"signatures", "error"})
        if not isinstance(fields.get("worker"), str):
            raise ValueError("report.worker: missing")
        if fields.get("coverage"):
            fields["coverage"] = coverage_of(fields["coverage"])
        return cls(signatures=sigs, **fields)


# JSON types of report fields by their annotation (the dataclasses are the schema).
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
    "dict[str, int]": (dict,), "dict[str, str]": (dict,), "dict[str, Any]": (dict,),
    "list[dict[str, Any]]": (list,), "list[str]": (list,),
}


def _typed(cls: type, data: Any, where: str, skip: frozenset[str] | set[str] = frozenset()
           ) -> dict[str, Any]:
    """The known fields of `data` for dataclass `cls`, each of its declared JSON type."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: not an object")
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in skip or f.name not in data:
            continue
        value, kinds = data[f.name], _JSON_TYPES[str(f.type)]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ValueError(f"{where}.{f.name}: {type(value).__name__} is not {f.type}")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"{where}.{f.name}: negative")
        if str(f.type) == "list[str]" and isinstance(value, list) \
                and not all(isinstance(x, str) for x in value):
            raise ValueError(f"{where}.{f.name}: not a list of strings")
        out[f.name] = value
    return out


def merge(a: WorkerReport, b: WorkerReport, limits: Limits = LIMITS) -> WorkerReport:
    """The join of two reports of one worker (attempts, or two pods at once): every count
    is the larger one, so merging is idempotent and order does not matter. Versions, done
    and updated are `b`'s (the writer's)."""
    sigs = dict(a.signatures)
    for sig, entry in b.signatures.items():
        sigs[sig] = _merge_entry(sigs[sig], entry, limits.samples, limits.configurations) if sig in sigs else entry
    overflow = {v: max(a.overflow.get(v, 0), b.overflow.get(v, 0))
                for v in {*a.overflow, *b.overflow}}
    if len(sigs) > limits.signatures:
        # Keep the first seen; later ones are counted by verdict only.
        order = sorted(sigs, key=lambda s: (sigs[s].first_seen, s))
        for sig in order[limits.signatures:]:
            e = sigs.pop(sig)
            overflow[e.verdict] = overflow.get(e.verdict, 0) + e.count
    # Storage is a condition, not a count: the writer's, or an earlier attempt's until this
    # attempt's Mirror has said how the store answers.
    return WorkerReport(worker=b.worker or a.worker, revision=b.revision or a.revision,
                        attempts=max(a.attempts, b.attempts), programs=max(a.programs, b.programs),
                        executions=max(a.executions, b.executions),
                        elapsed_s=max(a.elapsed_s, b.elapsed_s), signatures=sigs,
                        overflow=overflow, versions=b.versions or a.versions,
                        storage=b.storage or a.storage,
                        coverage=_merge_coverage(a.coverage, b.coverage, limits), done=b.done,
                        updated=b.updated or a.updated, error=b.error)


def report_problem(body: dict[str, Any]) -> str | None:
    """Why a WorkerReport object holding a report cannot be read (a worker of another
    version, or garbage), or None when it reads or holds no report at all."""
    text = (body.get("spec") or {}).get("report")
    if not text:
        return None
    try:
        WorkerReport.from_json(text)
    except (ValueError, TypeError, KeyError) as e:
        return f"{type(e).__name__}: {e}"[:300]
    return None


def report_from_object(body: dict[str, Any]) -> WorkerReport | None:
    """The report in a WorkerReport object, or None when it holds none or garbage."""
    spec = body.get("spec") or {}
    text = spec.get("report")
    if not text:
        return None
    try:
        report = WorkerReport.from_json(text)
    except (ValueError, TypeError, KeyError):
        return None
    report.error = str(spec.get("error") or "")
    report.revision = report.revision or str(spec.get("revision") or "")
    return report


# Results of one-off Jobs (a bisection, a fix verification) travel the same way as reports:
# a WorkerReport object the Job writes with the worker's RBAC (create/patch on workerreports,
# nothing else), holding `spec.result` instead of `spec.report`. The operator validates and
# ingests it into the BugSignature; a Job never writes a BugSignature itself, so a
# compromised pod cannot rewrite triage state people set.
RESULT_LABEL_VALUE = "result"
RESULT_MAX = 16 * 1024  # bytes of result JSON (evidence is cut to fit; the bundle has it all)


def result_name(campaign: str, kind: str, key: str) -> str:
    return dns_name(campaign, kind, key)


def result_object(*, namespace: str, campaign: str, campaign_uid: str, kind: str, key: str,
                  result: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """The WorkerReport object carrying one Job's `result` ({"type": kind, ...})."""
    text = json.dumps({**result, "type": kind}, sort_keys=True, default=str)
    if len(text) > RESULT_MAX:
        result = {**result, "evidence": str(result.get("evidence", ""))[:RESULT_MAX // 2]}
        text = json.dumps({**result, "type": kind}, sort_keys=True, default=str)[:RESULT_MAX]
    owner = {"apiVersion": API_VERSION, "kind": "FuzzCampaign", "name": campaign,
             "uid": campaign_uid, "blockOwnerDeletion": False, "controller": False}
    return {
        "apiVersion": API_VERSION, "kind": "WorkerReport",
        "metadata": {"name": name or result_name(campaign, kind, key), "namespace": namespace,
                     "labels": {CAMPAIGN_LABEL: label_value(campaign),
                                REPORT_LABEL: RESULT_LABEL_VALUE},
                     "ownerReferences": [owner] if campaign_uid else []},
        "spec": {"campaign": campaign, "worker": kind, "result": text},
    }


def result_from_object(body: dict[str, Any]) -> dict[str, Any] | None:
    """The result in a WorkerReport object, or None when it holds none or garbage."""
    text = (body.get("spec") or {}).get("result")
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    # fixDraft: an agent pod's fix drafts (agents/swarm.py), each verified by the agents' gate.
    return data if isinstance(data, dict) and data.get("type") in ("bisection", "verification", "fixDraft") else None
