"""Alert workflows of a BugSignature: send the alert it is owed (signatures.due_alert,
due_resolve) to the webhook its campaign names, record it, retry what failed, and send the
firing alerts of open signatures again (signatures.resend_key) before they end.

Delivery itself (HTTP, retries, pacing per receiver) is alerting.py's; what an alert says
is signatures.alerts'.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta

from xla_sentinel.cluster.report import label_value
from xla_sentinel.spec.campaign import API_VERSION

from . import alerting, desired, signatures
from .bodies import (
    Alert,
    BugSignature,
    BugSignatureSpec,
    BugSignatureStatus,
    FuzzCampaign,
    Secret,
    sig_spec,
    sig_status,
)
from .kube import ApiError, path
from .runtime import Runtime, campaign_ref, log, now_text

# kopf's `campaigns` index: (namespace, campaign label value) -> campaign bodies.
CampaignIndex = Mapping[tuple[str, str], Collection[FuzzCampaign]]


def routing_campaign(rt: Runtime, namespace: str, names: list[str],
                     campaigns: CampaignIndex) -> desired.Campaign | None:
    """The first campaign of a signature that still exists: its alert route is used."""
    for name in names:
        found = list(campaigns.get((namespace, label_value(name)), []))
        if found:
            return rt.campaign(found[0])
    return None


def hold(rt: Runtime) -> timedelta:
    """How long a firing alert lasts unless it is sent again."""
    return timedelta(seconds=rt.config.alerting.resend_interval * signatures.RESEND_HOLD)


async def maybe_alert(rt: Runtime, c: desired.Campaign, sig: BugSignature) -> None:
    """Send the alert this signature is owed (firing, or resolving once it is fixed), once;
    retryable failures and throttled alerts are left for the retry loop."""
    spec, status = sig_spec(sig), sig_status(sig)
    key = signatures.due_alert(spec, status)
    resolve = signatures.due_resolve(spec, status) if key is None else None
    if key is None and resolve is None:
        return
    ns, name = sig["metadata"]["namespace"], sig["metadata"]["name"]
    ref = c.spec.alerts.webhookSecretRef
    status_path = path(API_VERSION, "bugsignatures", ns, name, "status")
    cfg = rt.config.alerting
    outcome = alerting.Delivery.SENT
    if ref is not None:
        secret = await rt.api.get(path("v1", "secrets", ns, ref.name), Secret)
        urls = alerting.webhook_urls(alerting.secret_value(secret, ref.key) if secret else None)
        problem = (f"Secret {ref.name} does not exist" if secret is None
                   else alerting.urls_problem(urls))
        if problem is not None:
            await webhook_invalid(rt, c, sig, f"webhook URL in Secret {ref.name}, key "
                                              f"{ref.key}: {problem}")
            return
        if resolve is not None:  # from now on no re-send may fire it again
            rt.resolved.add((ns, name, resolve))
        body = signatures.alerts(sig, key or str(resolve), now=datetime.now(UTC),
                                 external_url=cfg.external_url, resolved=key is None,
                                 hold=hold(rt))
        outcome = await alerting.post_to_all(urls, body, attempts=cfg.attempts,
                                             backoff=cfg.backoff, limiter=rt.limiter)
        if outcome in (alerting.Delivery.FAILED, alerting.Delivery.THROTTLED):
            if outcome is alerting.Delivery.FAILED:
                rt.metrics.alert_failures.inc()
            log.error(f"alert.{outcome.value}", campaign=c.name, namespace=ns,
                      signature=spec.get("signature"), key=key or resolve)
            return
    if resolve is not None:
        await rt.api.patch(status_path, {"status": {"resolvedKey": resolve}})
        log.info("alert.resolved", campaign=c.name, namespace=ns,
                 signature=spec.get("signature"), key=resolve, outcome=outcome.value)
        return
    sent = now_text()
    # The labels it was sent with: its re-sends and its resolution carry the same ones.
    update: BugSignatureStatus = {"alertKey": str(key), "lastAlertTime": sent, "alertError": None,
                                  "alertLabels": signatures.alert_labels(sig, str(key))}
    if ref is not None:
        # Where it went: its re-sends keep going there after the campaigns that found the
        # bug are deleted (nightly or pruned campaigns under GitOps), so an open bug stays
        # firing instead of resolving itself in Alertmanager.
        update["alertRoute"] = {"secretName": ref.name, "secretKey": ref.key}
    if outcome is alerting.Delivery.REJECTED:
        # Never retried: the receiver refuses this message; the error is kept for people.
        rt.metrics.alert_failures.inc()
        update["alertError"] = f"rejected by the receiver ({sent})"
    else:
        rt.metrics.alerts_sent.labels(str(key).split("-")[0]).inc()
    await rt.api.patch(status_path, {"status": update})
    try:
        await rt.api.patch(path(API_VERSION, "fuzzcampaigns", ns, c.name, "status"),
                           {"status": {"lastAlertTime": sent}})
    except ApiError as e:
        if e.status != 404:  # the campaign may be gone; the signature outlives it
            raise
    log.warning("alert.sent", campaign=c.name, namespace=ns, signature=spec.get("signature"),
                key=key, webhook=ref is not None, outcome=outcome.value)


async def webhook_invalid(rt: Runtime, c: desired.Campaign, sig: BugSignature,
                          error: str) -> None:
    """A person's Secret holds no usable URL: say so on the signature and, once per
    distinct error, in a Warning Event; the retry loop tries again after a fix."""
    ns, name = sig["metadata"]["namespace"], sig["metadata"]["name"]
    rt.metrics.alert_failures.inc()
    log.error("alert.webhook_invalid", campaign=c.name, namespace=ns, signature=name, error=error)
    if sig_status(sig).get("alertError") == error:
        return
    await rt.api.patch(path(API_VERSION, "bugsignatures", ns, name, "status"),
                       {"status": {"alertError": error}})
    await rt.event(campaign_ref(c), "Warning", "AlertWebhookInvalid",
                   f"{error}; alerts for {name} wait until it is fixed")


async def retry(rt: Runtime, namespace: str, name: str, spec: BugSignatureSpec,
                status: BugSignatureStatus, campaigns: CampaignIndex) -> None:
    """The alert retry of one BugSignature (periodic.py): send an alert still owed (failed, throttled, or
    waiting on a fixed webhook Secret), routed by a campaign that still exists."""
    if signatures.due_alert(spec, status) is None and signatures.due_resolve(spec, status) is None:
        return
    c = routing_campaign(rt, namespace, list(status.get("campaigns") or []), campaigns)
    if c is None:
        return
    async with rt.lock(namespace, name.removeprefix("sig-")):
        sig = await rt.api.get(path(API_VERSION, "bugsignatures", namespace, name), BugSignature)
        if sig is not None:
            await maybe_alert(rt, c, sig)


async def webhook_urls(rt: Runtime, namespace: str, secret_name: str, key: str) -> list[str]:
    """The usable webhook URLs in a Secret's key, or none (no Secret, or one that holds a
    bad one: maybe_alert reports that; a re-send only skips it)."""
    secret = await rt.api.get(path("v1", "secrets", namespace, secret_name), Secret)
    urls = alerting.webhook_urls(alerting.secret_value(secret, key) if secret else None)
    return urls if alerting.urls_problem(urls) is None else []


def alert_route(c: desired.Campaign | None,
                status: BugSignatureStatus) -> tuple[str, str] | None:
    """The webhook Secret (name, key) a signature's alerts go to: its first live campaign's
    route, else the one its last alert went to (status.alertRoute)."""
    if c is not None:
        ref = c.spec.alerts.webhookSecretRef
        return (ref.name, ref.key) if ref is not None else None
    remembered = status.get("alertRoute") or {}
    if remembered.get("secretName") and remembered.get("secretKey"):
        return str(remembered["secretName"]), str(remembered["secretKey"])
    return None


async def resend(rt: Runtime, sigs: Iterable[BugSignature], campaigns: CampaignIndex) -> int:
    """Send the firing alert of every open signature (signatures.resend_key) again, one
    POST per receiver: Alertmanager keeps an alert only until its endsAt, and loses them all
    in a restart; a re-sent alert has the labels of the first, so Alertmanager merges it and
    notifies no one again. Not paced by the receivers' token buckets (no one is notified)
    and not retried (the next round is the retry). Posted under the signatures' locks,
    skipping what was resolved since `sigs` was read, so a re-send never revives an alert
    that a fix just resolved. Returns the alerts delivered."""
    cfg = rt.config.alerting
    now = datetime.now(UTC)
    batches: dict[tuple[str, str], list[tuple[str, str, Alert]]] = {}
    urls: dict[tuple[str, str, str], list[str]] = {}
    for sig in sigs:
        spec, status = sig_spec(sig), sig_status(sig)

        key = signatures.resend_key(spec, status)
        if key is None:
            continue
        ns, name = sig["metadata"]["namespace"], sig["metadata"]["name"]
        c = routing_campaign(rt, ns, list(status.get("campaigns") or []), campaigns)
        found = alert_route(c, status)
        if found is None:
            continue
        route = (ns, *found)
        if route not in urls:
            urls[route] = await webhook_urls(rt, *route)
        for url in urls[route]:
            for alert in signatures.alerts(sig, key, now=now, external_url=cfg.external_url,
                                           hold=hold(rt)):
                batches.setdefault((ns, url), []).append((name, key, alert))
    sent = 0
    for (ns, url), items in batches.items():
        async with contextlib.AsyncExitStack() as held:
            for name in sorted({name for name, _, _ in items}):
                await held.enter_async_context(rt.lock(ns, name.removeprefix("sig-")))
            body = [alert for name, key, alert in items if (ns, name, key) not in rt.resolved]
            if not body:
                continue
            outcome = await alerting.post_alerts(url, body, attempts=1, backoff=cfg.backoff)
        if outcome is alerting.Delivery.SENT:
            rt.metrics.alerts_resent.inc(len(body))
            sent += len(body)
        else:
            rt.metrics.alert_failures.inc()
            log.warning("alert.resend_failed", namespace=ns, alerts=len(body),
                        outcome=outcome.value)
    return sent
