"""Pure dedup of worker findings into BugSignature records, and the alert rules.

Counts are idempotent: a BugSignature keeps, per campaign worker, the cumulative count that
worker reported (`status.hits`), and `count` is their sum; re-reading a report sets the same
values again. Alerts are keyed (`new`, `regressed-N`): one alert per key, notified once,
which is re-sent (same labels) while the bug is open and resolved when it is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import cast

from packaging.version import InvalidVersion, Version
from xla_sentinel.cluster.report import SignatureEntry, label_value
from xla_sentinel.spec.campaign import API_VERSION

from .bodies import (
    Alert,
    Bisection,
    BisectionResult,
    BugSignature,
    BugSignatureSpec,
    BugSignatureStatus,
    SeenOn,
    SignaturePatch,
    labels_of,
    sig_spec,
    sig_status,
)
from .config import AlertingConfig
from .desired import SIGNATURE_LABEL, Campaign, artifact_path
from .timestamps import parse_time, rfc3339

TEAM_LABEL_PREFIX = "xlasentinel.dev/team-"


def team_label(team: str) -> str:
    """The label key marking a team's signatures; its name part is a label value too."""
    return TEAM_LABEL_PREFIX.removesuffix("team-") + label_value(f"team-{team}")


def signature_name(signature: str) -> str:
    return f"sig-{signature}"


def hit_key(campaign: str, worker: str, revision: str = "") -> str:
    """Whose count a hit is: one worker of one campaign revision (a new revision counts
    afresh, so its hits add to the old revision's instead of replacing them)."""
    return f"{campaign}/{revision}/{worker}" if revision else f"{campaign}/{worker}"


def new_signature(c: Campaign, worker: str, signature: str, entry: SignatureEntry,
                  versions: dict[str, str] | None = None) -> BugSignature:
    """The BugSignature to create when a signature is seen for the first time."""
    sample = entry.samples[0] if entry.samples else {}
    spec: BugSignatureSpec = {"signature": signature, "verdict": entry.verdict, "state": "new",
                            # Every configuration the bug shows in: the grouped signature's
                            # list, and the samples' targets (reports written before it).
                            "targets": sorted({*entry.configurations,
                                               *(str(s["target"]) for s in entry.samples
                                                 if s.get("target"))}),
                            "teams": list(c.spec.alerts.teams)}
    if sample.get("culprit_op"):
        spec["culpritOp"] = str(sample["culprit_op"])
    if sample.get("culprit_pass"):
        spec["culpritPass"] = str(sample["culprit_pass"])
    if sample.get("fusion_kind"):
        spec["fusionKind"] = str(sample["fusion_kind"])
    if sample.get("dtype"):
        spec["dtype"] = str(sample["dtype"])
    if versions:
        spec["versions"] = dict(versions)
    if sample.get("dir"):
        spec["repro"] = artifact_path(c, worker, str(sample["dir"]))
    labels = {SIGNATURE_LABEL: label_value(signature),
              **{team_label(t): "true" for t in c.spec.alerts.teams}}
    return {"apiVersion": API_VERSION, "kind": "BugSignature",
            "metadata": {"name": signature_name(signature), "namespace": c.namespace,
                         "labels": labels},
            "spec": spec}


# Per-worker hit counts kept on one signature (about 60 bytes each: 30 KB, far below
# etcd's 1.5 MiB object limit, past which the status could never be written again). A
# common bug hit by thousands of workers over many revisions keeps the newest; the counts
# of those let go add to status.hitsRetired, so status.count stays the total.
HITS_MAX = 500


def _revision_of(key: str) -> str | None:
    parts = key.split("/")
    return parts[1] if len(parts) == 3 else None


def bounded_hits(hits: dict[str, int], retired: int, keep: str, campaign: str,
                 current: str | None, limit: int = HITS_MAX) -> tuple[dict[str, int], int, list[str]]:
    """`hits` cut to `limit` keys: first those of `campaign`'s older revisions (their
    workers are gone and write no more), then the smallest counts; never `keep` (the key
    just written) nor a bisected finding's (`bisect/...`, the key that keeps it counted
    once). (hits, retired, the keys let go)."""
    if len(hits) <= limit:
        return hits, retired, []
    prefix = f"{campaign}/"

    def order(key: str) -> tuple[int, int, str]:
        old = key.startswith(prefix) and _revision_of(key) not in (None, current)
        return (0 if old else 1, hits[key], key)

    candidates = sorted((k for k in hits if k != keep and not k.startswith("bisect/")), key=order)
    gone = candidates[:len(hits) - limit]
    out = {k: v for k, v in hits.items() if k not in set(gone)}
    return out, retired + sum(hits[k] for k in gone), gone


