"""The slice failure policy the operator renders (jobsets.slice_jobset,
desired.SLICE_POD_FAILURE_POLICY), on the real control plane's Job controller and JobSet's
real controller (v0.10.1, tests/controlplane/jobset.py): a host with DisruptionTarget
(maintenance, eviction) restarts the whole slice without spending maxRestarts; a host
that fails otherwise restarts it and spends one; exit 2 fails the JobSet for good.

The JobSet is the operator's rendering of a v6e 4x4 TPU campaign, one 4-host slice (its
owner reference dropped: no FuzzCampaign here), on the two GKE v6e 4x4 node pools kwok runs
(conftest.py's `slice_pools`, tests/controlplane/kwok.py), the real kube-scheduler placing
the hosts. Nothing here binds a pod or writes a pod's status:
- maintenance is a drain's eviction of a host (`kwok.evict`: the Eviction API, as `kubectl
  drain` before a node's maintenance): kube-apiserver gives the pod DisruptionTarget
  (reason EvictionByEvictionAPI) and deletes it, and kwok ends it as a kubelet would
  (kwok.py's POD_TERMINATE: Failed, exit 143, its conditions kept);
- a killed host (exit 137) and bad input (exit 2) are kwok's chaos stage with that exit
  code (`kwok.fail_pod`)."""

from __future__ import annotations

from typing import Any

import pytest
from controlplane.jobset import built
from controlplane.kit import Api
from controlplane.kwok import evict, fail_pod
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, jobsets

from .test_jobset import JOBSETS, placed, wait

pytestmark = pytest.mark.skipif(not built(), reason="JobSet not built: run `make control-plane`")

V6E_4X4 = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4}
# A finalizer of the test's own on the evicted host: it keeps the pod, Failed, until the
# test has read the condition kube-apiserver gave it (kwok removes a deleted pod within a
# second once nothing holds it), and holds the slice's restart until released.
HOLD = "tests.xlasentinel.dev/read-before-delete"


def slice_jobset(ns: str) -> dict[str, Any]:
    c = desired.Campaign(name="mh", namespace=ns, uid="u-1", spec=parse_spec(
        {"workers": 1, "accelerator": V6E_4X4}))
    (rendered,) = desired.worker_jobs(c, default_image="runner:test", service_account="default")
    js: dict[str, Any] = dict(rendered)  # a JobSet: edited below as plain JSON
    js["metadata"].pop("ownerReferences")
    # The workers' 60 s grace period only lengthens every restart here: no worker runs to
    # use it, kwok removes a deleted pod at a random time within it (pod/general's
    # pod-delete), and JobSet recreates the slice's Job only once the old pods are gone.
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"] = 0
    return js


def status(api: Api, ns: str, name: str) -> dict[str, Any]:
    return (api.get(JOBSETS, ns, name) or {}).get("status") or {}


def hosts_of(api: Api, ns: str, name: str, pools: dict[str, list[str]], attempt: int
             ) -> list[dict[str, Any]]:
    """The slice's 4 hosts of restart `attempt` once the scheduler placed them in one pool
    and kwok runs them (test_jobset.py's `placed`, its placement asserted)."""
    def of_attempt() -> list[dict[str, Any]] | None:
        got = placed(api, ns, jobsets.job_name(name), pools)
        return got[1] if got and all(p["metadata"]["labels"].get(jobsets.RESTART_LABEL) == str(attempt)
                                     for p in got[1]) else None
    hosts: list[dict[str, Any]] = wait(
        of_attempt, timeout=60, what=lambda: f"the hosts of attempt {attempt} running; pods "
        f"{[(p['metadata']['name'], p['spec'].get('nodeName'), p['status'].get('phase')) for p in api.all('v1/pods', ns)]}")
    return hosts


def test_maintenance_restarts_the_slice_free_a_crash_spends_one_and_exit_2_fails_it(
        api: Api, ns: str, jobset: Any, slice_pools: dict[str, list[str]]) -> None:
    js = slice_jobset(ns)
    name = js["metadata"]["name"]
    api.create(JOBSETS, ns, js)

    def restarted(attempt: int) -> dict[str, Any]:
        after: dict[str, Any] = wait(
            lambda: (s := status(api, ns, name)).get("restarts") == attempt and s, timeout=90,
            what=lambda: f"restart {attempt}; JobSet status {status(api, ns, name)}, "
            f"Jobs {[j.get('status') for j in api.all('batch/v1/jobs', ns)]}")
        return after

    # Host 1 evicted for maintenance (a drain): DisruptionTarget from kube-apiserver, the
    # pod ended by kwok; the slice restarts, the budget untouched.
    host = hosts_of(api, ns, name, slice_pools, 0)[1]["metadata"]["name"]
    code, out = api.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{host}",
                            {"metadata": {"finalizers": [HOLD]}},  # beside the Job's own
                            "application/strategic-merge-patch+json")
    assert code == 200 and "batch.kubernetes.io/job-tracking" in out["metadata"]["finalizers"], out
    try:
        evict(api, ns, host)
        after = restarted(1)
        assert int(after.get("restartsCountTowardsMax") or 0) == 0, after
        evicted = api.get("v1/pods", ns, host)
        assert evicted is not None and evicted["status"]["phase"] == "Failed", evicted
        (disruption,) = [c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (disruption["status"], disruption["reason"]) == ("True", "EvictionByEvictionAPI"), disruption
        assert evicted["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
    finally:  # the pod goes, and with it the old Job: JobSet then makes attempt 1's
        api.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{host}",
                    {"metadata": {"$deleteFromPrimitiveList/finalizers": [HOLD]}},
                    "application/strategic-merge-patch+json")

    # Host 1 killed (137, kwok's chaos stage): the slice restarts, one restart spent.
    fail_pod(api, ns, hosts_of(api, ns, name, slice_pools, 1)[1]["metadata"]["name"], exit_code=137)
    after = restarted(2)
    assert int(after.get("restartsCountTowardsMax") or 0) == 1, after

    # Bad input on a host (exit 2): the JobSet fails for good, no restart.
    fail_pod(api, ns, hosts_of(api, ns, name, slice_pools, 2)[0]["metadata"]["name"], exit_code=2)
    failed = wait(lambda: next(
        (c for c in status(api, ns, name).get("conditions") or []
         if c["type"] == "Failed" and c["status"] == "True"), None),
        timeout=90, what=lambda: f"the JobSet failed; status {status(api, ns, name)}")
    assert status(api, ns, name)["restarts"] == 2, failed
