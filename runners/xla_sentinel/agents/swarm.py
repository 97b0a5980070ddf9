"""An agent pod of a campaign's swarm (FuzzCampaign spec.agents; docs/agents.md "Running a
swarm"): what it needs of the cluster beyond the agent loop.

- the task queue: Leases of the campaign's namespace (`kube_tasks.KubeTaskQueue`), shared
  by every agent pod of the campaign;
- the tasks only the cluster knows: BugSignatures of the campaign with a reproducer and no
  fix draft yet become fix tasks (keys `signature:ID`, the same as `Workbench.seed_tasks`
  gives a local signature, so seeding is idempotent across pods and sources);
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
import time
from dataclasses import dataclass
from typing import Any

from xla_sentinel.agents.kube_tasks import KubeTaskQueue
from xla_sentinel.cluster.report import (
    GROUP,
    REPORT_PLURAL,
    VERSION,
    result_object,
    write_result,
    writer_name,
)

FIX_DRAFT = "fixDraft"
DRAFTS_KEPT = 4  # fix drafts one pod's result holds (the newest), within the result's size
EVIDENCE_CHARS = 2000


def in_pod(env: dict[str, str] | None = None) -> bool:
    """Whether this agent runs in a swarm pod (the operator says so)."""
    return (env if env is not None else os.environ).get("XLA_SENTINEL_TASK_QUEUE") == "kube"


def _custom_api() -> Any:
    import kubernetes

    kubernetes.config.load_incluster_config()
    return kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient())


@dataclass
class Swarm:
    """The cluster side of one agent pod."""

    api: Any  # kubernetes.client.CustomObjectsApi
    namespace: str
    campaign: str
    campaign_uid: str
    pod: str

    @classmethod
    def from_env(cls, api: Any = None) -> Swarm:
        env = os.environ
        missing = [k for k in ("XLA_SENTINEL_CAMPAIGN", "XLA_SENTINEL_NAMESPACE", "XLA_SENTINEL_POD")
                   if not env.get(k)]
        if missing:
            raise ValueError(f"an agent pod needs {', '.join(missing)} (set by the operator)")
        return cls(api if api is not None else _custom_api(), env["XLA_SENTINEL_NAMESPACE"],
                   env["XLA_SENTINEL_CAMPAIGN"], env.get("XLA_SENTINEL_CAMPAIGN_UID", ""),
                   env["XLA_SENTINEL_POD"])

    @property
    def agent(self) -> str:
        """This pod's name in leases and claims: `<job>-<index>`, the same for a retried pod
        of one index (and the one WorkerReport name it may write)."""
        return writer_name(self.pod)

    @property
    def queue(self) -> KubeTaskQueue:
        return KubeTaskQueue(self.api, self.namespace, self.campaign, self.campaign_uid)

    def seed(self, queue: KubeTaskQueue) -> int:
        """Queue a fix task per BugSignature of the campaign that has a reproducer, no fix
        draft and is not fixed; how many were new."""
        got = self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "bugsignatures")
        added = 0
        for sig in (got.get("items") if isinstance(got, dict) else []) or []:
            spec, status = sig.get("spec") or {}, sig.get("status") or {}
            if self.campaign not in (status.get("campaigns") or []) or not spec.get("repro") \
                    or status.get("fixDraft") or spec.get("state") == "fixed":
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
