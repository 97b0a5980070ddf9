"""The slice failure policy the operator renders (jobsets.slice_jobset,
desired.SLICE_POD_FAILURE_POLICY), on the real control plane's Job controller and JobSet's
real controller (v0.10.1, tests/controlplane/jobset.py): a host with DisruptionTarget
(maintenance, eviction) restarts the whole slice without spending maxRestarts; a host
that fails otherwise restarts it and spends one; exit 2 fails the JobSet for good.

The JobSet is the operator's rendering of a 2-host CPU campaign (its owner reference
dropped: no FuzzCampaign here). No kubelet runs: a host's pod is failed through the status
subresource, as a kubelet or the eviction machinery would."""

from __future__ import annotations

from typing import Any

import pytest
from controlplane.jobset import built
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, jobsets

from .test_jobset import JOBSETS, terminated, wait

pytestmark = pytest.mark.skipif(not built(), reason="JobSet not built: run `make control-plane`")


def hosts_jobset(ns: str) -> dict[str, Any]:
    c = desired.Campaign(name="mh", namespace=ns, uid="u-1", spec=parse_spec(
        {"workers": 1, "accelerator": {"type": "cpu", "hosts": 2}, "generator": {"devices": 4}}))
    (js,) = desired.worker_jobs(c, default_image="runner:test", service_account="default")
    js["metadata"].pop("ownerReferences")
    return js


def attempt_pods(api: Any, ns: str, attempt: int) -> list[dict[str, Any]]:
    return [p for p in api.all("v1/pods", ns, {jobsets.RESTART_LABEL: str(attempt)})
            if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") != "Failed"]


def fail(api: Any, ns: str, pod: dict[str, Any], *, exit_code: int, disrupted: bool = False) -> None:
    conditions = [{"type": "Ready", "status": "False"}]
    if disrupted:
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                           "message": "Eviction API: evicting"})
    api.patch("v1/pods", ns, pod["metadata"]["name"], {"status": {
        "phase": "Failed", "conditions": conditions,
        "containerStatuses": [{"name": "runner", "image": "runner:test", "imageID": "", "ready": False,
                               "restartCount": 0, "state": {"terminated": {"exitCode": exit_code}}}]}},
        sub="status")


def status(api: Any, ns: str, name: str) -> dict[str, Any]:
    return (api.get(JOBSETS, ns, name) or {}).get("status") or {}


def test_maintenance_restarts_the_slice_free_a_crash_spends_one_and_exit_2_fails_it(api, ns, jobset) -> None:
    js = hosts_jobset(ns)
    name = js["metadata"]["name"]
    api.create(JOBSETS, ns, js)

    def restart_after(attempt: int, **how: Any) -> dict[str, Any]:
        hosts = wait(lambda: (p := attempt_pods(api, ns, attempt)) and len(p) == 2 and p,
                     what=f"the 2 hosts of attempt {attempt}")
        fail(api, ns, next(p for p in hosts if p["metadata"]["annotations"][
            "batch.kubernetes.io/job-completion-index"] == "1"), **how)
        return wait(lambda: terminated(api, ns) or (s := status(api, ns, name)).get("restarts") == attempt + 1 and s,
                    timeout=90, what=lambda: f"restart {attempt + 1}; JobSet status {status(api, ns, name)}, "
                    f"Jobs {[j.get('status') for j in api.all('batch/v1/jobs', ns)]}")

    # Host 1 evicted for maintenance: the slice restarts, the budget untouched.
    after = restart_after(0, exit_code=143, disrupted=True)
    assert int(after.get("restartsCountTowardsMax") or 0) == 0, after
    # Host 1 killed (137): the slice restarts, one restart spent.
    after = restart_after(1, exit_code=137)
    assert int(after.get("restartsCountTowardsMax") or 0) == 1, after
    # Bad input on a host (exit 2): the JobSet fails for good, no restart.
    hosts = wait(lambda: (p := attempt_pods(api, ns, 2)) and len(p) == 2 and p, what="attempt 2's hosts")
    fail(api, ns, hosts[0], exit_code=2)
    failed = wait(lambda: terminated(api, ns) or next(
        (c for c in status(api, ns, name).get("conditions") or []
         if c["type"] == "Failed" and c["status"] == "True"), None),
        timeout=90, what=lambda: f"the JobSet failed; status {status(api, ns, name)}")
    assert status(api, ns, name)["restarts"] == 2, failed
