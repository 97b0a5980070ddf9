"""Kubernetes timestamps (RFC 3339, second precision, `Z`) read and written in one place."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> datetime | None:
    """An aware datetime, or None for anything that is not a timestamp. A timestamp without
    a zone is read as UTC, so comparing it with an aware `now` cannot raise."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
