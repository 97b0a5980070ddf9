"""An agent pod of a campaign's swarm (FuzzCampaign spec.agents; docs/agents.md "Running a
swarm"): what it needs of the cluster beyond the agent loop.

- the task queue: Leases of the campaign's namespace (`kube_tasks.KubeTaskQueue`), shared
  by every agent pod of the campaign;
- the tasks only the cluster knows: BugSignatures of the campaign with a reproducer and no
  fix draft yet become fix tasks (keys `signature:ID`, the same as `Workbench.seed_tasks`
  gives a local signature, so seeding is idempotent across pods and sources); failure
  reports in ConfigMaps labelled for the campaign and under the bucket's reports/ prefix
  become reproduce tasks (keys from their content's hash; a malformed one is a task
  refused with its error, `agents/sources.py`); the coverage gaps are those of what the
  campaign's workers covered (`pod_coverage`, the Workbench's source in a pod: their output
  on the PVC or in the bucket, else the coverage counts of their WorkerReports);
- what comes of a task: the gate's verified fix drafts, written as the pod's own
  WorkerReport result (type `fixDraft`, the report channel the admission policy binds to
  the pod). The operator validates it and writes BugSignature status.fixDraft and an Event:
  an agent pod never writes a BugSignature.

The operator sets the environment (operator/xla_sentinel_operator/agents.py):
XLA_SENTINEL_TASK_QUEUE=kube, XLA_SENTINEL_CAMPAIGN(_UID), XLA_SENTINEL_NAMESPACE and
XLA_SENTINEL_POD (the downward API).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from xla_sentinel.agents.archive import campaign_store
from xla_sentinel.agents.kube_tasks import KubeTaskQueue
from xla_sentinel.agents.sources import (
    ARTIFACTS_ROOT,
    Report,
    bucket_reports,
    campaign_coverage,
    configmap_reports,
    worker_reports,
)
from xla_sentinel.agents.tasks import MAX_ATTEMPTS
from xla_sentinel.cluster.report import (
    GROUP,
    REPORT_PLURAL,
    VERSION,
    WorkerReport,
    result_object,
    writer_name,
)
from xla_sentinel.cluster.reporter import write_result

FIX_DRAFT = "fixDraft"
DRAFTS_KEPT = 4  # fix drafts one pod's result holds (the newest), within the result's size
EVIDENCE_CHARS = 2000


def in_pod(env: dict[str, str] | None = None) -> bool:
    """Whether this agent runs in a swarm pod (the operator says so)."""
    return (env if env is not None else os.environ).get("XLA_SENTINEL_TASK_QUEUE") == "kube"


def pod_coverage(spec: Any, env: dict[str, str] | None = None, root: Path = ARTIFACTS_ROOT,
                 api: Any = None) -> Callable[[], dict[str, Any]] | None:
    """In an agent pod, what the campaign's workers covered (their output on the artifacts
    PVC or in the bucket of `spec.artifacts`, else their WorkerReports, read through `api`
    or the pod's own identity); None elsewhere (the local store counts)."""
    env = env if env is not None else dict(os.environ)
    if not in_pod(env) or not env.get("XLA_SENTINEL_CAMPAIGN"):
        return None
    campaign, namespace = env["XLA_SENTINEL_CAMPAIGN"], env.get("XLA_SENTINEL_NAMESPACE")

    def reports() -> list[WorkerReport]:
        assert namespace
        return worker_reports(api if api is not None else _custom_api(), namespace, campaign)

    return partial(campaign_coverage, campaign, bool(spec.artifacts.pvc), spec.artifacts.bucketURI, root,
                   reports if namespace else None)


def _artifacts_of(env: dict[str, str]) -> dict[str, Any]:
    """spec.artifacts of the campaign spec the operator gives the pod ({} when none)."""
    try:
        got = json.loads(env.get("XLA_SENTINEL_SPEC") or "{}").get("artifacts") or {}
    except (ValueError, AttributeError):
        return {}
    return got if isinstance(got, dict) else {}


