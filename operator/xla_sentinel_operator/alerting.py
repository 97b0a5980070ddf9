"""Deliver alerts to an Alertmanager v2 endpoint (`POST /api/v2/alerts`, a JSON array of
postable alerts): retry only what may succeed later, and pace each receiver with a token
bucket so a burst of new signatures cannot flood it."""

from __future__ import annotations

import asyncio
import base64
import enum
import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
import structlog

from .bodies import Alert, Secret

log = structlog.get_logger("xla_sentinel_operator.alerting")


class Delivery(enum.Enum):
    SENT = "sent"
    # Refused for good (4xx other than 429): the same message would be refused again.
    REJECTED = "rejected"
    # Unreachable, 429 or 5xx after every attempt: worth another try later.
    FAILED = "failed"
    # The receiver's token bucket is empty: not attempted; the retry loop sends it later.
    THROTTLED = "throttled"


def retryable(status: int) -> bool:
    """HTTP answers worth retrying: rate limited (429) or a server error (5xx)."""
    return status == 429 or status >= 500


@dataclass
class TokenBucket:
    """`burst` alerts at once, then `rate` per second; pure apart from the clock passed in."""

    rate: float
    burst: float
    tokens: float = -1.0
    stamp: float = 0.0

    def take(self, now: float) -> bool:
        """Spend one token if there is one at time `now` (seconds, monotonic)."""
        if self.tokens < 0:
            self.tokens, self.stamp = self.burst, now
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


@dataclass
class Limiter:
    """One token bucket per receiver URL."""

    rate: float = 0.2
    burst: float = 5
    buckets: dict[str, TokenBucket] = field(default_factory=dict)

    def allow(self, url: str, now: float | None = None) -> bool:
        bucket = self.buckets.setdefault(url, TokenBucket(self.rate, self.burst))
        return bucket.take(time.monotonic() if now is None else now)


async def post_alerts(url: str, alerts: list[Alert], *, attempts: int = 5,
                      backoff: float = 0.5, timeout: float = 10.0,
                      limiter: Limiter | None = None) -> Delivery:
    """POST the alerts (a v2 array); SENT once the receiver answers 2xx."""
    if limiter is not None and not limiter.allow(url):
        log.warning("alert.throttled", url=url)
        return Delivery.THROTTLED
    delay = backoff
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        for attempt in range(1, attempts + 1):
            try:
                async with session.post(url, json=alerts) as resp:
                    if resp.status < 300:
                        return Delivery.SENT
                    log.warning("alert.refused", status=resp.status, attempt=attempt, url=url)
                    if not retryable(resp.status):
                        return Delivery.REJECTED
            except (aiohttp.ClientError, TimeoutError) as e:
                log.warning("alert.unreachable", error=str(e), attempt=attempt, url=url)
            if attempt < attempts:
                await asyncio.sleep(delay)
                delay *= 2
    return Delivery.FAILED


def secret_value(secret: Secret, key: str) -> str | None:
    """A Secret's value by key (data is base64; stringData is accepted as written); None
    when the key is missing or its bytes are not text."""
    if key in (secret.get("data") or {}):
        try:
            return base64.b64decode(secret["data"][key], validate=True).decode().strip()
        except (ValueError, UnicodeDecodeError):
            return None
    value = (secret.get("stringData") or {}).get(key)
    return value.strip() if isinstance(value, str) else None


def webhook_urls(value: str | None) -> list[str]:
    """The Alertmanager URLs a Secret's value names: one, or several separated by commas or
    whitespace (an HA Alertmanager: every instance gets every alert, as Alertmanager's
    clients must do; the instances deduplicate the notifications)."""
    return [u for u in re.split(r"[\s,]+", value or "") if u]


def urls_problem(urls: list[str]) -> str | None:
    """Why these URLs cannot all be Alertmanager endpoints (url_problem of the first bad
    one), or None."""
    if not urls:
        return url_problem(None)
    return next((p for p in map(url_problem, urls) if p is not None), None)


def combined(outcomes: list[Delivery]) -> Delivery:
    """One outcome of the POSTs of an alert to every instance: any that failed is retried
    (all of them again: Alertmanager merges an alert it holds), a throttled one waits,
    REJECTED only when every instance refused it."""
    for worst in (Delivery.FAILED, Delivery.THROTTLED):
        if worst in outcomes:
            return worst
    if outcomes and all(o is Delivery.REJECTED for o in outcomes):
        return Delivery.REJECTED
    return Delivery.SENT


async def post_to_all(urls: list[str], alerts: list[Alert], *, attempts: int = 5,
                      backoff: float = 0.5, limiter: Limiter | None = None) -> Delivery:
    """post_alerts() to every URL, at once; their combined() outcome."""
    outcomes = await asyncio.gather(*(post_alerts(u, alerts, attempts=attempts, backoff=backoff,
                                                  limiter=limiter) for u in urls))
    return combined(list(outcomes))


def url_problem(url: str | None) -> str | None:
    """Why `url` cannot be an Alertmanager endpoint, or None when it can: an absolute
    http(s) URL with a host. Such a URL is a person's typo, not an outage: retrying the
    POST cannot help."""
    if not url:
        return "no URL (the key is missing, empty or not text)"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"{url!r} is not an http(s) URL"
    if not parts.hostname:
        return f"{url!r} names no host"
    receiver = CHAT_HOSTS.get(parts.hostname.lower())
    if receiver is not None:
        name, config = receiver
        return (f"{url!r} is a {name} webhook, and the operator posts Alertmanager alerts "
                f"(POST /api/v2/alerts), not {name} payloads: give it an Alertmanager URL and "
                f"reach {name} through an Alertmanager receiver ({config})")
    return None


# Services people paste a webhook of where an Alertmanager URL belongs: the operator speaks
# only Alertmanager's API, and these take other payloads (they would refuse every alert).
CHAT_HOSTS = {"hooks.slack.com": ("Slack", "slack_configs"),
              "events.pagerduty.com": ("PagerDuty", "pagerduty_configs"),
              "chat.googleapis.com": ("Google Chat", "webhook_configs through a Chat adapter"),
              "outlook.office.com": ("Microsoft Teams", "msteams_configs")}
