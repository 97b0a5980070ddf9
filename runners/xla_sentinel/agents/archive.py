"""What an agent run leaves behind, kept in the campaign's store (docs/agents.md, "What
persists"): an agent pod's own folder is an emptyDir that goes with the pod, so each run's
transcript, its claims (with the gate's decisions and evidence), the programs of the tests
and reproductions it submitted, and a small record of the run are copied to the campaign's
store, under `agents/` beside the workers' folders:

    /artifacts/CAMPAIGN/agents/...         (artifacts.pvc, the agent pods' /artifacts)
    gs://BUCKET/CAMPAIGN/agents/...        (artifacts.bucketURI)

    agents/runs/STEM.json                  the run's record (role, agent, model, task, status, spent, claims)
    agents/transcripts/STEM.json           every message of the run
    agents/claims/STEM.json                the run's claims, full rows of the claims table
    agents/tests/CLAIM-NAME                a submitted test's program (verified or not)
    agents/reproducers/CLAIM-NAME          a submitted reproducer's program (and its module.mlir)

STEM is the transcript's name, ROLE-AGENT-TIME: unique per run, so nothing is overwritten.
Locally the same tree is OUT/agents/ (the runtime writes runs/ there too), which is what
the triage page reads (report/agents.py). The store is the storage layer campaigns use
(storage/objects.py: a local folder, gs:// or s3://).

Also here: a fix task's repro of a bucket campaign (a finding folder at gs://...) fetched
into the agent's OUT/findings/, where the tools open it as the engine's own bundle.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from xla_sentinel.agents.tasks import Task
from xla_sentinel.storage.objects import ObjectStore, StorageError, is_uri, join

PREFIX = "agents"
ARTIFACTS_ROOT = Path("/artifacts")  # the artifacts PVC in an agent pod (operator: desired.ARTIFACTS_MOUNT)
MAX_FILE_BYTES = 4 * 1024 * 1024  # a program bigger than this is not copied (its claim names it)


def campaign_store(campaign: str, pvc: bool, bucket: str | None, root: Path = ARTIFACTS_ROOT) -> str | None:
    """The campaign's store as an agent pod sees it: its folder on the artifacts PVC, else
    under the bucket; None with neither (nothing outlives the pod then)."""
    if pvc:
        return str(root / campaign)
    if bucket:
        return join(bucket, campaign)
    return None


def write_run(out: Path, record: dict[str, Any]) -> Path:
    """The run's record as OUT/agents/runs/STEM.json (STEM: the transcript's name)."""
    stem = Path(str(record["transcript"])).stem
    path = out / PREFIX / "runs" / f"{stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, default=str))
    return path


def _programs(claim: dict[str, Any]) -> list[tuple[Path, str]]:
    """(file, key) of a claim's programs: a test's or reproduction's source, and for a
    reproduction its loaded module."""
    folder = {"test": "tests", "reproduction": "reproducers"}.get(str(claim.get("kind")))
    source = (claim.get("claim") or {}).get("source")
    if folder is None or not source:
        return []
    src = Path(str(source))
    out = [(src, f"{PREFIX}/{folder}/{claim['id']}-{src.name}")]
    module = src.parent / "program" / "module.mlir"
    if folder == "reproducers":
        out.append((module, f"{PREFIX}/{folder}/{claim['id']}-module.mlir"))
    return out


def archive_run(uri: str, out: Path, record: dict[str, Any], claims: list[dict[str, Any]]) -> list[str]:
    """Copy a finished run (its record, transcript, claims and programs) from OUT to the
    campaign's store at `uri`; the keys written. StorageError when the store does not take
    them (the caller says so; the run itself is not undone)."""
    store = ObjectStore(uri)
    run = write_run(out, record)
    stem = run.stem
    claims_file = out / PREFIX / "claims" / f"{stem}.json"
    claims_file.parent.mkdir(parents=True, exist_ok=True)
    claims_file.write_text(json.dumps(claims, indent=1, default=str))
    files = [(run, f"{PREFIX}/runs/{stem}.json"), (claims_file, f"{PREFIX}/claims/{stem}.json")]
    transcript = Path(str(record["transcript"]))
    if transcript.is_file():
        files.append((transcript, f"{PREFIX}/transcripts/{transcript.name}"))
    for claim in claims:
        files += [(f, k) for f, k in _programs(claim) if f.is_file() and f.stat().st_size <= MAX_FILE_BYTES]
    written = []
    for local, key in files:
        store.put(local, key, replace=True)
        written.append(key)
    return written


def localize_repro(task: Task, out: Path) -> Task:
    """A fix task whose repro is a finding folder in a bucket: the folder fetched into
    OUT/findings/NAME (the engine's layout, which the tools trust as a bundle the engine
    wrote) and the task's repro pointed at it. Any other task as it is."""
    repro = str(task.payload.get("repro") or "")
    if not is_uri(repro):
        return task
    name = repro.rstrip("/").rsplit("/", 1)[-1]
    folder_uri, local = repro, out / "findings" / name
    if name.endswith(".py"):  # a bundle's script: its folder holds what it reads
        folder_uri = repro.rstrip("/").rsplit("/", 1)[0]
        local = out / "findings" / folder_uri.rsplit("/", 1)[-1]
    try:
        ObjectStore(folder_uri).download("", local)
    except StorageError as e:
        raise StorageError(f"fix task {task.key}: its repro could not be fetched: {e}") from None
    path = local / name if name.endswith(".py") else local
    return replace(task, payload={**task.payload, "repro": str(path), "repro_uri": repro})
