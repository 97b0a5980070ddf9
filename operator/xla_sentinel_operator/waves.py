"""Which agent work of a campaign's swarm is due (docs/agents.md "Work started by events"):
pure functions from what the operator's roll-up sees to the waves of agent Jobs to start.

An agent pod seeds its tasks when it starts (agents/swarm.py) and exits when none is left,
so Jobs made only at campaign create would run while nothing is covered and no signature
exists, and never again. The roll-up instead starts a wave (one Indexed Job of one role)
when it sees work the pods of that role would find:

- a signature of the campaign with a repro bundle, no fix draft and not fixed (or fixed
  and regressed): a fix wave (event `signature:ID`, the fix task's own key);
- a failure report in the queue that no agent took (a reproduce task open in the campaign's
  Leases: every agent pod seeds the reports of the campaign's ConfigMaps and bucket when it
  starts; the operator itself reads no ConfigMaps): a reproduce wave (event the task's key,
  `report:sha256:...`);
- coverage that stopped growing (the union of ops and fusion kinds the workers' reports
  name unchanged for `plateau` seconds): a stress wave (event `coverage:OPS:KINDS`, once
  per level; growth and a new plateau start another).

An event starts one wave once (status.agents.started remembers it). A role with a Job
still running takes no new wave: its events wait, and the next roll-up after that Job ends
starts them together, so a role has at most one running Job however fast events come.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple, TypedDict

from xla_sentinel.agents.lease_keys import (
    KEY_ANNOTATION,
    RESULT_ANNOTATION,
    ROLE_LABEL,
    SPENT_ANNOTATION,
    STATE_ANNOTATION,
)
from xla_sentinel.agents.spend import Budget, Spend

from .timestamps import parse_time, rfc3339

ROLE_OF_EVENT = {"signature": "fix", "report": "reproduce", "coverage": "stress"}
STARTED_KEPT = 256  # events remembered; the oldest are forgotten first
WAVE_EVENTS_SHOWN = 20  # events named on a wave Job's annotation
DROPPED_SHOWN = 10  # dropped tasks listed in status (droppedTotal counts them all)
SETTLED = ("done", "refused", "dropped")  # task states no agent is started for
PLATEAU_ENV = "XLA_SENTINEL_AGENT_PLATEAU_SECONDS"
PLATEAU_SECONDS = 900.0  # coverage unchanged this long has stopped growing
CHECKS_PER_PLATEAU = 4  # the workers' reports are read at most this often per plateau
CHECK_MIN_SECONDS = 5.0


class CoverageLevel(NamedTuple):
    """How much the campaign's workers covered: distinct ops and fusion kinds reached."""

    ops: int
    fusion_kinds: int


class CoverageRecord(TypedDict, total=False):
    ops: int
    fusionKinds: int
    since: str  # when it last grew
    checked: str  # when the workers' reports were last read


class WaveRecord(TypedDict, total=False):
    role: str
    job: str
    time: str
    events: list[str]


class SpendingRecord(TypedDict, total=False):
    tokens: int
    usd: float
    unpricedTokens: int
    tokensLeft: int
    usdLeft: float
    exhausted: str


class DroppedTask(TypedDict, total=False):
    key: str
    role: str
    error: str


class AgentsStatus(TypedDict, total=False):
    """FuzzCampaign status.agents (crds/fuzzcampaign.yaml)."""

    started: list[str]
    pending: list[str]
    coverage: CoverageRecord
    waves: int
    lastWave: WaveRecord
    spending: SpendingRecord
    tasks: dict[str, int]
    dropped: list[DroppedTask]
    droppedTotal: int


class Ledger(NamedTuple):
    """What the campaign's task Leases say: spending summed, tasks by state, dropped ones,
    and the keys of the tasks settled (done, refused, dropped: no agent needs starting)."""

    spent: Spend
    states: dict[str, int]
    dropped: list[DroppedTask]
    settled: frozenset[str] = frozenset()
    reports: tuple[str, ...] = ()  # keys of reproduce tasks waiting for an agent


