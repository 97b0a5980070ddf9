"""Deliver an Alertmanager-compatible webhook message, retrying with exponential backoff."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import aiohttp
import structlog

log = structlog.get_logger("xla_sentinel_operator.alerting")


async def post_alert(url: str, payload: dict[str, Any], *, attempts: int = 5,
                     backoff: float = 0.5, timeout: float = 10.0) -> bool:
    """POST `payload`; True once a receiver answers 2xx. Client errors other than 429 are
    not retried: the same message would be refused again."""
    delay = backoff
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        for attempt in range(1, attempts + 1):
            try:
                async with session.post(url, json=payload) as resp:
                    if resp.status < 300:
                        return True
                    retry = resp.status == 429 or resp.status >= 500
                    log.warning("alert.refused", status=resp.status, attempt=attempt, url=url)
                    if not retry:
                        return False
            except (aiohttp.ClientError, TimeoutError) as e:
                log.warning("alert.unreachable", error=str(e), attempt=attempt, url=url)
            if attempt < attempts:
                await asyncio.sleep(delay)
                delay *= 2
    return False


def secret_value(secret: dict[str, Any], key: str) -> str | None:
    """A Secret's value by key (data is base64; stringData is accepted as written)."""
    if key in (secret.get("data") or {}):
        return base64.b64decode(secret["data"][key]).decode().strip()
    value = (secret.get("stringData") or {}).get(key)
    return value.strip() if isinstance(value, str) else None
