"""Pure functions from a campaign spec to the Jobs that should exist: worker Jobs (one
Indexed Job per runner image; each index is one seed shard; on a multi-host TPU slice, or
a CPU/GPU campaign of `accelerator.hosts > 1`, one JobSet per shard, jobsets.py) and
bisector and fix-verification Jobs.

No API calls here; the workflows (campaigns.py, followups.py) apply these manifests to
the cluster.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from xla_sentinel.cluster.report import (
    CAMPAIGN_LABEL,
    LABEL_VALUE_MAX,
    REVISION_LABEL,
    dns_name,
    label_value,
)
from xla_sentinel.spec.campaign import API_VERSION, CampaignSpec

from . import jobsets, tpu
from .bodies import (
    EnvVar,
    Job,
    JobSet,
    JobSpec,
    Manifest,
    OwnerReference,
    Workload,
    job_spec,
    job_status,
)

ROLE_LABEL = "xlasentinel.dev/role"
GROUP_LABEL = "xlasentinel.dev/group"
SIGNATURE_LABEL = "xlasentinel.dev/signature"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# On a queued Indexed worker Job: the fewest of its pods Kueue may admit (spec.minWorkers).
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
# Kueue passes a queued Job's annotations under this prefix on to the ProvisioningRequest it
# makes for it (its ClusterQueue's provisioning admission check), as the request's
# parameters: spec.provisioning.
PROVREQ_PREFIX = "provreq.kueue.x-k8s.io/"
TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
# The machine type of a node: where two node pool shapes share a topology (v6e 2x4 on one
# VM or on two), the only label that tells them apart.
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU_ACCELERATOR = "cloud.google.com/gke-accelerator"
TPU_RESOURCE = "google.com/tpu"
GPU_RESOURCE = "nvidia.com/gpu"
ARTIFACTS_MOUNT = "/artifacts"
MAIN_GROUP = "main"
# Pods of one index that may fail before the Job gives that index up.
BACKOFF_PER_INDEX = 3
# An Indexed Job's pods are host-named `<job>-<index>`, a DNS label (<= 63), and named
# `<job>-<index>-` plus 5 random characters, where the Job controller cuts a generateName
# longer than 58 (names.MaxGeneratedNameLength) inside the job name. Kept whole, the pod
# name minus its suffix is `<job>-<index>`: the WorkerReport name the chart's admission
# policy binds to the pod (cluster.report.writer_name). An index has at most 4 digits
# (spec.workers <= 4096).
JOB_NAME_MAX = 58 - len("-4095-")
# A multi-host slice's JobSet: its one Job, `<jobset>-hosts-0`, is bounded as any Job.
JOBSET_NAME_MAX = JOB_NAME_MAX - len(jobsets.SUFFIX)
# The downward-API env var holding the pod's name (its report name comes from it).
POD_ENV: EnvVar = {"name": "XLA_SENTINEL_POD",
                   "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


@dataclass(frozen=True)
class Campaign:
    """What the pure functions need of a FuzzCampaign object."""

    name: str
    namespace: str
    uid: str
    spec: CampaignSpec
    # The campaign's kueue.x-k8s.io/priority-class label (a Kueue WorkloadPriorityClass),
    # which its queued Jobs carry: Kueue orders and preempts by it.
    priority_class: str | None = None


@dataclass(frozen=True)
class WorkerGroup:
    """Targets that share one runner image; they run in one Indexed Job."""

    name: str
    image: str | None
    targets: tuple[str, ...]


def short_hash(value: object, n: int = 8) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def dns_label(*parts: str, limit: int = LABEL_VALUE_MAX) -> str:
    """Join parts into a DNS-1123 label (no dots, <= `limit` chars), hashed when too long."""
    return dns_name(*parts, limit=min(limit, LABEL_VALUE_MAX))


def job_name(*parts: str) -> str:
    """A Job name short enough for its pods' `<job>-<index>` hostnames and job-name labels."""
    return dns_label(*parts, limit=JOB_NAME_MAX)


def jobset_name(*parts: str) -> str:
    """A JobSet name short enough for its Job's (jobsets.job_name) and pods' names. JobSet
    checks the names it derives as DNS-1035 labels (a letter first): a campaign name that
    starts with a digit gets `js-` in front."""
    name = dns_label(*parts, limit=JOBSET_NAME_MAX)
    return name if name[:1].isalpha() else dns_label("js", *parts, limit=JOBSET_NAME_MAX)


def campaign_selector(name: str) -> dict[str, str]:
    """The label selector of a campaign's children; the same value its children are given."""
    return {CAMPAIGN_LABEL: label_value(name)}


def worker_groups(spec: CampaignSpec) -> list[WorkerGroup]:
    """Targets without an image run in the campaign image; each other image is its own
    group, so a cross-version target runs in the jaxlib of its image."""
    by_image: dict[str | None, list[str]] = {}
    for t in spec.targets:
        by_image.setdefault(t.image, []).append(t.name)
    groups = []
    for image, names in by_image.items():
        name = MAIN_GROUP if image is None else f"img-{short_hash(image, 6)}"
        groups.append(WorkerGroup(name=name, image=image, targets=tuple(names)))
    return groups


