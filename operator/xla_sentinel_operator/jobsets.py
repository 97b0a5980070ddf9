"""Multi-host TPU slices, and CPU/GPU multi-host groups (`accelerator.hosts`), as JobSets
(jobset.x-k8s.io/v1alpha2, sigs.k8s.io/jobset): the shape of one slice's JobSet, the names
JobSet gives its hosts, and a JobSet's status read as the roll-up reads a worker Job's.

A slice of `hosts` hosts is one JobSet holding one replicatedJob (HOSTS_JOB) of one
Indexed Job of `hosts` pods. JobSet places every pod of a slice in one GKE node pool
(exclusive topology: one slice per pool, never split across two pools that match the same
selector) and, when any host fails, recreates the whole slice (failurePolicy): a TPU slice
runs its hosts in lockstep, so one lost host stalls the others.

Pure functions; desired.py decides what a campaign wants, campaigns.py and followups.py
apply it.
"""

from __future__ import annotations

from .bodies import (
    Condition,
    Job,
    JobSet,
    JobSpec,
    JobStatus,
    Manifest,
    Meta,
    OwnerReference,
    labels_of,
)

API_VERSION = "jobset.x-k8s.io/v1alpha2"
PLURAL = "jobsets"
KIND = "JobSet"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODEPOOL = "cloud.google.com/gke-nodepool"
# The replicatedJob of a slice: its Job is `<jobset>-hosts-0`, its pods `<jobset>-hosts-0-<h>`.
HOSTS_JOB = "hosts"
# Label JobSet puts on its Jobs and pods: which restart of the slice they belong to.
RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"
# The JobSet's one Job (`<jobset>-hosts-0`) is what desired.JOB_NAME_MAX bounds.
SUFFIX = f"-{HOSTS_JOB}-0"
# Reasons a slice's Job fails for good: retrying the slice would fail the same way (the pod
# failure policy's exit 2, bad input) or run past the deadline it was given again.
FATAL_JOB_REASONS = ["PodFailurePolicy", "DeadlineExceeded"]
# The reason of a JobSet's Failed condition once it restarted its slice maxRestarts times
# (JobSet's constants.ReachedMaxRestartsReason): hosts lost, not a fatal rule.
SPENT_RESTARTS = "ReachedMaxRestarts"
# The slice's podFailurePolicy rule (desired.SLICE_POD_FAILURE_POLICY) that fails its Job
# for a disrupted host (DisruptionTarget): its index is in the Job's failure message, "Pod
# NS/NAME has condition DisruptionTarget matching FailJob rule at index 0", which the
# maintenance rule matches (onJobFailureMessagePatterns, JobSet >= v0.10).
MAINTENANCE_RULE_INDEX = 0
MAINTENANCE_PATTERN = f"matching FailJob rule at index {MAINTENANCE_RULE_INDEX}$"


def job_name(jobset: str) -> str:
    """The one Job of a slice's JobSet."""
    return f"{jobset}{SUFFIX}"


def hostnames(jobset: str, hosts: int) -> list[str]:
    """The DNS names of a slice's hosts, through the headless Service JobSet makes for it
    (named after its subdomain, the JobSet's name): `<jobset>-hosts-0-<h>.<jobset>`.
    libtpu reads them from TPU_WORKER_HOSTNAMES, host h at position h."""
    return [f"{job_name(jobset)}-{h}.{jobset}" for h in range(hosts)]


def jobset_of_writer(writer: str) -> str | None:
    """The JobSet whose host 0 writes the report or result named `writer`
    (cluster.report.writer_name of pod `<jobset>-hosts-0-0-xxxxx`), or None."""
    tail = f"{SUFFIX}-0"
    return writer[:-len(tail)] if writer.endswith(tail) and len(writer) > len(tail) else None


