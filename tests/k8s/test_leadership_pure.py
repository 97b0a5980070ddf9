"""Which peered replica acts (operator/xla_sentinel_operator/leadership.py): priorities by
seniority, so a restarted replica never outranks the leader, and kopf's rule read back from
the peering object's status. Pure functions, no API."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from xla_sentinel_operator.leadership import leading, seniority_priority

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
T = NOW.timestamp()


def peer(priority: int, seen_ago: float = 1.0, lifetime: int = 60) -> dict:
    return {"priority": priority, "lifetime": lifetime,
            "lastseen": (NOW - timedelta(seconds=seen_ago)).isoformat()}


def test_a_replica_started_later_ranks_lower_whatever_its_name():
    rng = random.Random(7)
    for _ in range(200):
        a, b = f"xs-operator-{rng.getrandbits(32):x}", f"xs-operator-{rng.getrandbits(32):x}"
        started = T + rng.uniform(-1e6, 1e6)
        later = started + rng.choice([0.001, 0.5, 60.0, 86400.0])
        assert seniority_priority(started, a) > seniority_priority(later, b)


def test_replicas_started_within_a_millisecond_do_not_tie():
    # kopf pauses every replica on a tie; the identity breaks it.
    priorities = {seniority_priority(T, f"xs-operator-{i}") for i in range(20)}
    assert len(priorities) > 1
    assert seniority_priority(T, "a") == seniority_priority(T, "a")  # stable per replica
    assert all(0 < p < 2**53 for p in priorities)  # exact as a JSON number


def test_the_highest_live_priority_leads_and_the_others_stand_by():
    status = {"old": peer(300), "new": peer(200)}
    assert leading(status, "old", 300, NOW)
    assert not leading(status, "new", 200, NOW)


def test_a_tie_pauses_both_as_kopf_does():
    status = {"a": peer(5), "b": peer(5)}
    assert not leading(status, "a", 5, NOW) and not leading(status, "b", 5, NOW)


def test_a_dead_leader_no_longer_counts():
    status = {"old": peer(300, seen_ago=61), "new": peer(200)}
    assert leading(status, "new", 200, NOW)


def test_a_replica_not_yet_in_the_peering_object_does_not_act():
    # kopf starts paused until it has announced itself and read its peers.
    assert not leading({}, "me", 100, NOW)
    assert not leading({"other": peer(1)}, "me", 100, NOW)
    assert not leading({"me": peer(100, seen_ago=120)}, "me", 100, NOW)
    assert leading({"me": peer(100), "other": peer(1)}, "me", 100, NOW)