class ImageError(ValueError):
    """A campaign's runner image cannot run its targets (refused before any Job)."""


# On a FuzzCampaign: the platform (cpu, gpu, tpu) its spec.image was built for, where the
# operator cannot tell it from the images it was configured with.
IMAGE_PLATFORM_ANNOTATION = "xlasentinel.dev/image-platform"


def platform(spec: CampaignSpec) -> str:
    """The accelerator platform a campaign's pods run on: spec.accelerator.type. One pod sits
    on one node, so every target must run there: CPU targets run anywhere (every runner
    image holds jax's CPU backend), a GPU or TPU target only on a campaign of that
    accelerator type. A campaign mixing GPU and TPU targets is refused: split it into one
    campaign per platform."""
    acc = spec.accelerator.type
    for i, t in enumerate(spec.targets):
        if t.platform not in ("cpu", acc):
            others = sorted({x.platform for x in spec.targets} - {"cpu"})
            hint = (f"campaigns mix no accelerators ({' and '.join(others)} targets): split it "
                    "into one campaign per platform" if len(others) > 1
                    else f"set spec.accelerator.type: {t.platform}")
            raise ImageError(f"spec.targets[{i}].platform: {t.platform} target {t.name!r} cannot "
                             f"run on a {acc} campaign's pods; {hint}")
    return acc


