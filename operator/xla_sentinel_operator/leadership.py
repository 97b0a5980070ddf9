"""Which of several peered replicas acts, as pure functions: the peering priority a replica
takes when none is given, and kopf's rule read back from the peering object.

kopf pauses every replica but the highest-priority live one (and all of them on a tie). The
operator's own periodic work (roll-ups, re-ingestion, alert retries and re-sends:
periodic.py) is not a kopf timer, so it asks the peering object the same question.

Priority by seniority: a replica that starts later ranks lower, so a restarted or added
replica never outranks the one already leading (no pause and resume of the leader, no
period with two half-started leaders); the identity breaks a tie within one millisecond.
Random priorities (kopf's advice) made a restarted replica outrank the leader half the time.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import secrets
import socket
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from .timestamps import parse_time

# Seniority counts down from here (milliseconds since the epoch, year 2100); times 1,000
# for the identity's share, the largest priority stays below 2**53 (exact in JSON numbers).
_HORIZON_MS = 4_102_444_800_000
_TIEBREAK = 1_000


def seniority_priority(started: float, identity: str) -> int:
    """The peering priority of a replica started at `started` (seconds since the epoch):
    earlier is higher; the identity's hash orders two started within one millisecond."""
    age_rank = max(0, _HORIZON_MS - int(started * 1000))
    tiebreak = int.from_bytes(hashlib.sha256(identity.encode()).digest()[:4], "big") % _TIEBREAK
    return age_rank * _TIEBREAK + tiebreak


def own_identity() -> str:
    """This replica's peering identity: the pod name ($POD_ID, which the chart sets), else
    user@host/pid/random (unique per operator, also for several in one process)."""
    pod = os.environ.get("POD_ID")
    if pod:
        return pod
    return f"{getpass.getuser()}@{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(3)}"



def alive(info: Mapping[str, Any], now: datetime) -> bool:
    """A peer entry (kopf's `{priority, lifetime, lastseen}`) whose lease has not run out."""
    seen = parse_time(info.get("lastseen"))
    if seen is None:
        return False
    return seen + timedelta(seconds=int(info.get("lifetime") or 60)) > now


def leading(peers: Mapping[str, Any] | None, identity: str, priority: int, now: datetime) -> bool:
    """kopf's rule on one peering object's status (identity -> entry): this replica acts
    when its own entry is alive and no other live peer has the same or a higher priority.
    Its own entry must be there: kopf starts paused until it has announced itself."""
    peers = peers or {}
    mine = peers.get(identity)
    if not isinstance(mine, Mapping) or not alive(mine, now):
        return False
    for other, info in peers.items():
        if other == identity or not isinstance(info, Mapping) or not alive(info, now):
            continue
        if int(info.get("priority") or 0) >= priority:
            return False
    return True
