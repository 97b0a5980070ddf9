"""CPU and GPU multi-host groups (`accelerator.hosts > 1`) as JobSets, pure: one JobSet
per shard whose pods are the hosts of one program stream (host 0 runs the campaign and
reports, hosts 1..N-1 serve it over TCP), what each pod reads from the rendering
(cluster/pod.py host_role: the same coordinator name JobSet's headless Service gives host
0), the slice failure policy (a disrupted host restarts the slice without spending
maxRestarts; a crashed one spends one; exit 2 fails it), and the refusal without JobSet.
No API: test_jobset_maintenance.py runs the failure policy on JobSet's real controller."""

from __future__ import annotations

import re
from typing import Any

import pytest
from xla_sentinel.cluster import pod
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.worker import host_link
from xla_sentinel_operator import desired, jobsets
from xla_sentinel_operator.runtime import Refused, campaign_of

HOSTS2 = {"type": "cpu", "hosts": 2}


def camp(accelerator: dict[str, Any] | None = None, **spec: Any) -> desired.Campaign:
    return desired.Campaign(name="mh", namespace="fuzz", uid="u-1",
                            spec=parse_spec({"workers": 2, "accelerator": accelerator or HOSTS2,
                                             "generator": {"devices": 4}, **spec}))


def env_of(js: dict[str, Any]) -> dict[str, Any]:
    pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod_spec["containers"][0]["env"]}


def pod_environ(js: dict[str, Any], host: int, attempt: str = "0") -> dict[str, str]:
    """The environment the kubelet gives host `host`'s pod: the rendered values, the
    downward API's (its completion index, JobSet's restart-attempt label) and the
    hostname the Job controller gives an Indexed Job's pod (`<job>-<index>`)."""
    environ = {k: v for k, v in env_of(js).items() if isinstance(v, str)}
    environ["JOB_COMPLETION_INDEX"] = str(host)
    environ["HOSTNAME"] = f"{jobsets.job_name(js['metadata']['name'])}-{host}"
    environ[pod.SLICE_TOKEN_ENV] = attempt
    return environ


def test_a_multi_host_cpu_campaign_is_one_jobset_of_its_hosts_per_shard() -> None:
    c = camp()
    sets = desired.worker_jobs(c, default_image="img")
    assert len(sets) == desired.job_count(c.spec) == 2
    assert desired.pod_count(c.spec) == 4
    for shard, js in enumerate(sets):
        name = js["metadata"]["name"]
        assert js["kind"] == "JobSet" and js["metadata"]["labels"][desired.SLICE_LABEL] == str(shard)
        # Not one group per node pool (a TPU slice's exclusivity): both shards fit one pool.
        assert js["metadata"]["annotations"] == {desired.TEMPLATE_ANNOTATION: desired.template_hash(js)}
        job = js["spec"]["replicatedJobs"][0]["template"]["spec"]
        assert job["completions"] == job["parallelism"] == 2 and job["backoffLimit"] == 0
        assert job["template"]["spec"]["subdomain"] == js["spec"]["network"]["subdomain"] == name
        assert js["spec"]["network"]["enableDNSHostnames"] is True
        env = env_of(js)
        assert env["XLA_SENTINEL_SHARD_INDEX"] == str(shard)
        assert env["XLA_SENTINEL_HOSTS"] == "2" and env["XLA_SENTINEL_SUBDOMAIN"] == name
        assert env["XLA_SENTINEL_SLICE_TOKEN"] == {
            "fieldRef": {"fieldPath": f"metadata.labels['{jobsets.RESTART_LABEL}']"}}
        assert "TPU_WORKER_ID" not in env and "JAX_PLATFORMS" not in env  # not a TPU slice
        assert job["template"]["metadata"]["labels"][desired.ROLE_LABEL] == "worker"


def test_each_pod_finds_its_place_and_host_0_at_the_services_name() -> None:
    c = camp()
    js = desired.worker_jobs(c, default_image="img")[0]
    name = js["metadata"]["name"]
    zero = pod.host_role(c.spec, pod_environ(js, 0))
    one = pod.host_role(c.spec, pod_environ(js, 1))
    assert zero is not None and one is not None
    assert (zero.host, one.host, zero.hosts) == (0, 1, 2)
    # Both reach host 0 at the name JobSet's headless Service gives it, on jax's port.
    assert zero.coordinator == one.coordinator == f"{jobsets.hostnames(name, 2)[0]}:{pod.COORDINATOR_PORT}"
    remote = host_link.RemoteHosts.from_environ(pod.driver_environment(zero, pod_environ(js, 0, "3")))
    assert remote == host_link.RemoteHosts(listen=f"0.0.0.0:{host_link.DRIVER_PORT}",
                                           coordinator=zero.coordinator,
                                           bind=f"0.0.0.0:{pod.COORDINATOR_PORT}", token="3")