def repository(image: str) -> str:
    """An image reference without its tag and digest (registry/path/name)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def image_platform(image: str, images: dict[str, str], declared: str | None = None) -> str | None:
    """The platform `image` was built for: `declared` (the campaign's
    IMAGE_PLATFORM_ANNOTATION) when given, else that of the configured runner image from the
    same repository; None when it cannot be told (an image of the user's own)."""
    if declared:
        return declared
    for name, known in images.items():
        if repository(known) == repository(image):
            return name
    return None


def runner_image(spec: CampaignSpec, images: dict[str, str], declared: str | None = None) -> str:
    """The image of a campaign's pods where a target names none: spec.image, else the
    configured image of its platform. ImageError when a GPU or TPU campaign would get an
    image of another platform (without CUDA or libtpu its pods would hold accelerators jax
    cannot open), or when its targets mix platforms."""
    want = platform(spec)
    if declared is not None and declared not in images:
        raise ImageError(f"annotation {IMAGE_PLATFORM_ANNOTATION}: {declared!r} is no platform; "
                         f"use one of {', '.join(sorted(images))}")
    explicit = [("spec.image", spec.image, declared)] if spec.image else []
    explicit += [(f"spec.targets[{i}].image", t.image, None)
                 for i, t in enumerate(spec.targets) if t.image]
    for where, image, said in explicit:
        got = image_platform(str(image), images, said)
        if got is not None and got != want:
            raise ImageError(f"{where}: {image} is a {got} runner image, but the campaign runs on "
                             f"{want} (spec.accelerator.type); use the {want} image "
                             f"{images[want]}, or leave spec.image unset for it")
    return spec.image or images[want]


# Spec fields the worker pods do not read: suspend is applied to the Jobs, alert routing in
# the operator, agents run as their own Jobs (agents.py), minWorkers and provisioning are
# Kueue's (annotations of the Jobs). Changing them rolls no revision.
NOT_FOR_WORKERS = ("suspend", "alerts", "agents", "minWorkers", "provisioning")


def _default(f: dataclasses.Field[Any]) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING  # a required field: always written


def _set_fields(value: object) -> object:
    """`value` as plain data with every dataclass field at its default left out (None
    fields too, as CampaignSpec.to_dict leaves them out), so that parse_spec fills the same
    values back in. Nested records are cut against their own class's defaults, which is
    what parse_spec builds them from."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, object] = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is None or v == _default(f):
                continue
            out[f.name] = _set_fields(v)
        return out
    if isinstance(value, dict):
        return {k: _set_fields(x) for k, x in value.items()}
    if isinstance(value, list):
        return [_set_fields(x) for x in value]
    return value


def worker_spec(spec: CampaignSpec) -> dict[str, Any]:
    """The spec as the worker pods get it (XLA_SENTINEL_SPEC): the fields set to something
    other than their default, without NOT_FOR_WORKERS. The worker's parse_spec fills the
    defaults back in. Left out, a field an operator upgrade adds with a default changes
    neither the pod template nor the revision: the upgrade recreates no Job."""
    data = cast(dict[str, Any], _set_fields(spec))
    for key in NOT_FOR_WORKERS:
        data.pop(key, None)
    return data


def revision(spec: CampaignSpec) -> str:
    """Hash of what the worker pods compute from (worker_spec); a change means new worker
    Jobs (named by it) whose reports count afresh. `suspend`, alert routing and agents are
    applied without a new revision. How the operator renders the pods (image, env,
    security context, failure policy) is the template hash's (TEMPLATE_ANNOTATION)."""
    return short_hash(worker_spec(spec), 10)


# On a worker Job or slice JobSet: the hash of what the operator rendered for it
# (template_hash). A Job of the current revision whose hash differs from the one rendered
# now (an operator upgrade that changes the pods' env, security context or failure policy;
# a new default runner image) is replaced; Job pod templates are immutable.
TEMPLATE_ANNOTATION = "xlasentinel.dev/template-hash"


def template_hash(workload: Workload) -> str:
    """The hash of a rendered worker Job or JobSet: its labels and spec, without
    spec.suspend (the operator and Kueue flip it on the live object)."""
    spec = {k: v for k, v in workload["spec"].items() if k != "suspend"}
    rendered: dict[str, Any] = {"labels": workload["metadata"].get("labels") or {}, "spec": spec}
    # Kueue reads it when it makes the Job's Workload: a change needs a new Job. Absent, the
    # hash is what it was before the annotation existed (no Job replaced by an upgrade).
    annotations = workload["metadata"].get("annotations") or {}
    min_parallelism = annotations.get(MIN_PARALLELISM_ANNOTATION)
    if min_parallelism is not None:
        rendered["minParallelism"] = min_parallelism
    # The same for the ProvisioningRequest's parameters, read when Kueue makes the request.
    provisioning = {k: v for k, v in annotations.items() if k.startswith(PROVREQ_PREFIX)}
    if provisioning:
        rendered["provisioning"] = provisioning
    return short_hash(rendered, 10)


def provisioning_annotations(spec: CampaignSpec) -> dict[str, str]:
    """What a queued Job or JobSet carries for the ProvisioningRequest Kueue makes for it
    (spec.provisioning; none without a queue)."""
    if not spec.queueName or spec.provisioning is None:
        return {}
    return {f"{PROVREQ_PREFIX}maxRunDurationSeconds": str(spec.provisioning.maxRunDurationSeconds)}


def owner_reference(c: Campaign) -> OwnerReference:
    return {"apiVersion": API_VERSION, "kind": "FuzzCampaign", "name": c.name, "uid": c.uid,
            "controller": True, "blockOwnerDeletion": True}


def scheduling(spec: CampaignSpec) -> tuple[dict[str, str], list[Manifest], Manifest]:
    """(nodeSelector, tolerations, container resources) for the campaign's accelerator."""
    acc = spec.accelerator
    selector = dict(spec.nodeSelector)
    tolerations = [dict(t) for t in spec.tolerations]
    resources: Manifest = {k: dict(v) if isinstance(v, dict) else v
                           for k, v in spec.resources.items()}
    device = None
    if acc.type == "tpu":
        selector[TPU_ACCELERATOR] = str(acc.tpuAccelerator)
        selector[TPU_TOPOLOGY] = str(acc.tpuTopology)
        s = _slice(spec)
        if s is not None and (s.ambiguous or acc.tpuMachineType):
            selector[INSTANCE_TYPE] = s.machine_type
        device = TPU_RESOURCE
    elif acc.type == "gpu":
        if acc.gpuType:
            selector[GPU_ACCELERATOR] = acc.gpuType
        device = GPU_RESOURCE
    if device:
        # Extended resources must be equal in requests and limits.
        for kind in ("requests", "limits"):
            resources.setdefault(kind, {})[device] = str(acc.count)
        if not any(t.get("key") == device for t in tolerations):
            tolerations.append({"key": device, "operator": "Exists", "effect": "NoSchedule"})
    return selector, tolerations, resources


# Node-local scratch of a worker pod. Without a sizeLimit an emptyDir fills the node's
# boot disk (a TPU VM's is small) until the kubelet evicts every pod there under disk
# pressure; with one, only the pod that overfills it is evicted. /tmp holds jax's
# compilation caches (HOME=/tmp); the artifacts folder, without a PVC, the engine's store
# and the finding folders until they are uploaded.
TMP_SIZE = "2Gi"
ARTIFACTS_SIZE = "8Gi"
# What the scheduler reserves of a node's ephemeral storage per worker pod (the caches and
# the store as they usually are, not their limits), unless spec.resources names it.
EPHEMERAL_REQUEST = "1Gi"
EPHEMERAL = "ephemeral-storage"
# A worker pod's time between SIGTERM and SIGKILL. On SIGTERM the engine finishes the
# programs in flight and writes its last report, and the process that owns the TPU or GPU
# takes up to 30 s to exit and release it (engine worker/devices.py); Kubernetes'
# default of 30 s leaves none of that. Graceful node shutdown (spot, maintenance) may cut
# it to the node's own shutdown period.
TERMINATION_GRACE_S = 60


def _volumes(spec: CampaignSpec) -> tuple[list[Manifest], list[Manifest]]:
    volume: Manifest
    if spec.artifacts.pvc:
        volume = {"name": "artifacts", "persistentVolumeClaim": {"claimName": spec.artifacts.pvc}}
    else:
        volume = {"name": "artifacts", "emptyDir": {"sizeLimit": ARTIFACTS_SIZE}}
    # The root filesystem is read-only; the runner image sets HOME=/tmp for jax's caches.
    tmp = {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}}
    return [volume, tmp], [{"name": "artifacts", "mountPath": ARTIFACTS_MOUNT},
                           {"name": "tmp", "mountPath": "/tmp"}]


# Pod Security "restricted": workers run untrusted-by-default compiler output, and
# namespaces that enforce the profile must admit them. uid 10001 is the image's user.
POD_SECURITY = {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                "fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                      "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                      "seccompProfile": {"type": "RuntimeDefault"}}


