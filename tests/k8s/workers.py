"""Simulated worker pods: the real K8sReporter (sync kubernetes client, as in a pod) run in a
thread against the emulated API, fed with fake finding records instead of the engine."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import kubernetes
from xla_sentinel.k8s_report import K8sReporter

from .conftest import NS


def core_api(url: str) -> kubernetes.client.CoreV1Api:
    config = kubernetes.client.Configuration()
    config.host = url
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def finding(signature: str, n: int, *, verdict: str = "mismatch", op: str = "add",
            target: str = "default") -> dict[str, Any]:
    """A finding record as the engine hands it to reporter.finding()."""
    fid = hashlib.sha256(f"{signature}/{n}".encode()).hexdigest()[:20]
    return {"id": fid, "campaign": "nightly", "program": f"p{n}", "target": target,
            "verdict": verdict, "signature": signature, "culprit_op": op,
            "culprit_pass": "algsimp", "fusion_kind": "kLoop", "dtype": "f32",
            "evidence": {"rel_error": 0.5}, "dir": f"findings/{fid}", "known_bug": None,
            "time": f"2026-11-29T10:00:{n % 60:02d}Z"}


class Worker:
    """One worker pod of a campaign: start() is the pod starting, the rest its engine."""

    def __init__(self, url: str, campaign: dict[str, Any], worker: str, samples: int = 1) -> None:
        meta = campaign["metadata"]
        self.reporter = K8sReporter(core_api(url), namespace=NS, campaign=meta["name"],
                                    campaign_uid=meta.get("uid", ""), worker=worker,
                                    samples=samples, progress_interval=0.0)

    async def start(self) -> Worker:
        await asyncio.to_thread(self.reporter.start)
        return self

    async def find(self, *records: dict[str, Any]) -> None:
        for record in records:
            await asyncio.to_thread(self.reporter.finding, record)

    async def progress(self, programs: int, executions: int = 0, elapsed_s: float = 1.0) -> None:
        counters = {"programs": programs, "executions": executions or programs * 4,
                    "findings": {}, "elapsed_s": elapsed_s}
        await asyncio.to_thread(self.reporter.progress, counters)

    async def close(self, done: bool = True) -> None:
        await asyncio.to_thread(self.reporter.close, done)
