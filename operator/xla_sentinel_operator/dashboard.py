"""The triage page of a namespace: its BugSignatures and FuzzCampaigns, rendered by the same
builder as `xla-sentinel report --html` (xla_sentinel.report.html, no jax). `namespace_page`
is pure (objects in, records out); `render` reads the objects from the API, read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from xla_sentinel.report.html import (
    CampaignRow,
    Event,
    Page,
    SignatureRow,
    render_page,
    versions_note,
)
from xla_sentinel.spec.campaign import API_VERSION

from .bodies import Bisection, BugSignature, FuzzCampaign, Verification, sig_spec, sig_status
from .kube import Kube, path


def _parse(text: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def signature_row(obj: BugSignature) -> SignatureRow:
    spec, status = sig_spec(obj), sig_status(obj)
    repro = spec.get("repro")
    # A bundle behind a URL can be followed from a browser; a path inside a worker's or
    # bisector's volume cannot, and is shown as text.
    href = repro if isinstance(repro, str) and repro.startswith(("https://", "http://")) else None
    bisection: Bisection | dict[str, str] = status.get("bisection") or {}
    verification: Verification = status.get("verification") or {}
    return SignatureRow(
        id=str(spec.get("signature") or obj["metadata"]["name"]), verdict=str(spec.get("verdict", "")),
        count=int(status.get("count") or 0), first_seen=str(status.get("firstSeen") or ""),
        last_seen=str(status.get("lastSeen") or ""), state=str(spec.get("state") or "new"),
        target=", ".join(spec.get("targets") or []) or None, culprit_op=spec.get("culpritOp"),
        culprit_pass=spec.get("culpritPass"), fusion_kind=spec.get("fusionKind"),
        dtype=spec.get("dtype"), repro=repro, repro_href=href,
        versions=versions_note(bisection.get("introducedIn"), bisection.get("lastGood"),
                               verification.get("result"),
                               # Records from before `jaxlib`: the runner's versions.
                               verification.get("jaxlib") or (verification.get("versions") or {}).get("jaxlib")))


def campaign_row(obj: FuzzCampaign, now: datetime) -> CampaignRow:
    status = obj.get("status") or {}
    workers: Mapping[str, object] = status.get("workers") or {}
    programs = int(status.get("programs") or 0)
    start, end = _parse(status.get("startTime")), _parse(status.get("completionTime")) or now
    seconds = (end - start).total_seconds() if start else 0.0
    return CampaignRow(
        name=obj["metadata"]["name"], phase=str(status.get("phase") or "Pending"), programs=programs,
        findings=int(status.get("findingsTotal") or 0), signatures=int(status.get("signatures") or 0),
        workers=f"{workers.get('active', 0)} active / {workers.get('desired', 0)} desired",
        started=status.get("startTime"), programs_per_s=programs / seconds if seconds > 0 else None)


def namespace_page(namespace: str, signatures: list[BugSignature],
                   campaigns: list[FuzzCampaign], now: datetime) -> Page:
    """The page's records for one namespace's objects."""
    rows = [signature_row(s) for s in signatures]
    camps = sorted((campaign_row(c, now) for c in campaigns), key=lambda c: c.name)
    running = [c.programs_per_s for c in camps if c.phase == "Running" and c.programs_per_s]
    return Page(
        title=f"xla-sentinel: namespace {namespace}",
        source=f"BugSignatures and FuzzCampaigns in namespace {namespace}",
        generated=now.isoformat(timespec="seconds"), signatures=rows,
        # The API keeps counts and first/last seen per signature, not each finding's time:
        # the plot counts new signatures.
        events=[Event(r.first_seen, r.verdict) for r in rows if r.first_seen],
        events_label="new signatures", campaigns=camps,
        throughput=[("programs/s (running campaigns)", f"{sum(running):.3g}"),
                    ("programs", str(sum(c.programs for c in camps))),
                    ("campaigns", str(len(camps)))],
        tables={"Signatures by state": _count(r.state for r in rows),
                "Signatures by verdict": _count(r.verdict for r in rows)})


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


async def render(kube: Kube, namespace: str, watched: list[str]) -> str | None:
    """The page of `namespace`, or None for a namespace this operator does not watch (it
    shows only what it manages; an empty `watched` is the whole cluster)."""
    if watched and namespace not in watched:
        return None
    signatures = await kube.list(path(API_VERSION, "bugsignatures", namespace), BugSignature)
    campaigns = await kube.list(path(API_VERSION, "fuzzcampaigns", namespace), FuzzCampaign)
    return render_page(namespace_page(namespace, signatures, campaigns, datetime.now(UTC)))