def hits_update(status: BugSignatureStatus, campaign: str, worker: str,
                entry: SignatureEntry, revision: str = "",
                current: str | None = None) -> BugSignatureStatus | None:
    """The status fields to write after `worker` reported `entry` (of campaign revision
    `revision`; `current`: the campaign's revision now); None when nothing changed. The
    hits are bounded (bounded_hits): a key let go is written as null (a merge patch keeps
    a key it does not name), and a report of an older revision whose key was let go is not
    counted again."""
    hits = dict(status.get("hits") or {})
    retired = int(status.get("hitsRetired") or 0)
    key = hit_key(campaign, worker, revision)
    if hits.get(key) == entry.count:
        return None
    if key not in hits and retired and current is not None and revision not in ("", current):
        return None  # an older revision's worker, most likely counted and let go already
    hits[key] = entry.count
    hits, retired, gone = bounded_hits(hits, retired, key, campaign, current)
    campaigns = sorted(set(status.get("campaigns") or []) | {campaign})
    first = min(filter(None, [status.get("firstSeen"), entry.first_seen]), default=None)
    last = max(filter(None, [status.get("lastSeen"), entry.last_seen]), default=None)
    written: dict[str, int | None] = {**hits, **dict.fromkeys(gone)}
    update: BugSignatureStatus = {"hits": cast(dict[str, int], written),
                                  "count": retired + sum(hits.values()),
                                  "campaigns": campaigns}
    if gone:
        update["hitsRetired"] = retired
    if first:
        update["firstSeen"] = first
    if last:
        update["lastSeen"] = last
    return update


def version_key(text: str | None) -> tuple[Version] | None:
    """An orderable form of a version ("0.10.2", "0.10.3.dev20261201"); None if unreadable."""
    try:
        return (Version(str(text)),)
    except InvalidVersion:
        return None


def at_or_after(version: str | None, fixed_in: str) -> bool:
    """Whether a hit on `version` (the runner's jaxlib) counts against a fix in `fixed_in`.
    A version that cannot be read counts: a silent miss is worse than a loud alert."""
    seen, fixed = version_key(version), version_key(fixed_in)
    return seen is None or fixed is None or seen >= fixed


def regressed(spec: BugSignatureSpec, status: BugSignatureStatus,
              versions: Mapping[str, str] | None) -> bool:
    """A new hit, seen on `versions`, of a bug marked fixed: a regression when the runner's
    jaxlib is the fixing version (`spec.fixedIn`) or later, or when no version was given.
    A hit on an older jaxlib is the bug the fix is known not to have reached: counted only."""
    state = spec.get("state")
    # `regressed` with fixedAt still set: the state was written, then the status write lost
    # a conflict; the regression is still to be recorded.
    if state != "fixed" and not (state == "regressed" and status.get("fixedAt")):
        return False
    fixed_in = spec.get("fixedIn")
    return not fixed_in or at_or_after((versions or {}).get("jaxlib"), str(fixed_in))


def regression(sig: BugSignature) -> BugSignatureStatus:
    """The status fields that record a regression of `sig`: one more, not fixed any more,
    and the state regressed at the spec's generation (bodies.sig_spec). Status only: the
    spec is people's (or their GitOps tool's), and a write there would fight it."""
    status = sig_status(sig)
    update: BugSignatureStatus = {"regressions": int(status.get("regressions") or 0) + 1,
                                  "fixedAt": None, "state": "regressed"}
    generation = sig["metadata"].get("generation")
    if generation is not None:
        update["regressedGeneration"] = int(generation)
    return update


SEEN_ON_MAX = 20  # version combinations kept per signature (the most recently seen)


def _versions_key(e: Mapping[str, object]) -> dict[str, str]:
    return {k: str(e[k]) for k in ("jax", "jaxlib", "image") if e.get(k)}


def seen_on(previous: list[SeenOn] | None, versions: Mapping[str, str] | None,
            when: str) -> list[SeenOn] | None:
    """status.seenOn after a hit on `versions` (jax, jaxlib, image) at `when`; None when
    nothing changes."""
    if not versions:
        return None
    key = _versions_key(versions)
    out: list[SeenOn] = [SeenOn(**e) for e in previous or []]
    for e in out:
        if _versions_key(e) == key:
            if e.get("lastSeen", "") >= when:
                return None
            e["lastSeen"] = when
            break
    else:
        # The keys of _versions_key are SeenOn's jax, jaxlib and image.
        out.append(cast(SeenOn, {**key, "firstSeen": when, "lastSeen": when}))
    out.sort(key=lambda e: e.get("lastSeen", ""))
    return out[-SEEN_ON_MAX:]