def _bucket_of(env: dict[str, str]) -> str | None:
    """artifacts.bucketURI of the campaign spec the operator gives the pod, if any."""
    bucket = _artifacts_of(env).get("bucketURI")
    return str(bucket) if bucket else None


def _custom_api() -> Any:
    import kubernetes

    kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]  # kubernetes has no hints
    return kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient())


@dataclass
class Swarm:
    """The cluster side of one agent pod."""

    api: Any  # kubernetes.client.CustomObjectsApi
    namespace: str
    campaign: str
    campaign_uid: str
    pod: str
    bucket: str | None = None  # artifacts.bucketURI: failure reports under CAMPAIGN/reports/
    pvc: bool = False  # artifacts.pvc: the campaign's store is /artifacts/CAMPAIGN

    @classmethod
    def from_env(cls, api: Any = None) -> Swarm:
        env = os.environ
        missing = [k for k in ("XLA_SENTINEL_CAMPAIGN", "XLA_SENTINEL_NAMESPACE", "XLA_SENTINEL_POD")
                   if not env.get(k)]
        if missing:
            raise ValueError(f"an agent pod needs {', '.join(missing)} (set by the operator)")
        return cls(api if api is not None else _custom_api(), env["XLA_SENTINEL_NAMESPACE"],
                   env["XLA_SENTINEL_CAMPAIGN"], env.get("XLA_SENTINEL_CAMPAIGN_UID", ""),
                   env["XLA_SENTINEL_POD"], _bucket_of(dict(env)), bool(_artifacts_of(dict(env)).get("pvc")))

    @property
    def store(self) -> str | None:
        """Where this pod's runs persist (agents/archive.py): the campaign's store, or None."""
        return campaign_store(self.campaign, self.pvc, self.bucket)

    @property
    def agent(self) -> str:
        """This pod's name in leases and claims: `<job>-<index>`, the same for a retried pod
        of one index (and the one WorkerReport name it may write)."""
        return writer_name(self.pod)

    @property
    def queue(self) -> KubeTaskQueue:
        return self.task_queue()

    def task_queue(self, max_attempts: int = MAX_ATTEMPTS) -> KubeTaskQueue:
        """The campaign's queue, dropping a task after `max_attempts` (spec.agents.taskAttempts)."""
        return KubeTaskQueue(self.api, self.namespace, self.campaign, self.campaign_uid,
                             max_attempts=max_attempts)

    def seed(self, queue: KubeTaskQueue) -> int:
        """Queue the tasks the cluster holds: a fix task per BugSignature of the campaign
        with a reproducer, no fix draft and not fixed; a reproduce task per failure report
        (`seed_reports`). How many were new."""
        return self.seed_fixes(queue) + self.seed_reports(queue)["queued"]

    def reports(self) -> tuple[list[Report], list[str]]:
        """The campaign's failure reports (ConfigMaps, then the bucket), and the sources
        that could not be read."""
        import kubernetes
        from kubernetes.client.exceptions import ApiException

        reports, problems = [], []
        try:
            core = kubernetes.client.CoreV1Api(self.api.api_client)
            reports += configmap_reports(core, self.namespace, self.campaign)
        except ApiException as e:  # a Role without configmaps list: said, the pod goes on
            problems.append(f"configmaps: HTTP {e.status} {e.reason}")
        if self.bucket:
            found, problem = bucket_reports(self.bucket, self.campaign)
            reports += found
            problems += [problem] if problem else []
        return reports, problems

    def seed_reports(self, queue: KubeTaskQueue) -> dict[str, int]:
        """Queue each failure report as a reproduce task (its text in the payload, so any
        pod can work on it); a malformed one is queued refused with its error. Counts of
        new `queued` and `refused` tasks; an unreadable source is said on stderr."""
        reports, problems = self.reports()
        out = {"queued": 0, "refused": 0}
        for r in reports:
            if r.error:
                out["refused"] += queue.refuse("reproduce", r.key, r.payload(), r.error)
            else:
                out["queued"] += queue.put("reproduce", r.key, r.payload())
        for p in problems:
            print(f"xla-sentinel: agent: failure reports: {p}", file=sys.stderr)
        return out

    def seed_fixes(self, queue: KubeTaskQueue) -> int:
        """A fix task per BugSignature of the campaign that has a reproducer, no fix draft
        and is not fixed; how many were new."""
        got = self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "bugsignatures")
        added = 0
        for sig in (got.get("items") if isinstance(got, dict) else []) or []:
            spec, status = sig.get("spec") or {}, sig.get("status") or {}
            # A regression of a bug people marked fixed is recorded in status (the operator
            # never writes the spec: docs/operator.md), and it wants a fix again.
            regressed = (status.get("state") == "regressed"
                         and status.get("regressedGeneration") == (sig.get("metadata") or {}).get("generation"))
            if self.campaign not in (status.get("campaigns") or []) or not spec.get("repro") \
                    or status.get("fixDraft") or (spec.get("state") == "fixed" and not regressed):
                continue
            added += queue.put("fix", f"signature:{spec['signature']}",
                               {"signature": spec["signature"], "repro": spec["repro"],
                                "verdict": spec.get("verdict"), "culprit_op": spec.get("culpritOp")})
        return added

    def publish(self, claims: list[dict[str, Any]], task: dict[str, Any] | None) -> int:
        """Write this run's verified fix claims (full claims-table rows) into the pod's
        result object, beside the earlier ones; how many drafts it now holds."""
        from kubernetes.client.exceptions import ApiException

        drafts = [fix_draft(c, self.agent, task) for c in claims if c["kind"] == "fix" and c["verified"]]
        if not drafts:
            return 0
        name = self.agent
        try:
            old = self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, REPORT_PLURAL, name)
            earlier = json.loads((old.get("spec") or {}).get("result") or "{}").get("drafts") or []
        except ApiException as e:
            if e.status != 404:
                raise
            earlier = []
        except ValueError:
            earlier = []
        mine = {d["signature"] for d in drafts}
        kept = [d for d in earlier if d.get("signature") not in mine] + drafts
        write_result(self.api, result_object(
            namespace=self.namespace, campaign=self.campaign, campaign_uid=self.campaign_uid,
            kind=FIX_DRAFT, key=name, result={"agent": name, "drafts": kept[-DRAFTS_KEPT:]}, name=name))
        return len(kept[-DRAFTS_KEPT:])


