"""What a (restarted) operator lists and keeps of worker pods, without a cluster: kopf's own
settings, as handlers.configure() sets them. bench/operator_scale.py --restart measures the
memory; tests/k8s/test_kwok.py counts a drained pod's disruption on the real control plane."""

from __future__ import annotations

import kopf
from kopf._cogs.structs.references import Resource
from xla_sentinel.cluster.report import CAMPAIGN_LABEL, REVISION_LABEL
from xla_sentinel_operator import desired, handlers, rollup
from xla_sentinel_operator.config import Config, PeeringConfig
from xla_sentinel_operator.runtime import Runtime

PODS = Resource(group="", version="v1", plural="pods")


def configured() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    handlers.configure(settings, Runtime(Config(peering=PeeringConfig(standalone=True))))
    return settings


def worker_pod(phase: str, conditions: list[dict[str, str]] | None = None,
               reason: str | None = None) -> dict[str, object]:
    status: dict[str, object] = {"phase": phase, "conditions": conditions or []}
    if reason:
        status["reason"] = reason
    return {"metadata": {"name": "nightly-0-x", "labels": {
                desired.ROLE_LABEL: "worker", CAMPAIGN_LABEL: "nightly", REVISION_LABEL: "r1",
                "batch.kubernetes.io/controller-uid": "job-uid"}},
            "status": status}


def test_only_failed_worker_pods_are_listed_and_streamed() -> None:
    # A Pending or Running pod is never listed: a restarted operator facing thousands of
    # them held each whole until its indexes were filled.
    settings = configured()
    assert settings.watching.field_selectors.collect(PODS) == ["status.phase=Failed"]
    (labels,) = settings.watching.label_selectors.collect(PODS)
    assert labels == f"{desired.ROLE_LABEL}=worker,{CAMPAIGN_LABEL}"
    # The other kinds are listed whole as before: Jobs, reports, campaigns, signatures.
    for other in (Resource(group="batch", version="v1", plural="jobs"),
                  Resource(group="xlasentinel.dev", version="v1alpha1", plural="workerreports"),
                  Resource(group="xlasentinel.dev", version="v1alpha1", plural="fuzzcampaigns")):
        assert settings.watching.field_selectors.collect(other) == []


def test_a_disrupted_pod_is_counted_once_failed_as_the_selector_lets_it_through() -> None:
    drained = [{"type": rollup.DISRUPTION_CONDITION, "status": "True",
                "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
                "lastTransitionTime": "2026-12-07T10:00:00Z"}]
    # What the kubelet (or kwok's POD_TERMINATE) leaves of a drained pod: Failed, the
    # condition kept; and the kubelet's own eviction. Both are counted.
    failed = rollup.disrupted_pod(worker_pod("Failed", drained))
    assert failed is not None and failed["reason"] == "EvictionByEvictionAPI"
    evicted = rollup.disrupted_pod(worker_pod("Failed", reason="Evicted"))
    assert evicted is not None and evicted["reason"] == "Evicted"
    # A worker that failed on its own is listed (Failed) but not kept.
    assert rollup.disrupted_pod(worker_pod("Failed")) is None