def task_ledger(leases: Iterable[Mapping[str, Any]]) -> Ledger:
    """Sum the campaign's task Leases (agents/lease_keys.py's annotations)."""
    spent, states = Spend(), Counter[str]()
    dropped: list[DroppedTask] = []
    settled: set[str] = set()
    reports: set[str] = set()
    for lease in leases:
        meta = lease.get("metadata") or {}
        ann = meta.get("annotations") or {}
        try:
            spent += Spend.from_json(json.loads(ann.get(SPENT_ANNOTATION) or "null"))
        except ValueError:
            pass  # a garbled annotation spent nothing we can count
        state = str(ann.get(STATE_ANNOTATION) or "open")
        states[state] += 1
        key = str(ann.get(KEY_ANNOTATION) or "")
        if state in SETTLED:
            settled.add(key)
        elif state == "open" and (meta.get("labels") or {}).get(ROLE_LABEL) == "reproduce":
            reports.add(key)
        if state == "dropped":
            try:
                error = str((json.loads(ann.get(RESULT_ANNOTATION) or "{}") or {}).get("error") or "")
            except (ValueError, AttributeError):
                error = ""
            dropped.append({"key": str(ann.get(KEY_ANNOTATION) or ""),
                            "role": str((meta.get("labels") or {}).get(ROLE_LABEL) or ""), "error": error[:200]})
    return Ledger(spent, dict(sorted(states.items())), sorted(dropped, key=lambda d: d["key"]), frozenset(settled),
                  tuple(sorted(reports)))


def spending_record(ledger: Ledger, budget: Budget) -> SpendingRecord:
    """status.agents.spending: spent, left of each limit set, and why no more may be spent."""
    out: SpendingRecord = {"tokens": ledger.spent.tokens, "usd": round(ledger.spent.usd, 6),
                           "unpricedTokens": ledger.spent.unpriced_tokens}
    left = budget.left(ledger.spent)
    if "tokens" in left:
        out["tokensLeft"] = int(left["tokens"])
    if "usd" in left:
        out["usdLeft"] = float(left["usd"])
    if (why := budget.exhausted(ledger.spent)) is not None:
        out["exhausted"] = why
    return out


class Plan(NamedTuple):
    """Waves to start now ({role: events}) and the status.agents that records them."""

    waves: dict[str, list[str]]
    status: AgentsStatus


def plateau_seconds(env: Mapping[str, str] | None = None) -> float:
    """How long unchanged coverage counts as stopped growing: $XLA_SENTINEL_AGENT_PLATEAU_SECONDS
    on the operator, else PLATEAU_SECONDS. ValueError names a bad value."""
    raw = (env if env is not None else os.environ).get(PLATEAU_ENV, "").strip()
    if not raw:
        return PLATEAU_SECONDS
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"${PLATEAU_ENV}: {raw!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"${PLATEAU_ENV}: {raw!r}; seconds above 0")
    return value


def check_interval(plateau: float) -> float:
    """Seconds between two reads of the workers' reports for their coverage."""
    return max(CHECK_MIN_SECONDS, plateau / CHECKS_PER_PLATEAU)


def signature_events(campaign: str, sigs: Iterable[Mapping[str, Any]]) -> list[str]:
    """`signature:ID` of each BugSignature of `campaign` a fix agent would take: with a
    repro, no fix draft, not fixed (or fixed and regressed since). The same rule as the fix
    pods' seeding (agents/swarm.Swarm.seed_fixes)."""
    out = []
    for sig in sigs:
        spec, status = sig.get("spec") or {}, sig.get("status") or {}
        generation = (sig.get("metadata") or {}).get("generation")
        regressed = status.get("state") == "regressed" and status.get("regressedGeneration") == generation
        if campaign not in (status.get("campaigns") or []) or not spec.get("repro") \
                or status.get("fixDraft") or (spec.get("state") == "fixed" and not regressed):
            continue
        if spec.get("signature"):
            out.append(f"signature:{spec['signature']}")
    return sorted(set(out))


def coverage_level(coverages: Iterable[Mapping[str, Any]]) -> CoverageLevel:
    """The distinct ops and fusion kinds reached by any worker (WorkerReport.coverage)."""
    ops: set[str] = set()
    kinds: set[str] = set()
    for c in coverages:
        ops.update(k for k, v in (c.get("ops") or {}).items() if isinstance(v, int) and v > 0)
        kinds.update(k for k, v in (c.get("fusion_kinds") or {}).items() if isinstance(v, int) and v > 0)
    return CoverageLevel(len(ops), len(kinds))


