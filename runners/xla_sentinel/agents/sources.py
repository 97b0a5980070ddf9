"""Where an agent pod's tasks come from beyond the pod itself (docs/agents.md "Running a
swarm"): the failure reports handed to a campaign, and what its workers covered.

- Failure reports: each key of a ConfigMap labelled `FAILURE_REPORT_LABEL: <campaign>`
  (`kubectl create configmap ... --from-file`), and each object under
  `artifacts.bucketURI/<campaign>/reports/`. A report is UTF-8 text (an issue, a log, a
  StableHLO or HLO module) of at most `REPORT_BYTES`; its task key is a hash of its bytes,
  so every pod seeds it once and the same report in two places is one task. One that is
  empty, binary or too large is a `Report` with an `error`, never an exception.
- Coverage: what the campaign's workers exercised, from their own output: each worker's
  store on the artifacts PVC (`/artifacts/<campaign>/<worker>/campaign.sqlite`, live), or
  the `summary.json` each worker leaves in the bucket (`<bucket>/<campaign>/<worker>/`,
  written when its shard ends); where neither holds any (a campaign with no PVC and no
  bucket, or none written yet), the op and fusion-kind counts each worker's WorkerReport
  carries (`report_coverage`, `cluster/report.py` COVERAGE_SECTIONS). Summed over workers,
  in the shape `report.tables.collect` gives a local store, for
  `tools.Workbench.coverage_gaps`; a section no source carried is left out, not empty (an
  absent section is no gap).

No API server calls but `configmap_reports` and `worker_reports`; no jax.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_sentinel.campaign import coverage
from xla_sentinel.cluster.report import (
    CAMPAIGN_LABEL,
    COVERAGE_SECTIONS,
    FAILURE_REPORT_LABEL,
    GROUP,
    REPORT_LABEL,
    REPORT_PLURAL,
    VERSION,
    WorkerReport,
    label_value,
    report_from_object,
)
from xla_sentinel.storage.objects import ObjectStore, StorageError, join

# A report travels in its task's Lease annotation (256 KiB for all of an object's
# annotations, JSON-escaped): the text of an issue or a module, not a dump folder.
REPORT_BYTES = 64 * 1024
REPORTS_PREFIX = "reports"
ARTIFACTS_ROOT = Path("/artifacts")  # the artifacts PVC in an agent pod (operator: desired.ARTIFACTS_MOUNT)
_MODULE_MARKERS = ("func.func", "HloModule", "stablehlo.")


@dataclass(frozen=True)
class Report:
    """One failure report: where it came from, its text, or why it is no report."""

    source: str  # configmap/NAME/KEY, or the object's URI
    digest: str  # sha256 of its bytes (of its name and size when too large to read)
    text: str = ""
    error: str = ""

    @property
    def key(self) -> str:
        """The task key: the content's hash (the same report anywhere is one task); a
        refused one per source too, so each malformed report is said once by name."""
        if self.error:
            where = hashlib.sha256(self.source.encode()).hexdigest()[:8]
            return f"report:refused:{where}:{self.digest[:16]}"
        return f"report:sha256:{self.digest[:16]}"

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"report": self.source, "sha256": self.digest}
        if self.error:
            return {**out, "error": self.error}
        kind = "module" if any(m in self.text for m in _MODULE_MARKERS) else "text"
        return {**out, "kind": kind, "text": self.text}


def read_report(source: str, data: bytes) -> Report:
    """A report from raw bytes; `error` says why it is none (empty, binary, too large)."""
    digest = hashlib.sha256(data).hexdigest()
    if len(data) > REPORT_BYTES:
        return Report(source, digest, error=f"{source}: {len(data)} bytes, more than the "
                      f"{REPORT_BYTES} a report may hold (put the module or the issue text, not a dump)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return Report(source, digest, error=f"{source}: binary, not UTF-8 text (byte {e.start}); "
                      "a report is an issue text, a log or a module's text")
    if "\x00" in text:
        return Report(source, digest, error=f"{source}: binary, not text (a NUL byte)")
    if not text.strip():
        return Report(source, digest, error=f"{source}: empty")
    return Report(source, digest, text=text)


def configmap_reports(core: Any, namespace: str, campaign: str) -> list[Report]:
    """Every key of the ConfigMaps labelled for `campaign` (`core`: a CoreV1Api), by name."""
    got = core.list_namespaced_config_map(
        namespace, label_selector=f"{FAILURE_REPORT_LABEL}={label_value(campaign)}")
    reports = []
    for cm in sorted(got.items or [], key=lambda c: c.metadata.name):
        name = cm.metadata.name
        for key, value in sorted((cm.data or {}).items()):
            reports.append(read_report(f"configmap/{name}/{key}", str(value).encode()))
        # kubectl puts a file that is not UTF-8 in binaryData (base64).
        for key, value in sorted((cm.binary_data or {}).items()):
            try:
                data = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                data = str(value).encode()
            reports.append(read_report(f"configmap/{name}/{key}", data))
    return reports


def bucket_reports(bucket: str, campaign: str) -> tuple[list[Report], str]:
    """Every object under BUCKET/CAMPAIGN/reports/, and why the bucket could not be read
    ("" when it could; a missing prefix is no reports)."""
    store = ObjectStore(join(bucket, campaign, REPORTS_PREFIX))
    try:
        fs = store.fs()
        if not fs.exists(store.root):
            return [], ""
        paths = sorted(str(p) for p in fs.find(store.root))
        reports = []
        for path in paths:
            key = path.removeprefix(store.root.rstrip("/") + "/")
            source = store.key_uri(key)
            size = int(fs.info(path).get("size") or 0)
            if size > REPORT_BYTES:  # not read at all: said by its size (its name and size are its digest)
                digest = hashlib.sha256(f"{source}\0{size}".encode()).hexdigest()
                reports.append(Report(source, digest, error=f"{source}: {size} bytes, more than "
                                      f"the {REPORT_BYTES} a report may hold"))
                continue
            reports.append(read_report(source, store.read(key)))
    except StorageError as e:
        return [], str(e)
    except Exception as e:  # credentials, network: a condition, not a crash of the pod
        return [], str(store.error(e))
    return reports, ""


# --- coverage --------------------------------------------------------------------------

def merge_coverage(parts: Iterable[dict[str, Any]], sections: Iterable[str] = coverage.SECTIONS) -> dict[str, Any]:
    """The sum of `Coverage.to_json()` dicts (each worker's): counts add up, over the
    `sections` the parts carry (every section of a store or summary.json; a WorkerReport's
    COVERAGE_SECTIONS)."""
    out: dict[str, Any] = {"programs": 0, "programs_with_hlo": 0, "programs_pass_sampled": 0}
    summed: dict[str, Counter[str]] = {s: Counter() for s in sections}
    for part in parts:
        for k in ("programs", "programs_with_hlo", "programs_pass_sampled"):
            out[k] += int(part.get(k) or 0)
        for s in summed:
            summed[s].update({str(k): int(v) for k, v in (part.get(s) or {}).items()})
    for s, c in summed.items():
        out[s] = dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def worker_reports(api: Any, namespace: str, campaign: str) -> list[WorkerReport]:
    """The worker reports of `campaign` (`api`: a CustomObjectsApi), every revision's: a
    Job's result and an unreadable report are none."""
    got = api.list_namespaced_custom_object(
        GROUP, VERSION, namespace, REPORT_PLURAL,
        label_selector=f"{CAMPAIGN_LABEL}={label_value(campaign)},{REPORT_LABEL}=true")
    items = (got.get("items") if isinstance(got, dict) else None) or []
    reports = [report_from_object(o) for o in items if (o.get("spec") or {}).get("campaign") == campaign]
    return sorted((r for r in reports if r is not None), key=lambda r: (r.worker, r.revision))


def report_coverage(reports: Iterable[WorkerReport]) -> dict[str, Any]:
    """What the workers' reports say they covered, summed over workers (each report is one
    worker's, in one campaign revision), and which reports said (`workers`)."""
    said = [r for r in reports if r.coverage.get("programs")]
    return {**merge_coverage((r.coverage for r in said), COVERAGE_SECTIONS),
            "workers": [f"workerreport/{r.worker}" + (f"@{r.revision}" if r.revision else "") for r in said]}


def _worker_coverage(folder: Path) -> dict[str, Any] | None:
    """A worker folder's coverage: its store (live), else its summary.json."""
    db, summary = folder / "campaign.sqlite", folder / "summary.json"
    if db.is_file():
        return coverage.total(coverage.stored_stats(db)).to_json()
    if summary.is_file():
        found: dict[str, Any] | None = json.loads(summary.read_text()).get("coverage")
        return found
    return None


def campaign_coverage(campaign: str, pvc: bool, bucket: str | None,
                      root: Path = ARTIFACTS_ROOT,
                      reports: Callable[[], list[WorkerReport]] | None = None) -> dict[str, Any]:
    """What the workers of `campaign` covered, summed: from their folders on the artifacts
    PVC (mounted at `root`) and their summary.json under `bucket`; where these hold none,
    from the campaign's WorkerReports (`reports`, called only then). `workers`: which
    said; `problems`: the sources that could not be read (a worker's unreadable store, a
    bucket without credentials, an API server refusal); `note` when nothing is covered yet."""
    parts: list[dict[str, Any]] = []
    workers: list[str] = []
    problems: list[str] = []
    if pvc and (root / campaign).is_dir():
        for folder in sorted(p for p in (root / campaign).iterdir() if p.is_dir()):
            try:
                got = _worker_coverage(folder)
            except Exception as e:  # sqlite3.Error, OSError, bad JSON: said, not a crash
                problems.append(f"{folder}: {type(e).__name__}: {e}")
                continue
            if got is not None:
                parts.append(got)
                workers.append(str(folder))
    if bucket:
        store = ObjectStore(join(bucket, campaign))
        try:
            for key in store.find("*/summary.json"):
                if key.startswith(f"{REPORTS_PREFIX}/"):
                    continue
                try:
                    got = json.loads(store.read(key)).get("coverage")
                except ValueError as e:
                    problems.append(f"{store.key_uri(key)}: {e}")
                    continue
                if isinstance(got, dict):
                    parts.append(got)
                    workers.append(store.key_uri(key))
        except StorageError as e:
            problems.append(str(e))
        except Exception as e:
            problems.append(str(store.error(e)))
    out = {**merge_coverage(parts), "workers": workers, "problems": problems}
    if not out["programs"] and reports is not None:
        try:
            out = {**report_coverage(reports()), "problems": problems}
        except Exception as e:  # ApiException (a Role without list), connection: said, not a crash
            status = getattr(e, "status", None)
            problems.append(f"workerreports: HTTP {status} {getattr(e, 'reason', '')}" if status
                            else f"workerreports: {type(e).__name__}: {e}")
    if not out["programs"]:
        where = " and ".join(filter(None, [f"{root / campaign}/*/campaign.sqlite" if pvc else "",
                                           f"{join(bucket, campaign)}/*/summary.json" if bucket else "",
                                           "its WorkerReports" if reports is not None else ""]))
        out["note"] = (f"no worker of campaign {campaign} has reported coverage yet ({where or 'no artifacts PVC or bucket'}): "
                       "no gaps to fill")
    return out