def test_a_tpu_slices_pods_take_the_same_roles_from_gkes_variables() -> None:
    """A v6e 4x4 slice (4 hosts): the rendering gives TPU_WORKER_ID (the completion index),
    TPU_WORKER_HOSTNAMES, the group's size and the token; host 0 drives, hosts 1..3 reach
    its driver and coordinator at the first hostname. (GKE's own webhook is not run here.)"""
    c = camp({"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4},
             generator={"devices": 8})
    js = desired.worker_jobs(c, default_image="img")[0]
    name = js["metadata"]["name"]
    env = env_of(js)
    assert env["XLA_SENTINEL_HOSTS"] == "4" and env["XLA_SENTINEL_SLICE_TOKEN"] == {
        "fieldRef": {"fieldPath": f"metadata.labels['{jobsets.RESTART_LABEL}']"}}
    first = jobsets.hostnames(name, 4)[0]
    for h in range(4):
        environ = {**pod_environ(js, h), "TPU_WORKER_ID": str(h)}  # the downward API's index
        place = pod.host_role(c.spec, environ)
        assert place == pod.SliceHost(h, 4, f"{first}:{pod.COORDINATOR_PORT}")
        assert place.driver == f"{first}:{host_link.DRIVER_PORT}"
    assert pod.group_spec(c.spec, place).accelerator.hosts == 4  # the layout hosts4x2


def test_a_pod_whose_group_disagrees_with_the_spec_is_bad_input() -> None:
    c = camp()
    js = desired.worker_jobs(c, default_image="img")[0]
    environ = {**pod_environ(js, 1), "XLA_SENTINEL_HOSTS": "4"}
    with pytest.raises(pod.SpecError, match="does not have spec.accelerator.hosts=2"):
        pod.host_role(c.spec, environ)
    beyond = {**pod_environ(js, 1), "JOB_COMPLETION_INDEX": "2", "HOSTNAME": f"{jobsets.job_name(js['metadata']['name'])}-2"}
    with pytest.raises(pod.SpecError, match="not a host of a group of 2"):
        pod.host_role(c.spec, beyond)
    # Outside a JobSet (no XLA_SENTINEL_HOSTS) the engine runs every host itself.
    assert pod.host_role(c.spec, {}) is None
    assert pod.host_role(camp({"type": "cpu"}).spec, pod_environ(js, 1)) is None


# The Job controller's failure messages for a podFailurePolicy FailJob rule
# (kubernetes pkg/controller/job/pod_failure_policy.go), rule 0 the disruption, rule 1 exit 2.
DISRUPTED = "Pod fuzz/mh-hosts-0-1-x7k2p has condition DisruptionTarget matching FailJob rule at index 0"
EXIT_2 = "Container runner for pod fuzz/mh-hosts-0-1-x7k2p failed with exit code 2 matching FailJob rule at index 1"


def _first_rule(js: dict[str, Any], reason: str, message: str) -> str:
    """The action JobSet takes for a Job failed with (reason, message): the first rule
    whose reasons and message patterns match, RestartJobSet where none does."""
    for rule in js["spec"]["failurePolicy"]["rules"]:
        if reason not in rule.get("onJobFailureReasons", [reason]):
            continue
        patterns = rule.get("onJobFailureMessagePatterns") or []
        if patterns and not any(re.search(p, message) for p in patterns):
            continue
        return str(rule["action"])
    return "RestartJobSet"


@pytest.mark.parametrize("accelerator", [HOSTS2, {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice",
                                                  "tpuTopology": "4x4", "count": 4}], ids=["cpu", "tpu"])
def test_a_disrupted_host_restarts_the_slice_without_spending_its_budget(accelerator) -> None:
    c = camp(accelerator)
    js = desired.worker_jobs(c, default_image="img")[0]
    rules = js["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"]
    # Rule 0 fails the Job on a disruption (a replaced host alone cannot rejoin the group).
    assert rules[jobsets.MAINTENANCE_RULE_INDEX] == {
        "action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[1]["onExitCodes"]["values"] == [2] and rules[1]["action"] == "FailJob"
    assert _first_rule(js, "PodFailurePolicy", DISRUPTED) == "RestartJobSetAndIgnoreMaxRestarts"
    assert _first_rule(js, "PodFailurePolicy", EXIT_2) == "FailJobSet"
    assert _first_rule(js, "DeadlineExceeded", "Job was active longer than specified deadline") == "FailJobSet"
    # A host killed or crashed: the Job fails by its backoffLimit 0, a counted restart.
    assert _first_rule(js, "BackoffLimitExceeded", "Job has reached the specified backoff limit") \
        == "RestartJobSet"
    assert js["spec"]["failurePolicy"]["maxRestarts"] == desired.SLICE_RESTARTS


def test_followups_of_a_multi_host_cpu_campaign_are_one_pod_jobs() -> None:
    # Bisection of a multi-host finding runs on one process (docs/spmd.md).
    c = camp()
    job = desired.bisector_job(c, {"signature": "00000000000000aa", "id": "s1-i2", "dir": "findings/x"},
                               "main-0", default_image="img")
    assert job["kind"] == "Job"


def test_without_jobset_a_multi_host_cpu_campaign_is_refused() -> None:
    body = {"metadata": {"name": "mh", "namespace": "fuzz", "uid": "u"},
            "spec": {"accelerator": HOSTS2, "generator": {"devices": 4}}}
    with pytest.raises(Refused) as refused:
        campaign_of(body, jobset=False)
    assert refused.value.reason == "JobSetUnavailable" and "accelerator.hosts: 2" in str(refused.value)
    campaign_of(body, jobset=True)
