"""Alert workflows of a BugSignature: send the alert it is owed (signatures.due_alert,
due_resolve) to the webhook its campaign names, record it, retry what failed.

Delivery itself (HTTP, retries, pacing per receiver) is alerting.py's; what an alert says
is signatures.alerts'.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

import kopf
from xla_sentinel.cluster.report import label_value
from xla_sentinel.spec.campaign import API_VERSION

from . import alerting, desired, signatures
from .kube import ApiError, path
from .runtime import Runtime, campaign_ref, log, now_text

# kopf's `campaigns` index: (namespace, campaign label value) -> campaign bodies.
CampaignIndex = Mapping[tuple[str, str], Collection[Any]]


def routing_campaign(rt: Runtime, namespace: str, names: list[str],
                     campaigns: CampaignIndex) -> desired.Campaign | None:
    """The first campaign of a signature that still exists: its alert route is used."""
    for name in names:
        found = list(campaigns.get((namespace, label_value(name)), []))
        if found:
            return rt.campaign(found[0])
    return None


async def maybe_alert(rt: Runtime, c: desired.Campaign, sig: dict[str, Any]) -> None:
    """Send the alert this signature is owed (firing, or resolving once it is fixed), once;
    retryable failures and throttled alerts are left for the retry timer."""
    spec, status = sig.get("spec") or {}, sig.get("status") or {}
    key = signatures.due_alert(spec, status)
    resolve = signatures.due_resolve(spec, status) if key is None else None
    if key is None and resolve is None:
        return
    ns, name = sig["metadata"]["namespace"], sig["metadata"]["name"]
    ref = c.spec.alerts.webhookSecretRef
    sig_status = path(API_VERSION, "bugsignatures", ns, name, "status")
    cfg = rt.config.alerting
    outcome = alerting.Delivery.SENT
    if ref is not None:
        secret = await rt.api.get(path("v1", "secrets", ns, ref.name))
        url = alerting.secret_value(secret, ref.key) if secret else None
        problem = (f"Secret {ref.name} does not exist" if secret is None
                   else alerting.url_problem(url))
        if problem is not None:
            await webhook_invalid(rt, c, sig, f"webhook URL in Secret {ref.name}, key "
                                              f"{ref.key}: {problem}")
            return
        body = signatures.alerts(sig, key or str(resolve), now=datetime.now(UTC),
                                 external_url=cfg.external_url, resolved=key is None)
        outcome = await alerting.post_alerts(url, body, attempts=cfg.attempts,
                                             backoff=cfg.backoff, limiter=rt.limiter)
        if outcome in (alerting.Delivery.FAILED, alerting.Delivery.THROTTLED):
            if outcome is alerting.Delivery.FAILED:
                rt.metrics.alert_failures.inc()
            log.error(f"alert.{outcome.value}", campaign=c.name, namespace=ns,
                      signature=spec.get("signature"), key=key or resolve)
            return
    if resolve is not None:
        await rt.api.patch(sig_status, {"status": {"resolvedKey": resolve}})
        log.info("alert.resolved", campaign=c.name, namespace=ns,
                 signature=spec.get("signature"), key=resolve, outcome=outcome.value)
        return
    sent = now_text()
    update: dict[str, Any] = {"alertKey": key, "lastAlertTime": sent, "alertError": None}
    if outcome is alerting.Delivery.REJECTED:
        # Never retried: the receiver refuses this message; the error is kept for people.
        rt.metrics.alert_failures.inc()
        update["alertError"] = f"rejected by the receiver ({sent})"
    else:
        rt.metrics.alerts_sent.labels(str(key).split("-")[0]).inc()
    await rt.api.patch(sig_status, {"status": update})
    try:
        await rt.api.patch(path(API_VERSION, "fuzzcampaigns", ns, c.name, "status"),
                           {"status": {"lastAlertTime": sent}})
    except ApiError as e:
        if e.status != 404:  # the campaign may be gone; the signature outlives it
            raise
    log.warning("alert.sent", campaign=c.name, namespace=ns, signature=spec.get("signature"),
                key=key, webhook=ref is not None, outcome=outcome.value)


async def webhook_invalid(rt: Runtime, c: desired.Campaign, sig: dict[str, Any],
                          error: str) -> None:
    """A person's Secret holds no usable URL: say so on the signature and, once per
    distinct error, in a Warning Event; the retry timer tries again after a fix."""
    ns, name = sig["metadata"]["namespace"], sig["metadata"]["name"]
    rt.metrics.alert_failures.inc()
    log.error("alert.webhook_invalid", campaign=c.name, namespace=ns, signature=name, error=error)
    if (sig.get("status") or {}).get("alertError") == error:
        return
    await rt.api.patch(path(API_VERSION, "bugsignatures", ns, name, "status"),
                       {"status": {"alertError": error}})
    kopf.event(campaign_ref(c), type="Warning", reason="AlertWebhookInvalid",
               message=f"{error}; alerts for {name} wait until it is fixed")


async def retry(rt: Runtime, namespace: str, name: str, spec: dict[str, Any],
                status: dict[str, Any], campaigns: CampaignIndex) -> None:
    """The retry timer of one BugSignature: send an alert still owed (failed, throttled, or
    waiting on a fixed webhook Secret), routed by a campaign that still exists."""
    if signatures.due_alert(spec, status) is None and signatures.due_resolve(spec, status) is None:
        return
    c = routing_campaign(rt, namespace, list(status.get("campaigns") or []), campaigns)
    if c is None:
        return
    async with rt.lock(namespace, name.removeprefix("sig-")):
        sig = await rt.api.get(path(API_VERSION, "bugsignatures", namespace, name))
        if sig is not None:
            await maybe_alert(rt, c, sig)