def coverage_due(previous: AgentsStatus, now: datetime, plateau: float) -> bool:
    """Whether the workers' reports should be read for coverage now."""
    checked = parse_time((previous.get("coverage") or {}).get("checked"))
    return checked is None or now - checked >= timedelta(seconds=check_interval(plateau))


def track_coverage(previous: CoverageRecord | None, level: CoverageLevel | None,
                   now: datetime) -> CoverageRecord:
    """The coverage record after a read (`level`; None: not read this time)."""
    prev: CoverageRecord = previous or {}
    if level is None:
        return prev
    grew = (level.ops, level.fusion_kinds) != (prev.get("ops"), prev.get("fusionKinds"))
    return {"ops": level.ops, "fusionKinds": level.fusion_kinds,
            "since": rfc3339(now) if grew or not prev.get("since") else str(prev.get("since")),
            "checked": rfc3339(now)}


def plateau_event(record: CoverageRecord, now: datetime, plateau: float) -> str | None:
    """`coverage:OPS:KINDS` once the covered ops and kinds have not grown for `plateau`
    seconds (and something is covered: with nothing, a stress agent has no gap to read)."""
    since = parse_time(record.get("since"))
    ops, kinds = int(record.get("ops") or 0), int(record.get("fusionKinds") or 0)
    if since is None or ops + kinds == 0 or now - since < timedelta(seconds=plateau):
        return None
    return f"coverage:{ops}:{kinds}"


def fresh(events: Iterable[str], previous: AgentsStatus) -> list[str]:
    """The events no wave was started for yet."""
    seen = set(previous.get("started") or [])
    return sorted({e for e in events if e not in seen})


def startable(events: Iterable[str], previous: AgentsStatus, free: Collection[str]) -> bool:
    """Whether a fresh event of a role in `free` (run by the campaign, no Job running) is
    there: a wave would start."""
    return any(ROLE_OF_EVENT.get(e.partition(":")[0]) in free for e in fresh(events, previous))


def plan(roles: Collection[str], busy: Collection[str], events: Iterable[str],
         previous: AgentsStatus, coverage: CoverageRecord, now: datetime,
         settled: Collection[str] = ()) -> Plan:
    """The waves due: each event not started before, of a role the campaign runs, grouped
    by role; a `busy` role (a Job of it still running) waits. An event whose task is
    `settled` already (an agent of an earlier Job did it) starts nothing and counts as
    started. The new status.agents records the started events (the newest STARTED_KEPT),
    those waiting (`pending`) and `coverage`."""
    started = list(previous.get("started") or [])
    waves: dict[str, list[str]] = {}
    pending: list[str] = []
    done: list[str] = []
    for event in fresh(events, previous):
        role = ROLE_OF_EVENT.get(event.partition(":")[0])
        if role is None or role not in roles:
            continue
        if event in settled:
            done.append(event)
            continue
        (pending if role in busy else waves.setdefault(role, [])).append(event)
    started += done + [e for role in sorted(waves) for e in waves[role]]
    out: AgentsStatus = {"started": started[-STARTED_KEPT:], "pending": pending[:STARTED_KEPT],
                         "coverage": coverage, "waves": int(previous.get("waves") or 0) + len(waves)}
    for k in ("spending", "tasks", "dropped", "droppedTotal"):
        if k in previous:
            out[k] = previous[k]
    if waves:
        role = sorted(waves)[-1]
        out["lastWave"] = {"role": role, "time": rfc3339(now), "events": waves[role][:WAVE_EVENTS_SHOWN]}
    elif previous.get("lastWave"):
        out["lastWave"] = previous["lastWave"]
    return Plan(waves, out)


def wave_id(events: Iterable[str]) -> str:
    """A short name part for a wave from its events: the same events, the same Job."""
    return hashlib.sha256("\n".join(sorted(events)).encode()).hexdigest()[:6]


def job_finished(job: Mapping[str, Any]) -> bool:
    """Whether a Job has ended (condition Complete or Failed True)."""
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])