def _labels(c: Campaign, role: str, **extra: str) -> dict[str, str]:
    labels = {**campaign_selector(c.name), ROLE_LABEL: role, **extra}
    if c.spec.queueName:
        labels[QUEUE_LABEL] = c.spec.queueName
        if c.priority_class:
            labels[PRIORITY_LABEL] = c.priority_class
    return labels


def _pod_spec(c: Campaign, image: str, args: list[str], env: list[EnvVar],
              service_account: str) -> Manifest:
    selector, tolerations, resources = scheduling(c.spec)
    volumes, mounts = _volumes(c.spec)
    # Kueue admits only what its ClusterQueue covers: a request of ephemeral storage the
    # queue does not list would leave a queued campaign inadmissible, so a queued one
    # requests it only where spec.resources does.
    if not c.spec.queueName and not any(EPHEMERAL in (resources.get(k) or {})
                                        for k in ("requests", "limits")):
        resources.setdefault("requests", {})[EPHEMERAL] = EPHEMERAL_REQUEST
    pod: Manifest = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        "serviceAccountName": service_account,
        "securityContext": POD_SECURITY,
        "containers": [{
            "name": "runner", "image": image, "args": args, "env": env,
            "resources": resources, "volumeMounts": mounts,
            "securityContext": CONTAINER_SECURITY,
        }],
        "volumes": volumes,
    }
    if selector:
        pod["nodeSelector"] = selector
    if tolerations:
        pod["tolerations"] = tolerations
    return pod


def processes(spec: CampaignSpec) -> int:
    """Engine slots per worker pod: the whole CPUs the pod requests (at least one). They do
    not multiply accelerator processes: every slot feeds its TPU or GPU targets to the one
    process per pod that owns the device (engine worker/devices.py; tests/devices)."""
    cpu = str((spec.resources.get("requests") or {}).get("cpu", "1"))
    try:
        cores = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
    except ValueError:
        return 1
    return max(1, int(cores))


# How a failed worker pod counts (exit codes: runners/xla_sentinel/cluster/pod.py). First match wins.
# - DisruptionTarget (eviction, preemption, node drain, spot or TPU maintenance through
#   graceful node shutdown): not the worker's fault; Ignore, the index simply runs again.
# - exit 2 (bad spec or arguments): every retry would fail the same way; FailIndex.
# - everything else counts against backoffLimitPerIndex: 1 (an exception), 134/139 (the
#   harness itself crashed), 137 (OOM-killed, or past the grace period), and 143 too. A
#   worker exits 143 only after SIGTERM; the disruptions that deserve a free retry carry
#   DisruptionTarget, and a 143 without it (a person deleting pods, a crash of the runtime
#   that sends SIGTERM) must not loop forever. A Job suspended (suspend, Kueue preemption)
#   deletes its pods without counting them at all.
POD_FAILURE_POLICY: Manifest = {"rules": [
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    {"action": "FailIndex", "onExitCodes": {"containerName": "runner", "operator": "In",
                                            "values": [2]}},
]}


# JAX_PLATFORMS of worker pods by accelerator type: jax must not fall back to the CPU
# silently when the accelerator is missing.
JAX_PLATFORMS = {"tpu": "tpu", "gpu": "cuda"}
SLICE_LABEL = "xlasentinel.dev/slice"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def tpu_slice(spec: CampaignSpec) -> tpu.Slice | None:
    """The campaign's TPU slice (None without TPUs); TopologyError when GKE cannot run it."""
    acc = spec.accelerator
    if acc.type != "tpu":
        return None
    s = tpu.slice_of(str(acc.tpuAccelerator), str(acc.tpuTopology), acc.tpuMachineType)
    tpu.check_count(s, acc.count, str(acc.tpuTopology))
    return s


def hosts_unavailable(spec: CampaignSpec) -> str:
    """Why a CPU/GPU multi-host group is refused where the operator runs without JobSet."""
    return (f"spec.accelerator.hosts: {spec.accelerator.hosts} hosts run as one JobSet per shard "
            "(its pods the hosts of one program), and this operator runs without JobSet (chart "
            "value jobset.enabled=false, flag --no-jobset): install JobSet (sigs.k8s.io/jobset) "
            "and enable it, or set accelerator.hosts to 1")


def jobset_unavailable(spec: CampaignSpec, s: tpu.Slice) -> str:
    """Why a multi-host slice is refused where the operator runs without JobSet: its hosts
    must start, fail and restart together, in one node pool, which one Indexed Job per
    slice cannot promise; it is not split into single-host pods either."""
    acc = spec.accelerator
    return (f"spec.accelerator.tpuTopology: {acc.tpuTopology} is a multi-host {s.generation} "
            f"slice ({s.chips} chips on {s.hosts} hosts), which runs as a JobSet, and this "
            "operator runs without JobSet (chart value jobset.enabled=false, flag --no-jobset): "
            "install JobSet (sigs.k8s.io/jobset) and enable it, or choose a single-host topology")