def fix_draft(claim: dict[str, Any], agent: str, task: dict[str, Any] | None) -> dict[str, Any]:
    """A verified fix claim as a fix draft: the cure, the gate's decision and evidence (the
    reproducer before and under the cure, the regression run)."""
    c, ev = claim["claim"], claim["evidence"]
    signature = c.get("signature") or ((task or {}).get("payload") or {}).get("signature") or ""
    evidence = {"affected": (ev.get("affected") or {}).get("outcome"),
                "under_cure": (ev.get("under_cure") or {}).get("outcome"),
                "jaxlib": ev.get("jaxlib"), "regression_corpus": ev.get("regression_corpus") or []}
    return {"signature": str(signature), "cure": c.get("cure"), "reproducer": c.get("reproducer"),
            "agent": agent, "model": claim.get("model"), "rationale": str(c.get("rationale") or "")[:500],
            "verified": bool(claim["verified"]), "cured": bool(ev.get("cured")),
            "reason": claim.get("reason"), "regressions": [r.get("script") for r in ev.get("regressions") or []],
            "alsoCures": [r.get("script") for r in ev.get("also_cures") or []],
            "regressionCorpus": len(ev.get("regression_corpus") or []),
            "evidence": json.dumps(evidence, default=str)[:EVIDENCE_CHARS],
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(claim.get("time") or time.time()))}
