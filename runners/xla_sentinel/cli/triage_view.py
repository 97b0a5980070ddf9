"""`xla-sentinel triage`: the signatures of a campaign as one table, a line per signature,
read from its store (a local folder) or from the findings under a URI."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from xla_sentinel.core.model import Signature
from xla_sentinel.storage import objects as storage
from xla_sentinel.storage.store import Store, StoreError

COLUMNS = ["id", "verdict", "configurations", "culprit_op", "culprit_pass", "count", "first_seen",
           "last_seen", "known_bug", "repro"]


@dataclass(frozen=True)
class Triage:
    signatures: list[Signature]
    # Per signature, the configurations (targets) its findings show in, first seen first.
    configurations: dict[str, list[str]]
    fixes: dict[str, dict[str, Any]] = field(default_factory=dict)  # verified cures, by signature
    errors: list[str] = field(default_factory=list)  # unusable findings, named and skipped


def read_triage(where: str) -> Triage:
    """The signatures of the campaign at `where`, a campaign output folder or URI."""
    if storage.is_uri(where):
        return _read_stored(where)
    db = storage.local_path(where) / "campaign.sqlite"
    if not db.exists():
        raise StoreError(f"{where}: no campaign.sqlite (not a campaign output folder)")
    store = Store(db)
    try:
        return Triage(store.signatures(), _configurations((f.signature, f.target) for f in store.findings()),
                      store.fixes())
    finally:
        store.close()


def _read_stored(uri: str) -> Triage:
    # Read from the findings themselves: live while a campaign still runs, and across the
    # worker folders of a cluster campaign. Verified cures are kept in a local store only.
    objects = storage.ObjectStore(uri)
    objects.check()
    records, errors = storage.stored_findings(objects)
    signatures, _ = storage.stored_signatures(objects, records)
    by_time = sorted(records, key=lambda r: str(r.get("time")))
    return Triage(signatures, _configurations((str(r["signature"]), str(r.get("target"))) for r in by_time),
                  errors=errors)


def _configurations(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, dict[str, None]] = {}
    for sig, target in pairs:
        out.setdefault(sig, {})[target] = None
    return {sig: list(targets) for sig, targets in out.items()}


def columns(triage: Triage) -> list[str]:
    cols = list(COLUMNS)
    # What `bisect --versions` recorded (docs/versions.md), shown once any signature has it.
    if any(s.introduced_in or s.last_good for s in triage.signatures):
        cols += ["introduced_in", "last_good"]
    if any(s.verification for s in triage.signatures):
        cols.append("verification")
    # A fix draft the agents' gate verified (docs/agents.md), the last column: it has blanks.
    if any(s.id in triage.fixes for s in triage.signatures):
        cols.append("verified_fix")
    return cols


def cell(triage: Triage, sig: Signature, column: str) -> str:
    if column == "configurations":
        # One bug that several configurations show is one signature: name them all,
        # comma-joined (one word, so the columns still split on blanks).
        return ",".join(triage.configurations.get(sig.id) or [sig.target or "-"])
    if column == "verified_fix":
        return str(triage.fixes[sig.id]["cure"]) if sig.id in triage.fixes else "-"
    if column == "verification" and sig.verification:
        return f"{sig.verification} on {sig.verification_jaxlib}"  # the release it ran on
    value = getattr(sig, column)
    return "-" if value is None else str(value)


def table(triage: Triage) -> str:
    """The signatures as columns aligned on blanks, a header line first."""
    if not triage.signatures:
        return "no signatures"
    cols = columns(triage)
    rows = [cols, *([cell(triage, s, c) for c in cols] for s in triage.signatures)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows)
