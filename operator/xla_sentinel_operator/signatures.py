"""Pure dedup of worker findings into BugSignature records, and the alert rules.

Counts are idempotent: a BugSignature keeps, per campaign worker, the cumulative count that
worker reported (`status.hits`), and `count` is their sum; re-reading a report sets the same
values again. Alerts are keyed (`new`, `regressed-N`): one alert per key, notified once,
which is re-sent (same labels) while the bug is open and resolved when it is fixed.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from xla_sentinel.cluster.report import SignatureEntry, label_value
from xla_sentinel.spec.campaign import API_VERSION

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
                  versions: dict[str, str] | None = None) -> dict[str, Any]:
    """The BugSignature to create when a signature is seen for the first time."""
    sample = entry.samples[0] if entry.samples else {}
    spec: dict[str, Any] = {"signature": signature, "verdict": entry.verdict, "state": "new",
                            # Every configuration the bug shows in: the grouped signature's
                            # list, and the samples' targets (reports written before it).
                            "targets": sorted({*entry.configurations,
                                               *(str(s["target"]) for s in entry.samples
                                                 if s.get("target"))}),
                            "teams": list(c.spec.alerts.teams)}
    for field, key in (("culpritOp", "culprit_op"), ("culpritPass", "culprit_pass"),
                       ("fusionKind", "fusion_kind"), ("dtype", "dtype")):
        if sample.get(key):
            spec[field] = str(sample[key])
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


def hits_update(status: dict[str, Any], campaign: str, worker: str,
                entry: SignatureEntry, revision: str = "") -> dict[str, Any] | None:
    """The status fields to write after `worker` reported `entry`; None when nothing changed."""
    hits = dict(status.get("hits") or {})
    key = hit_key(campaign, worker, revision)
    if hits.get(key) == entry.count:
        return None
    hits[key] = entry.count
    campaigns = sorted(set(status.get("campaigns") or []) | {campaign})
    first = min(filter(None, [status.get("firstSeen"), entry.first_seen]), default=None)
    last = max(filter(None, [status.get("lastSeen"), entry.last_seen]), default=None)
    update: dict[str, Any] = {"hits": hits, "count": sum(hits.values()), "campaigns": campaigns}
    if first:
        update["firstSeen"] = first
    if last:
        update["lastSeen"] = last
    return update


def version_key(text: str | None) -> tuple[Any, ...] | None:
    """An orderable form of a version ("0.10.2", "0.10.3.dev20261201"); None if unreadable."""
    from packaging.version import InvalidVersion, Version

    try:
        return (Version(str(text)),)
    except InvalidVersion:
        return None


def at_or_after(version: str | None, fixed_in: str) -> bool:
    """Whether a hit on `version` (the runner's jaxlib) counts against a fix in `fixed_in`.
    A version that cannot be read counts: a silent miss is worse than a loud alert."""
    seen, fixed = version_key(version), version_key(fixed_in)
    return seen is None or fixed is None or seen >= fixed


def regressed(spec: dict[str, Any], status: dict[str, Any], versions: dict[str, str] | None) -> bool:
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


SEEN_ON_MAX = 20  # version combinations kept per signature (the most recently seen)


def seen_on(previous: list[dict[str, Any]] | None, versions: dict[str, str] | None,
            when: str) -> list[dict[str, Any]] | None:
    """status.seenOn after a hit on `versions` (jax, jaxlib, image) at `when`; None when
    nothing changes."""
    if not versions:
        return None
    key = {k: str(versions[k]) for k in ("jax", "jaxlib", "image") if versions.get(k)}
    out = [dict(e) for e in previous or []]
    for e in out:
        if {k: e.get(k) for k in ("jax", "jaxlib", "image") if e.get(k)} == key:
            if e.get("lastSeen", "") >= when:
                return None
            e["lastSeen"] = when
            break
    else:
        out.append({**key, "firstSeen": when, "lastSeen": when})
    out.sort(key=lambda e: e.get("lastSeen", ""))
    return out[-SEEN_ON_MAX:]


def to_verify(items: list[dict[str, Any]], campaign: str) -> list[dict[str, Any]]:
    """The signatures a campaign's new runner image should be checked against: the fixed
    ones it has hit that have a repro bundle."""
    return [s for s in items if (s.get("spec") or {}).get("state") == "fixed"
            and (s.get("spec") or {}).get("repro")
            and campaign in ((s.get("status") or {}).get("campaigns") or [])]


def verification_owed(spec: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether writing status `after` over `before` owes the fix verification that marking
    the signature fixed could not start: it is fixed, has a repro bundle, and lists its
    first campaign now (marked fixed while it listed none, followups.mark_fixed had no
    campaign to run the Job on). True until that write succeeds; the Job's name is fixed by
    campaign, signature, image and version, so a repeated start creates nothing."""
    return (spec.get("state") == "fixed" and bool(spec.get("repro"))
            and not before.get("campaigns") and bool(after.get("campaigns")))


def bisection_status(result: dict[str, Any], job: str) -> dict[str, Any]:
    """What a bisector Job found, as BugSignature status.bisection."""
    out = {"status": str(result.get("status") or "unknown"), "job": job,
           "finding": str(result.get("finding") or ""), "time": str(result.get("time") or "")}
    for field, key in (("culpritOp", "culprit_op"), ("fusionKind", "fusion_kind"),
                       ("culpritPass", "culprit_pass"), ("repro", "repro"),
                       ("refinedSignature", "signature"), ("error", "error"),
                       # A version bisection of the finding (spec.bisect.versions).
                       ("introducedIn", "introducedIn"), ("lastGood", "lastGood"),
                       ("versionRange", "versionRange"), ("versionStatus", "versionStatus"),
                       ("versionError", "versionError")):
        if result.get(key):
            out[field] = str(result[key])[:1000]
    for field, key in (("reducedOps", "reduced_ops"), ("originalOps", "original_ops")):
        if isinstance(result.get(key), int):
            out[field] = result[key]
    return out


def culprit_spec(result: dict[str, Any]) -> dict[str, Any]:
    """The spec fields a localized bisection fills in (as local refinement does)."""
    return {field: str(result[key]) for field, key in
            (("culpritOp", "culprit_op"), ("fusionKind", "fusion_kind"),
             ("culpritPass", "culprit_pass"), ("repro", "repro")) if result.get(key)}


def refined_signature(candidate: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The BugSignature a bisection refines a candidate into, when none exists yet: the
    candidate's spec with the culprit filled in, a new id."""
    meta, spec = candidate["metadata"], dict(candidate.get("spec") or {})
    refined = str(result["signature"])
    spec.update({"signature": refined, "state": "new", **culprit_spec(result)})
    spec.pop("fixedIn", None)
    labels = {**(meta.get("labels") or {}), SIGNATURE_LABEL: label_value(refined)}
    return {"apiVersion": API_VERSION, "kind": "BugSignature",
            "metadata": {"name": signature_name(refined), "namespace": meta["namespace"],
                         "labels": labels},
            "spec": spec}


def guarded(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`patch` with the resourceVersion of `obj` it was computed from: the API server
    refuses it (409) if the object changed since, instead of losing that change."""
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return {**patch, "metadata": {"resourceVersion": rv}} if rv else dict(patch)


def due_alert(spec: dict[str, Any], status: dict[str, Any]) -> str | None:
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


def due_resolve(spec: dict[str, Any], status: dict[str, Any]) -> str | None:
    """The alert key to resolve: the last one sent, once people marked the bug fixed."""
    key = status.get("alertKey")
    if spec.get("state") != "fixed" or not key or status.get("resolvedKey") == key:
        return None
    return str(key)


def resend_key(spec: dict[str, Any], status: dict[str, Any]) -> str | None:
    """The alert key to send again: the last one sent, while the bug is open (new, triaged
    or regressed: anything but fixed) and that key was not resolved."""
    key = status.get("alertKey")
    if not key or spec.get("state") == "fixed" or status.get("resolvedKey") == key:
        return None
    return str(key)



def alert_labels(sig: dict[str, Any], key: str) -> dict[str, str]:
    """The labels of a signature's alert for `key`: what Alertmanager identifies it by. The
    ones first sent (status.alertLabels) are reused while the key is the same, so a culprit
    op a bisection fills in later, or an edited team list, does not make the re-sent or the
    resolving alert a different alert."""
    spec, status, meta = sig.get("spec") or {}, sig.get("status") or {}, sig["metadata"]
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


def alerts(sig: dict[str, Any], key: str, *, now: datetime, external_url: str = "",
           resolved: bool = False, hold: timedelta = DEFAULT_HOLD) -> list[dict[str, Any]]:
    """The Alertmanager v2 postable alerts (`POST /api/v2/alerts` takes this array) for one
    signature and alert key: firing until `now + hold` (sent again before then while the
    bug is open), or resolved (endsAt = now). The labels are alert_labels(), the same for
    every send of a key; annotations follow the signature as it is now."""
    spec, status = sig.get("spec") or {}, sig.get("status") or {}
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
    bisection = status.get("bisection") or {}
    for name, value in (("culprit_pass", spec.get("culpritPass")),
                        ("fusion_kind", spec.get("fusionKind")),
                        ("reduced_ops", bisection.get("reducedOps")),
                        ("fixed_in", spec.get("fixedIn")),
                        ("seen_on", ",".join(sorted({str(e.get("jaxlib")) for e in
                                                     status.get("seenOn") or [] if e.get("jaxlib")})))):
        if value not in (None, ""):
            annotations[name] = str(value)
    seen = status.get("lastSeen") if reason == "regressed" else status.get("firstSeen")
    starts = min(parse_time(seen) or now, now)
    alert: dict[str, Any] = {"labels": labels, "annotations": annotations,
                             "startsAt": rfc3339(starts),
                             "endsAt": rfc3339(now if resolved else now + hold)}
    if external_url:
        alert["generatorURL"] = external_url
    return [alert]