def _slice(spec: CampaignSpec) -> tpu.Slice | None:
    try:
        return tpu_slice(spec)
    except tpu.TopologyError:
        return None  # refused before any Job is made (runtime.campaign_of)


def _multi_host(spec: CampaignSpec) -> tpu.Slice | None:
    s = _slice(spec)
    return s if s is not None and s.multi_host else None


def group_hosts(spec: CampaignSpec) -> int:
    """Hosts of a CPU or GPU campaign's multi-host group (`accelerator.hosts`): its pods
    are the hosts of one program stream, 1 for every other campaign (a TPU slice's hosts
    come from its topology, _multi_host)."""
    acc = spec.accelerator
    return acc.hosts if acc.type != "tpu" and acc.hosts > 1 else 1


def slice_hosts(spec: CampaignSpec) -> int:
    """Pods per shard: a multi-host TPU slice's hosts, a multi-host group's, else 1."""
    s = _multi_host(spec)
    return s.hosts if s is not None else group_hosts(spec)


def runs_jobsets(spec: CampaignSpec) -> bool:
    """Whether the campaign's workers are slice JobSets now: a TPU campaign (a multi-host
    topology; a single-host one may have had one before), or a multi-host CPU/GPU group."""
    return spec.accelerator.type == "tpu" or group_hosts(spec) > 1


def owned_jobsets(c: Campaign, items: list[JobSet]) -> list[JobSet]:
    """The JobSets among `items` (listed by the campaign's selector) that this campaign
    owns: one of an earlier campaign of the same name, left to the garbage collector, is
    neither counted nor deleted as this campaign's."""
    return [js for js in items
            if any(o.get("uid") == c.uid for o in js["metadata"].get("ownerReferences") or [])]


def job_count(spec: CampaignSpec) -> int:
    """Worker Jobs of a campaign: one per group, or one per group and slice (multi-host)."""
    return len(worker_groups(spec)) * (spec.workers if slice_hosts(spec) > 1 else 1)


def pod_count(spec: CampaignSpec) -> int:
    return spec.workers * len(worker_groups(spec)) * slice_hosts(spec)


# Progress writes of a campaign's reports, per second, that the workers' interval aims at
# (the reports' findings are written through at once regardless): 4,096 workers writing
# every 5 s made 820 writes/s of whole reports. The interval stays between 5 s (a small
# campaign reports as before) and 100 s, under the 2 minutes the roll-up takes a report
# as a sign of a running worker (rollup.REPORT_FRESH).
REPORT_WRITES_PER_S = 40
REPORT_INTERVAL_MIN_S = 5
REPORT_INTERVAL_MAX_S = 100