def slice_jobset(*, name: str, namespace: str, labels: dict[str, str], job_labels: dict[str, str],
                 owner: OwnerReference, pod_labels: dict[str, str], pod: Manifest,
                 hosts: int, max_restarts: int, suspend: bool,
                 pod_failure_policy: Manifest | None = None,
                 deadline_s: int | None = None, exclusive: bool = True) -> JobSet:
    """One slice as a JobSet. `labels` go on the JobSet (Kueue reads its queue label there);
    its Job carries `job_labels` (the campaign's, no role: never taken for a worker Job); its pods
    carry `pod_labels` (role, group, revision: the network policy and the Services select on
    them). `suspend`: created suspended (spec.suspend, or Kueue admits it by unsuspending).
    `exclusive`: one slice per node pool (a TPU slice's hosts are its pool's VMs); a CPU or
    GPU group's pods go wherever they fit, several groups to a pool."""
    job_spec: JobSpec = {
        "completionMode": "Indexed", "completions": hosts, "parallelism": hosts,
        # Any failed host fails the Job at once; the JobSet then restarts the whole slice.
        "backoffLimit": 0,
        "template": {"metadata": {"labels": pod_labels}, "spec": pod},
    }
    if pod_failure_policy is not None:
        job_spec["podFailurePolicy"] = pod_failure_policy
    if deadline_s is not None:
        job_spec["activeDeadlineSeconds"] = deadline_s
    return {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": {EXCLUSIVE_TOPOLOGY: NODEPOOL} if exclusive else {},
                     "ownerReferences": [owner]},
        "spec": {
            "suspend": suspend,
            # The hosts' names (hostnames()): JobSet's headless Service, named as the JobSet;
            # they resolve before the pods are ready, as libtpu needs at start.
            "network": {"enableDNSHostnames": True, "subdomain": name,
                        "publishNotReadyAddresses": True},
            # First match wins: a disrupted host restarts the slice without spending
            # maxRestarts (JobSet's documented handling of host maintenance); exit 2 or
            # a deadline fails it for good; any other failed host restarts it, counted.
            "failurePolicy": {"maxRestarts": max_restarts, "rules": [
                {"name": "maintenance", "action": "RestartJobSetAndIgnoreMaxRestarts",
                 "onJobFailureReasons": ["PodFailurePolicy"],
                 "onJobFailureMessagePatterns": [MAINTENANCE_PATTERN]},
                {"name": "fatal", "action": "FailJobSet",
                 "onJobFailureReasons": FATAL_JOB_REASONS}]},
            "replicatedJobs": [{"name": HOSTS_JOB, "replicas": 1, "template": {
                "metadata": {"labels": job_labels}, "spec": job_spec}}],
        },
    }


def true_condition(conditions: list[Condition] | None, kind: str) -> Condition | None:
    """The condition `kind` of a Job or JobSet when it is True, else None."""
    for cond in conditions or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def as_worker_job(js: JobSet) -> Job:
    """A slice's JobSet in the shape the roll-up reads worker Jobs (metadata, spec.completions
    and suspend, status active/ready/succeeded/failed/conditions), with `kind: JobSet` so
    the roll-up leaves its retries to JobSet. Pods: JobSet counts Jobs (one per slice), each
    of `completions` hosts. `failed` is the slice's restarts: each began with a failed host.
    Failed only once JobSet gave up (maxRestarts spent, or a fatal failure)."""
    spec, status = js.get("spec") or {}, js.get("status") or {}
    rjobs = spec.get("replicatedJobs")
    hosts = int((rjobs[0]["template"]["spec"].get("completions") if rjobs else None) or 1)
    counts = {"active": 0, "ready": 0, "succeeded": 0}
    for r in status.get("replicatedJobsStatus") or []:
        counts["active"] += int(r.get("active") or 0) * hosts
        counts["ready"] += int(r.get("ready") or 0) * hosts
        counts["succeeded"] += int(r.get("succeeded") or 0) * hosts
    conditions: list[Condition] = []
    if (done := true_condition(status.get("conditions"), "Completed")) is not None:
        conditions.append({**done, "type": "Complete"})
    if (failed := true_condition(status.get("conditions"), "Failed")) is not None:
        restarts = int(status.get("restarts") or 0)
        conditions.append({**failed, "message": f"{failed.get('message') or failed.get('reason')} "
                                                f"(after {restarts} restarts of the slice)"})
    restarts = int(status.get("restarts") or 0)
    job_status: JobStatus = {"active": counts["active"], "ready": counts["ready"],
                             "succeeded": counts["succeeded"], "failed": restarts,
                             "restarts": restarts, "conditions": conditions}
    meta: Meta = {"name": js["metadata"]["name"],
                  "labels": dict(labels_of(js)),
                  "annotations": dict(js["metadata"].get("annotations") or {})}
    if "uid" in js["metadata"]:  # without one (not stored yet) it is keyed by name, as a Job
        meta["uid"] = js["metadata"]["uid"]
    return {"kind": KIND, "metadata": meta,
            "spec": {"completions": hosts, "suspend": bool(spec.get("suspend"))},
            "status": job_status}

