"""Storage down, on the real API server: a worker (the real K8sReporter as the chart's
worker ServiceAccount) whose real storage Mirror cannot reach its bucket reports it, and the
operator shows it on the campaign: status.storageErrors, condition StorageAvailable False
with the reason, and one StorageUnavailable Warning Event however long the outage lasts."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from xla_sentinel.storage.objects import Mirror, ObjectStore

from .conftest import API, campaign, create, eventually
from .workers import Worker

BUCKET_URI = "gs://findings"


def closed_port() -> int:
    """A loopback port nothing listens on: the bucket's host refuses every connection."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def storage_condition(api, ns: str) -> dict:
    status = api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "StorageAvailable"), {})


def outage_events(api, ns: str) -> list[dict]:
    return [e for e in api.all("v1/events", ns) if e.get("reason") == "StorageUnavailable"]


async def test_an_unreachable_bucket_shows_on_the_campaign_once_per_outage(
        api, ns, client, start_operator, worker_kubeconfig, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{closed_port()}")
    await start_operator()
    fc = await create(client, campaign(ns, workers=1, artifacts={"bucketURI": BUCKET_URI}))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    store = ObjectStore(f"{BUCKET_URI}/nightly/main-0", patient=False)
    mirror = Mirror(tmp_path, store, backoff=(0.2, 0.4), on_change=w.reporter.storage)
    await asyncio.to_thread(mirror.start)
    finding = tmp_path / "findings" / "a1"
    finding.mkdir(parents=True)
    (finding / "finding.json").write_text('{"id": "a1"}')
    mirror.submit_tree("findings/a1")

    cond = await eventually(lambda: (c := storage_condition(api, ns)).get("status") == "False" and c)
    assert cond["reason"] == "StorageUnavailable" and "unreachable" in cond["message"]
    status = api.get(f"{API}/fuzzcampaigns", ns, "nightly")["status"]
    (error,) = status["storageErrors"]
    assert (error["worker"], error["uri"]) == ("main-0", f"{BUCKET_URI}/nightly/main-0")
    assert "unreachable" in error["reason"] and error["since"]
    await eventually(lambda: status_pending(api, ns) == 1)  # the finding waits on the pod's disk
    (event,) = await eventually(lambda: outage_events(api, ns))
    assert event["type"] == "Warning" and "main-0" in event["message"]

    await asyncio.sleep(3)  # more failed attempts and roll-ups: still one Event
    assert len(outage_events(api, ns)) == 1 and mirror.status()["failed_attempts"] >= 3
    await asyncio.to_thread(mirror.close, 0.0)

    # The store answers again (as the Mirror then says): the condition clears.
    await asyncio.to_thread(w.reporter.storage, {"available": True, "uri": store.uri})
    await eventually(lambda: storage_condition(api, ns).get("status") == "True")
    assert api.get(f"{API}/fuzzcampaigns", ns, "nightly")["status"]["storageErrors"] == []


def status_pending(api, ns: str) -> int:
    errors = (api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status") or {}).get("storageErrors")
    return int(errors[0]["pending"]) if errors else -1
