"""Simulated worker pods: the real K8sReporter (sync kubernetes client, as in a pod, logged
in as the chart's worker ServiceAccount) in a thread, fed with fake finding records instead of
the engine. The whole pod, engine included, is the fake node's job (tests/controlplane)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import kubernetes
from xla_sentinel.cluster.reporter import K8sReporter


def reports_api(kubeconfig: Path) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(
        kubernetes.config.new_client_from_config(config_file=str(kubeconfig)))


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

    def __init__(self, kubeconfig: Path, campaign: dict[str, Any], worker: str,
                 samples: int = 1) -> None:
        meta = campaign["metadata"]
        self.reporter = K8sReporter(reports_api(kubeconfig), namespace=meta["namespace"],
                                    campaign=meta["name"], campaign_uid=meta.get("uid", ""),
                                    worker=worker, samples=samples, progress_interval=0.0)

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