def to_verify(items: list[BugSignature], campaign: str) -> list[BugSignature]:
    """The signatures a campaign's new runner image should be checked against: the fixed
    ones it has hit that have a repro bundle."""
    return [s for s in items if sig_spec(s).get("state") == "fixed" and sig_spec(s).get("repro")
            and campaign in (sig_status(s).get("campaigns") or [])]


def verification_owed(spec: BugSignatureSpec, before: BugSignatureStatus,
                      after: BugSignatureStatus) -> bool:
    """Whether writing status `after` over `before` owes the fix verification that marking
    the signature fixed could not start: it is fixed, has a repro bundle, and lists its
    first campaign now (marked fixed while it listed none, followups.mark_fixed had no
    campaign to run the Job on). True until that write succeeds; the Job's name is fixed by
    campaign, signature, image and version, so a repeated start creates nothing."""
    return (spec.get("state") == "fixed" and bool(spec.get("repro"))
            and not before.get("campaigns") and bool(after.get("campaigns")))


# status.bisection's text fields from a bisector's result, by result key; version* are a
# version bisection of the finding (spec.bisect.versions).
_BISECTION_TEXT = (("culpritOp", "culprit_op"), ("fusionKind", "fusion_kind"),
                   ("culpritPass", "culprit_pass"), ("repro", "repro"),
                   ("refinedSignature", "signature"), ("error", "error"),
                   ("introducedIn", "introducedIn"), ("lastGood", "lastGood"),
                   ("versionRange", "versionRange"), ("versionStatus", "versionStatus"),
                   ("versionError", "versionError"))
_BISECTION_COUNTS = (("reducedOps", "reduced_ops"), ("originalOps", "original_ops"))
# The spec fields a localized bisection fills in, by result key.
_CULPRIT_FIELDS = (("culpritOp", "culprit_op"), ("fusionKind", "fusion_kind"),
                   ("culpritPass", "culprit_pass"), ("repro", "repro"))


def bisection_status(result: BisectionResult, job: str) -> Bisection:
    """What a bisector Job found, as BugSignature status.bisection."""
    raw: Mapping[str, object] = result
    out: dict[str, object] = {
        "status": str(raw.get("status") or "unknown"), "job": job,
        "finding": str(raw.get("finding") or ""), "time": str(raw.get("time") or "")}
    for field, key in _BISECTION_TEXT:
        if raw.get(key):
            out[field] = str(raw[key])[:1000]
    for field, key in _BISECTION_COUNTS:
        if isinstance(raw.get(key), int):
            out[field] = raw[key]
    # Keys and value types are _BISECTION_TEXT's and _BISECTION_COUNTS', Bisection's fields.
    return cast(Bisection, out)


def culprit_spec(result: BisectionResult) -> BugSignatureSpec:
    """The spec fields a localized bisection fills in (as local refinement does)."""
    raw: Mapping[str, object] = result
    # Keys are _CULPRIT_FIELDS', all text fields of BugSignatureSpec.
    return cast(BugSignatureSpec, {field: str(raw[key]) for field, key in _CULPRIT_FIELDS
                                   if raw.get(key)})


def refined_signature(candidate: BugSignature, result: BisectionResult) -> BugSignature:
    """The BugSignature a bisection refines a candidate into, when none exists yet: the
    candidate's spec with the culprit filled in, a new id."""
    meta, spec = candidate["metadata"], BugSignatureSpec(**sig_spec(candidate))
    refined = str(result["signature"])
    spec.update({"signature": refined, "state": "new", **culprit_spec(result)})
    spec.pop("fixedIn", None)
    labels = {**labels_of(candidate), SIGNATURE_LABEL: label_value(refined)}
    return {"apiVersion": API_VERSION, "kind": "BugSignature",
            "metadata": {"name": signature_name(refined), "namespace": meta["namespace"],
                         "labels": labels},
            "spec": spec}


def guarded(obj: BugSignature, patch: SignaturePatch) -> SignaturePatch:
    """`patch` with the resourceVersion of `obj` it was computed from: the API server
    refuses it (409) if the object changed since, instead of losing that change."""
    rv = obj["metadata"].get("resourceVersion")
    return {**patch, "metadata": {"resourceVersion": rv}} if rv else SignaturePatch(**patch)


def due_alert(spec: BugSignatureSpec, status: BugSignatureStatus) -> str | None:
    """The alert key owed for this signature, or None when no alert is owed."""
    state = spec.get("state") or "new"
    if state == "new":
        key = "new"
    elif state == "regressed":
        key = f"regressed-{int(status.get('regressions') or 0)}"
    else:
        return None  # triaged or fixed: people know
    return None if status.get("alertKey") == key else key