def report_interval(spec: CampaignSpec) -> int:
    """Seconds between two progress writes of one worker's report (the worker's
    XLA_SENTINEL_REPORT_INTERVAL): the campaign's report writers over REPORT_WRITES_PER_S."""
    writers = spec.workers * len(worker_groups(spec))  # one per shard (host 0 of a slice)
    return min(REPORT_INTERVAL_MAX_S,
               max(REPORT_INTERVAL_MIN_S, -(-writers // REPORT_WRITES_PER_S)))


def _worker_env(c: Campaign, group: WorkerGroup, spec_json: str) -> list[EnvVar]:
    env: list[EnvVar] = [
        {"name": "XLA_SENTINEL_SPEC", "value": spec_json},
        {"name": "XLA_SENTINEL_CAMPAIGN", "value": c.name},
        {"name": "XLA_SENTINEL_CAMPAIGN_UID", "value": c.uid},
        {"name": "XLA_SENTINEL_WORKER_GROUP", "value": group.name},
        {"name": "XLA_SENTINEL_TARGETS", "value": ",".join(group.targets)},
        {"name": "XLA_SENTINEL_PROCESSES", "value": str(processes(c.spec))},
        {"name": "XLA_SENTINEL_REPORT_INTERVAL", "value": str(report_interval(c.spec))},
        {"name": "XLA_SENTINEL_NAMESPACE",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        POD_ENV,
    ]
    platform = JAX_PLATFORMS.get(c.spec.accelerator.type)
    if platform:
        env.append({"name": "JAX_PLATFORMS", "value": platform})
    return env


def _job(c: Campaign, name: str, labels: dict[str, str], pod: Manifest,
         completions: int) -> Job:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": c.namespace, "labels": labels,
                     "ownerReferences": [owner_reference(c)]},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": completions,
            "backoffLimitPerIndex": BACKOFF_PER_INDEX,
            "podFailurePolicy": POD_FAILURE_POLICY,  # needs restartPolicy Never
            # Kueue admits a queued Job by unsuspending it, so it is created suspended.
            "suspend": bool(c.spec.suspend or c.spec.queueName),
            "template": {"metadata": {"labels": {k: v for k, v in labels.items()
                                                 if k != QUEUE_LABEL}},
                         "spec": pod},
        },
    }


def _slice_env(name: str, hosts: int) -> list[EnvVar]:
    """What libtpu needs on each host of the slice JobSet `name`: its rank (the host's
    completion index) and every host's name, host h at position h."""
    return [{"name": "TPU_WORKER_ID", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
            {"name": "TPU_WORKER_HOSTNAMES", "value": ",".join(jobsets.hostnames(name, hosts))}]


def _group_env(name: str, hosts: int) -> list[EnvVar]:
    """What each pod of a CPU/GPU multi-host group's JobSet `name` reads (cluster/pod.py
    host_role): the group's size (its index is JOB_COMPLETION_INDEX, host 0 runs the
    campaign), the headless Service's subdomain (host 0's DNS name: `<name>-hosts-0-0.<name>`,
    jobsets.hostnames), and the slice's restart attempt, the token a host shows host 0 (a
    pod of an earlier attempt is never taken into the group)."""
    return [{"name": "XLA_SENTINEL_HOSTS", "value": str(hosts)},
            {"name": "XLA_SENTINEL_SUBDOMAIN", "value": name}, SLICE_TOKEN_ENV]


# The slice's restart attempt (JobSet's pod label, from the downward API): the token a host
# shows host 0's driver, so that a pod of an earlier attempt is never taken into the group.
SLICE_TOKEN_ENV: EnvVar = {
    "name": "XLA_SENTINEL_SLICE_TOKEN",
    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{jobsets.RESTART_LABEL}']"}}}


def _tpu_group_env(hosts: int) -> list[EnvVar]:
    """What a multi-host TPU slice's worker pods read beside GKE's TPU variables (their
    index, every host's name: _slice_env): the group's size as the operator rendered it
    (cluster/pod.py host_role refuses a slice whose hostnames disagree) and the token.
    Host 0 runs the campaign and drives hosts 1..N-1, as in a CPU/GPU group."""
    return [{"name": "XLA_SENTINEL_HOSTS", "value": str(hosts)}, SLICE_TOKEN_ENV]


# Restarts of a whole slice before its JobSet fails: the per-shard retry budget an Indexed
# Job's index has (backoffLimitPerIndex). A JobSet failed after them stalls the campaign
# and is recreated with the worker Jobs' backoff (rollup.retries); one failed by its fatal
# rule stays failed.
SLICE_RESTARTS = BACKOFF_PER_INDEX
# A failed host fails its slice's Job at once (backoffLimit 0, JobSet restarts the
# slice), so the Indexed Job's FailIndex becomes FailJob; JobSet's failurePolicy then fails
# the JobSet for good (jobsets.FATAL_JOB_REASONS) instead of restarting into the same exit 2.
# A host disrupted (DisruptionTarget: eviction, a node drain, TPU maintenance) fails the Job
# too, by rule 0 (jobsets.MAINTENANCE_RULE_INDEX): the slice's hosts run one program in
# lockstep, so one replaced host alone cannot rejoin; JobSet restarts the whole slice
# without spending maxRestarts (jobsets.slice_jobset's maintenance rule), as JobSet
# documents for host maintenance.
SLICE_POD_FAILURE_POLICY: Manifest = {"rules": [
    {**POD_FAILURE_POLICY["rules"][0], "action": "FailJob"},
    {**POD_FAILURE_POLICY["rules"][1], "action": "FailJob"},
]}


def _slice_jobset(c: Campaign, name: str, labels: dict[str, str], pod: Manifest,
                  hosts: int, *, restarts: int, suspend: bool,
                  deadline_s: int | None = None, exclusive: bool = True) -> JobSet:
    pod = {**pod, "subdomain": name}  # the hosts' names: jobsets.hostnames
    return jobsets.slice_jobset(
        name=name, namespace=c.namespace, labels=labels, job_labels=campaign_selector(c.name),
        owner=owner_reference(c), pod_labels={k: v for k, v in labels.items() if k != QUEUE_LABEL},
        pod=pod, hosts=hosts, max_restarts=restarts, suspend=suspend,
        pod_failure_policy=SLICE_POD_FAILURE_POLICY, deadline_s=deadline_s, exclusive=exclusive)


def worker_jobs(c: Campaign, *, default_image: str,
                service_account: str = "xla-sentinel-worker") -> list[Workload]:
    """The worker Jobs the campaign should have now (at its current revision): per group,
    one Indexed Job whose indices are the shards, or, on a multi-host TPU slice, one
    JobSet per slice (shard) whose Job's indices are the slice's hosts."""
    rev = revision(c.spec)
    spec_json = json.dumps(worker_spec(c.spec), sort_keys=True)
    multi = _multi_host(c.spec)
    hosts = group_hosts(c.spec)
    jobs: list[Workload] = []
    for group in worker_groups(c.spec):
        labels = _labels(c, "worker", **{GROUP_LABEL: group.name, REVISION_LABEL: rev})
        image = group.image or c.spec.image or default_image
        # Reports are per revision (a new one counts afresh); findings record the image.
        env = _worker_env(c, group, spec_json) + [
            {"name": "XLA_SENTINEL_REVISION", "value": rev},
            {"name": "XLA_SENTINEL_IMAGE", "value": image}]
        if multi is None and hosts > 1:
            for i in range(c.spec.workers):
                # One shard per group: its pods are the hosts of one program stream; host 0
                # runs the campaign and reports, hosts 1..N-1 serve it (cluster/pod.py).
                name = jobset_name(c.name, group.name, rev, f"s{i}")
                group_env = env + [{"name": "XLA_SENTINEL_SHARD_INDEX", "value": str(i)},
                                   *_group_env(name, hosts)]
                pod = _pod_spec(c, image, ["worker"], group_env, service_account)
                jobs.append(_slice_jobset(c, name, {**labels, SLICE_LABEL: str(i)}, pod, hosts,
                                          restarts=SLICE_RESTARTS,
                                          suspend=bool(c.spec.suspend or c.spec.queueName),
                                          exclusive=False))
            continue
        if multi is None:
            pod = _pod_spec(c, image, ["worker"], env, service_account)
            indexed = _job(c, job_name(c.name, group.name, rev), labels, pod, c.spec.workers)
            if c.spec.queueName and c.spec.minWorkers is not None:
                # Partial admission: Kueue lowers the Job's parallelism to what the quota
                # holds (at least this), and the other shards run as those finish.
                indexed["metadata"]["annotations"] = {
                    **(indexed["metadata"].get("annotations") or {}),
                    MIN_PARALLELISM_ANNOTATION: str(c.spec.minWorkers)}
            jobs.append(indexed)
            continue
        for i in range(c.spec.workers):
            # One shard per slice, as a CPU/GPU group's: host 0 (TPU_WORKER_ID 0) runs the
            # campaign and reports, hosts 1..N-1 serve it (cluster/pod.py host_role).
            name = jobset_name(c.name, group.name, rev, f"s{i}")
            slice_env = env + [{"name": "XLA_SENTINEL_SHARD_INDEX", "value": str(i)},
                               *_slice_env(name, multi.hosts), *_tpu_group_env(multi.hosts)]
            pod = _pod_spec(c, image, ["worker"], slice_env, service_account)
            jobs.append(_slice_jobset(c, name, {**labels, SLICE_LABEL: str(i)}, pod, multi.hosts,
                                      restarts=SLICE_RESTARTS,
                                      suspend=bool(c.spec.suspend or c.spec.queueName)))
    for job in jobs:
        meta = job["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}), **provisioning_annotations(c.spec)}
        meta["annotations"][TEMPLATE_ANNOTATION] = template_hash(job)
    return jobs


@dataclass(frozen=True)
class WorkerPlan:
    """What converging the worker Jobs takes: Jobs (or slice JobSets) to create, to delete,
    to (un)suspend, by name; `replace`: running Jobs of the current revision rendered
    differently now, deleted (the next pass creates them anew, under the same name and
    revision, so their reports go on); `adopt`: Jobs without TEMPLATE_ANNOTATION (made by
    an operator before it) given the hash of today's rendering, not replaced."""

    create: list[Workload]
    delete: list[str]
    suspend: dict[str, bool]
    replace: list[str] = dataclasses.field(default_factory=list)
    adopt: dict[str, str] = dataclasses.field(default_factory=dict)


def _finished(job: Job) -> bool:
    return any(cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True"
               for cond in job_status(job).get("conditions") or [])


def plan_workers(c: Campaign, want: list[Workload], have: list[Job],
                 completed: bool) -> WorkerPlan:
    """Create missing Jobs, delete those of older revisions, apply suspend.

    With a Kueue queue, Job.spec.suspend belongs to Kueue (it unsuspends what it admits and
    suspends what it preempts), so the operator never flips it: a suspended or finished
    campaign deletes its worker Jobs instead, and resuming creates them again, suspended,
    for Kueue to admit. Nothing is lost: the reports keep every finding and counter."""
    stop = c.spec.suspend or completed
    names = {j["metadata"]["name"] for j in have}
    wanted = {j["metadata"]["name"] for j in want}
    queued = bool(c.spec.queueName)
    create = [] if stop else [j for j in want if j["metadata"]["name"] not in names]
    # A finished Job holds no quota and is kept (deleting it would make the campaign look
    # unstarted); one still running past the budget, or any of a suspended campaign, goes.
    delete = sorted(j["metadata"]["name"] for j in have
                    if j["metadata"]["name"] not in wanted
                    or (queued and (c.spec.suspend or (completed and not _finished(j)))))
    suspend: dict[str, bool] = {}
    if not queued:
        for job in have:
            name = job["metadata"]["name"]
            if name in wanted and bool(job_spec(job).get("suspend")) != stop:
                suspend[name] = stop
    # A rendering that changed rolls out to the Jobs still running; a finished Job keeps
    # what it ran with (a failed one is retried: rollup.retries), a stopped campaign is
    # rendered anew when it resumes.
    hashes = {j["metadata"]["name"]: (j["metadata"].get("annotations") or {}).get(TEMPLATE_ANNOTATION)
              for j in want}
    replace: list[str] = []
    adopt: dict[str, str] = {}
    for job in [] if stop else have:
        name = job["metadata"]["name"]
        rendered = hashes.get(name)
        if rendered is None or name in delete or _finished(job):
            continue
        live = (job["metadata"].get("annotations") or {}).get(TEMPLATE_ANNOTATION)
        if live is None:
            adopt[name] = rendered
        elif live != rendered:
            replace.append(name)
    return WorkerPlan(create, delete, suspend, sorted(replace), adopt)


def artifact_path(c: Campaign, worker: str, finding_dir: str) -> str:
    """Where a worker's finding folder lives: on the PVC or under the bucket URI."""
    root = c.spec.artifacts.bucketURI.rstrip("/") if c.spec.artifacts.bucketURI else ARTIFACTS_MOUNT
    return f"{root}/{c.name}/{worker}/{finding_dir}"


def _job_env(c: Campaign, image: str) -> list[EnvVar]:
    """What a one-off Job (bisector, fix verification) needs to write its result."""
    return [{"name": "XLA_SENTINEL_CAMPAIGN", "value": c.name},
            {"name": "XLA_SENTINEL_CAMPAIGN_UID", "value": c.uid},
            {"name": "XLA_SENTINEL_IMAGE", "value": image},
            {"name": "XLA_SENTINEL_NAMESPACE",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}, POD_ENV]


# Longest run of a one-off Job that holds accelerators (activeDeadlineSeconds): a bisector
# or a verification stuck on a TPU slice or a GPU (a hang in the program it reruns, a slice
# whose hosts never meet) must not hold them for ever. CPU ones run without a deadline.
BISECT_DEADLINE_S = 4 * 3600
VERIFY_DEADLINE_S = 3600


def _followup(c: Campaign, parts: tuple[str, ...], role: str, signature: str, args: list[str], image: str,
              service_account: str, deadline_s: int) -> Workload:
    """A one-off Job (bisector, verifier) for one signature, on the campaign's accelerator:
    a CPU one is short and urgent and runs outside the campaign's queue; one that requests
    TPUs or GPUs keeps the queue label and is created suspended (Kueue admits it), or it
    would take accelerators outside the queue's quota, and gets `deadline_s`. On a multi-host
    slice it is a slice JobSet: every host of the slice runs it (one host alone would wait
    for the others for ever), host 0 writes the result."""
    labels = _labels(c, role, **{SIGNATURE_LABEL: label_value(signature)})
    accelerated = c.spec.accelerator.type != "cpu"
    queued = QUEUE_LABEL in labels and accelerated
    if not queued:
        labels.pop(QUEUE_LABEL, None)
        labels.pop(PRIORITY_LABEL, None)
    env = _job_env(c, image)
    multi = _multi_host(c.spec)
    if multi is not None:
        name = jobset_name(*parts)
        pod = _pod_spec(c, image, args, env + _slice_env(name, multi.hosts), service_account)
        jobset = _slice_jobset(c, name, labels, pod, multi.hosts, restarts=1, suspend=queued,
                               deadline_s=deadline_s)
        if queued:
            jobset["metadata"]["annotations"] = {**(jobset["metadata"].get("annotations") or {}),
                                                 **provisioning_annotations(c.spec)}
        return jobset
    pod = _pod_spec(c, image, args, env, service_account)
    spec: JobSpec = {"backoffLimit": 1, "suspend": queued,
                            "template": {"metadata": {"labels": {k: v for k, v in labels.items()
                                                                 if k != QUEUE_LABEL}},
                                         "spec": pod}}
    if accelerated:
        spec["activeDeadlineSeconds"] = deadline_s
    job: Job = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": job_name(*parts), "namespace": c.namespace, "labels": labels,
                             "ownerReferences": [owner_reference(c)]},
                "spec": spec}
    if queued and (extra := provisioning_annotations(c.spec)):
        job["metadata"]["annotations"] = extra
    return job


def verify_job(c: Campaign, signature: str, repro: str, fixed_in: str, *, default_image: str,
               service_account: str = "xla-sentinel-worker") -> Workload:
    """A Job that runs a fixed signature's repro bundle on the campaign's runner image now:
    one per signature, image and fixing version (marking it fixed again with the same
    version on the same image verifies nothing new). A slice JobSet on a multi-host slice."""
    image = c.spec.image or default_image
    args = ["worker", "--verify", repro, "--signature", signature, "--fixed-in", fixed_in]
    parts = (c.name, "verify", signature, short_hash([image, fixed_in], 6))
    return _followup(c, parts, "verifier", signature, args, image, service_account,
                     VERIFY_DEADLINE_S)


def bisector_job(c: Campaign, sample: Mapping[str, object], worker: str, *, default_image: str,
                 service_account: str = "xla-sentinel-worker") -> Workload:
    """A Job that bisects one finding (a sample of a new signature candidate); a slice
    JobSet on a multi-host slice."""
    signature = str(sample["signature"])
    path = artifact_path(c, worker, str(sample.get("dir") or ""))
    # `worker --bisect` runs `xla-sentinel bisect`'s pipeline and writes the result back as a
    # WorkerReport result (the worker's RBAC); the operator ingests it into the signature.
    image = c.spec.image or default_image
    args = ["worker", "--bisect", path, "--signature", signature]
    if c.spec.bisect.versions:
        # Also over jaxlib releases, in the environments the runner image holds
        # (docs/operator.md, "Version bisection").
        args += ["--versions", c.spec.bisect.versions]
    parts = (c.name, "bisect", str(sample["id"])[:16])
    return _followup(c, parts, "bisector", signature, args, image, service_account,
                     BISECT_DEADLINE_S)