# A firing alert is sent again every `resend_interval` while its bug is open (Alertmanager's
# client contract: an alert that is not re-sent is resolved at its endsAt, and one that
# Alertmanager lost in a restart is back at the next re-send). Each send ends it this many
# intervals later, so a missed re-send or two (an operator restart) does not resolve it,
# while an operator gone for longer does not leave it firing forever.
RESEND_HOLD = 4
DEFAULT_HOLD = timedelta(seconds=AlertingConfig.resend_interval * RESEND_HOLD)


def due_resolve(spec: BugSignatureSpec, status: BugSignatureStatus) -> str | None:
    """The alert key to resolve: the last one sent, once people marked the bug fixed."""
    key = status.get("alertKey")
    if spec.get("state") != "fixed" or not key or status.get("resolvedKey") == key:
        return None
    return str(key)


def resend_key(spec: BugSignatureSpec, status: BugSignatureStatus) -> str | None:
    """The alert key to send again: the last one sent, while the bug is open (new, triaged
    or regressed: anything but fixed) and that key was not resolved."""
    key = status.get("alertKey")
    if not key or spec.get("state") == "fixed" or status.get("resolvedKey") == key:
        return None
    return str(key)



def alert_labels(sig: BugSignature, key: str) -> dict[str, str]:
    """The labels of a signature's alert for `key`: what Alertmanager identifies it by. The
    ones first sent (status.alertLabels) are reused while the key is the same, so a culprit
    op a bisection fills in later, or an edited team list, does not make the re-sent or the
    resolving alert a different alert."""
    spec, status, meta = sig_spec(sig), sig_status(sig), sig["metadata"]
    stored = status.get("alertLabels")
    if isinstance(stored, dict) and stored.get("alert_key") == key:
        return {str(k): str(v) for k, v in stored.items()}
    reason = "regressed" if key.startswith("regressed") else "new"
    labels = {
        "alertname": "XlaSentinelBugSignature",
        "signature": spec.get("signature", ""),
        "verdict": spec.get("verdict", ""),
        "reason": reason,
        "alert_key": key,
        "namespace": meta.get("namespace", ""),
        "severity": "critical" if reason == "regressed" else "warning",
    }
    if spec.get("culpritOp"):
        labels["culprit_op"] = spec["culpritOp"]
    if spec.get("teams"):
        labels["team"] = ",".join(spec["teams"])
    return labels


def alerts(sig: BugSignature, key: str, *, now: datetime, external_url: str = "",
           resolved: bool = False, hold: timedelta = DEFAULT_HOLD) -> list[Alert]:
    """The Alertmanager v2 postable alerts (`POST /api/v2/alerts` takes this array) for one
    signature and alert key: firing until `now + hold` (sent again before then while the
    bug is open), or resolved (endsAt = now). The labels are alert_labels(), the same for
    every send of a key; annotations follow the signature as it is now."""
    spec, status = sig_spec(sig), sig_status(sig)
    labels = alert_labels(sig, key)
    reason = labels.get("reason", "new")
    annotations = {
        "summary": f"{reason} XLA bug {spec.get('signature')}: {spec.get('verdict')}"
                   f" in {spec.get('culpritOp') or 'unknown op'}",
        "description": (f"count={status.get('count', 0)} campaigns="
                        f"{','.join(status.get('campaigns') or [])} "
                        f"curing pass={spec.get('culpritPass') or 'unknown'}"),
        "repro": spec.get("repro", ""),
    }
    # What the bisector found: the fields a person triages by, in the alert itself.
    bisection: Mapping[str, object] = status.get("bisection") or {}
    jaxlibs = sorted({str(e.get("jaxlib")) for e in status.get("seenOn") or [] if e.get("jaxlib")})
    annotated: tuple[tuple[str, object], ...] = (
        ("culprit_pass", spec.get("culpritPass")), ("fusion_kind", spec.get("fusionKind")),
        ("reduced_ops", bisection.get("reducedOps")), ("fixed_in", spec.get("fixedIn")),
        ("seen_on", ",".join(jaxlibs)))
    for name, value in annotated:
        if value not in (None, ""):
            annotations[name] = str(value)
    seen = status.get("lastSeen") if reason == "regressed" else status.get("firstSeen")
    starts = min(parse_time(seen) or now, now)
    alert: Alert = {"labels": labels, "annotations": annotations,

                             "startsAt": rfc3339(starts),
                             "endsAt": rfc3339(now if resolved else now + hold)}
    if external_url:
        alert["generatorURL"] = external_url
    return [alert]
