"""Typed views of the Kubernetes objects the operator reads and writes, after kopf's
`kopf._cogs.structs.bodies`: FuzzCampaign (its status; its spec is the engine's
`CampaignSpec`, parsed from the raw mapping), BugSignature, WorkerReport, Job and JobSet.

TypedDicts, not classes: an object read from the API or an index is this shape as it is,
and a manifest built here is sent as it is, so the wire format is the dicts themselves. A
field not every object has is optional (`total=False`); what the API server always sets
is `Required`. Fields the operator neither reads nor writes are left out, as kopf leaves
them out of its own; a free-form part it only passes through (a pod spec) is `Manifest`.
"""

from __future__ import annotations

from typing import Any, Literal, Required, TypeAlias, TypedDict

# A part of a manifest the operator builds once and never reads back (a pod spec, a
# volume, a pod failure policy): free-form JSON as the API defines it.
Manifest: TypeAlias = dict[str, Any]
# The raw `spec` of a FuzzCampaign: parse_spec turns it into xla_sentinel.spec's
# CampaignSpec, the one declaration of its fields.
RawCampaignSpec: TypeAlias = dict[str, Any]
# A fix agent's draft as the agents' gate writes it (agents/swarm.py): free-form, of which
# the operator checks a few fields (agents.draft_problem) and copies agents.DRAFT_FIELDS.
FixDraft: TypeAlias = dict[str, Any]


class OwnerReference(TypedDict):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class Meta(TypedDict, total=False):
    name: Required[str]
    namespace: str
    uid: str
    generation: int
    resourceVersion: str
    generateName: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]


class Condition(TypedDict, total=False):
    """A status condition (Job, JobSet, FuzzCampaign)."""

    type: Required[str]
    status: Required[str]
    reason: str
    message: str
    observedGeneration: int
    lastTransitionTime: str


class KubeObject(TypedDict, total=False):
    """Any object, where only its kind and metadata matter (deleting a campaign's children)."""

    apiVersion: str
    kind: str
    metadata: Required[Meta]


class PeerEntry(TypedDict, total=False):
    """One replica in a kopf peering object's status (leadership.leading)."""

    priority: int
    lifetime: int
    lastseen: str


class KopfPeering(TypedDict, total=False):
    """kopf's (Cluster)KopfPeering: its status is identity -> entry."""

    metadata: Meta
    status: dict[str, PeerEntry]


class Secret(TypedDict, total=False):
    """A core/v1 Secret: `data` base64, `stringData` as written (alerting.secret_value)."""

    metadata: Meta
    data: dict[str, str]
    stringData: dict[str, str]


class ObjectRef(TypedDict):
    """What an Event needs of the object it is about."""

    apiVersion: str
    kind: str
    metadata: Meta


class EnvVar(TypedDict, total=False):
    name: Required[str]
    value: str
    valueFrom: Manifest


# --- Job -------------------------------------------------------------------------------


class PodTemplate(TypedDict):
    metadata: Meta | dict[str, dict[str, str]]
    spec: Manifest


class JobSpec(TypedDict, total=False):
    completionMode: str
    completions: int | None
    parallelism: int
    backoffLimit: int
    backoffLimitPerIndex: int
    activeDeadlineSeconds: int
    podFailurePolicy: Manifest
    suspend: bool | None
    template: PodTemplate


class JobStatus(TypedDict, total=False):
    active: int
    ready: int
    succeeded: int
    failed: int
    # A slice's JobSet read as a Job (jobsets.as_worker_job): its restarts.
    restarts: int
    conditions: list[Condition]


class Job(TypedDict, total=False):
    """A batch/v1 Job, or a slice JobSet as the roll-up reads it (`kind: JobSet`)."""

    apiVersion: str
    kind: str
    metadata: Required[Meta]
    spec: JobSpec
    status: JobStatus


# --- JobSet (jobset.x-k8s.io/v1alpha2) ---------------------------------------------------


class JobTemplate(TypedDict):
    metadata: dict[str, dict[str, str]]
    spec: JobSpec


class ReplicatedJob(TypedDict):
    name: str
    replicas: int
    template: JobTemplate


class JobSetSpec(TypedDict, total=False):
    suspend: bool
    network: dict[str, Any]
    failurePolicy: Manifest
    replicatedJobs: list[ReplicatedJob]


class ReplicatedJobStatus(TypedDict, total=False):
    name: str
    active: int
    ready: int
    succeeded: int
    failed: int


class JobSetStatus(TypedDict, total=False):
    restarts: int
    conditions: list[Condition]
    replicatedJobsStatus: list[ReplicatedJobStatus]


class JobSet(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[Meta]
    spec: JobSetSpec
    status: JobSetStatus


# A worker or one-off Job as desired.py makes it: a Job, or a JobSet on a multi-host slice.
Workload: TypeAlias = Job | JobSet


# --- FuzzCampaign status (crds/fuzzcampaign.yaml) ---------------------------------------


class FailureEvent(TypedDict):
    uid: str
    time: str
    failed: int


class Failures(TypedDict, total=False):
    """Pod failures per worker Job (rollup.recent_failures)."""

    seen: dict[str, int]
    recent: list[FailureEvent]


class Disrupted(TypedDict, total=False):
    """A worker pod that was disrupted (DisruptionTarget, or the kubelet's Evicted), as the
    operator's pod index keeps it (handlers.py): its Job's uid, the pod, why and when."""

    job: Required[str]
    pod: str
    revision: str
    reason: str
    message: str
    time: str


class Disruptions(TypedDict, total=False):
    """Disrupted worker pods of a campaign (rollup.disruptions): counted for good (`seen`:
    the most counted per worker Job uid, so pods garbage-collected later are not lost)."""

    total: int
    byReason: dict[str, int]
    seen: dict[str, int]
    last: Disrupted


class RetryRecord(TypedDict, total=False):
    """One worker group's failed-Job retries (rollup.retries)."""

    attempts: int
    failedUid: str
    nextRetry: str


class WorkerCounts(TypedDict):
    desired: int
    active: int
    succeeded: int
    failed: int
    reporting: int


class WorkerSummary(TypedDict):
    worker: str
    revision: str
    programs: int
    executions: int
    findings: int
    attempts: int
    lastReport: str


class WorkerStats(TypedDict, total=False):
    reports: Required[int]
    listed: Required[int]
    revisions: Required[int]
    workers: Required[int]
    programsMin: int
    programsMax: int
    attemptsMax: int
    restarted: int
    oldestReport: str
    newestReport: str


class ReportError(TypedDict):
    worker: str
    revision: str
    error: str


class StorageError(TypedDict):
    worker: str
    revision: str
    uri: str
    reason: str
    pending: int
    since: str


class Counters(TypedDict):
    programs: int
    executions: int
    elapsedSeconds: float
    findings: dict[str, int]
    findingsTotal: int
    signatures: int


class CampaignStatus(TypedDict, total=False):
    """A FuzzCampaign's status (rollup.status). In a merge patch a None removes a field
    (completionTime, when a raised budget runs the campaign again)."""

    phase: str
    observedGeneration: int
    revision: str
    programs: int
    executions: int
    elapsedSeconds: float
    findings: dict[str, int]
    findingsTotal: int
    signatures: int
    workers: WorkerCounts
    workerSummary: list[WorkerSummary]
    workerStats: WorkerStats
    reportErrors: list[ReportError]
    reportErrorsTotal: int
    storageErrors: list[StorageError]
    storageErrorsTotal: int
    failures: Failures
    disruptions: Disruptions
    retries: dict[str, RetryRecord]
    conditions: list[Condition]
    startTime: str
    completionTime: str | None
    lastAlertTime: str


class FuzzCampaign(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[Meta]
    spec: RawCampaignSpec
    status: CampaignStatus


# --- BugSignature (crds/bugsignature.yaml) -----------------------------------------------

BugState = Literal["new", "triaged", "fixed", "regressed"]


class BugSignatureSpec(TypedDict, total=False):
    signature: str
    verdict: str
    state: BugState
    targets: list[str]
    teams: list[str]
    culpritOp: str
    culpritPass: str
    fusionKind: str
    dtype: str
    versions: dict[str, str]
    repro: str
    fixedIn: str


class SeenOn(TypedDict, total=False):
    """One combination of versions a signature was seen on (signatures.seen_on)."""

    jax: str
    jaxlib: str
    image: str
    firstSeen: str
    lastSeen: str


class Bisection(TypedDict, total=False):
    """What a bisector Job found (signatures.bisection_status)."""

    status: Required[str]
    job: Required[str]
    finding: Required[str]
    time: Required[str]
    culpritOp: str
    fusionKind: str
    culpritPass: str
    repro: str
    refinedSignature: str
    error: str
    introducedIn: str
    lastGood: str
    versionRange: str
    versionStatus: str
    versionError: str
    reducedOps: int
    originalOps: int


class Verification(TypedDict, total=False):
    """A fix verification Job's result (followups.ingest_verification)."""

    result: str
    image: str
    fixedIn: str
    jaxlib: str
    exitCode: int
    evidence: str
    time: str
    job: str
    versions: dict[str, str]


class AlertRoute(TypedDict, total=False):
    """The webhook Secret (in the signature's namespace) its last alert went to."""

    secretName: str
    secretKey: str


class BugSignatureStatus(TypedDict, total=False):
    """A BugSignature's status; in a merge patch a None removes a field (fixedAt when a
    bug regresses, alertError once an alert goes out)."""

    hits: dict[str, int]
    hitsRetired: int
    alertRoute: AlertRoute
    # The operator's word on the state (sig_spec): regressed, at spec generation
    # regressedGeneration; None (removed) once people mark it fixed again.
    state: str | None
    regressedGeneration: int | None
    count: int
    campaigns: list[str]
    firstSeen: str
    lastSeen: str
    seenOn: list[SeenOn]
    regressions: int
    fixedAt: str | None
    bisectJobs: list[str]
    bisection: Bisection
    refinedTo: str
    refinedFrom: list[str]
    alertKey: str
    resolvedKey: str
    lastAlertTime: str
    alertError: str | None
    alertLabels: dict[str, str]
    verification: Verification
    fixDraft: FixDraft


class BugSignature(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[Meta]
    spec: BugSignatureSpec
    status: BugSignatureStatus


# --- WorkerReport ----------------------------------------------------------------------


class WorkerReportSpec(TypedDict, total=False):
    """The part the operator reads itself; the report and a result's fields are parsed by
    xla_sentinel.cluster.report (report_from_object, result_from_object)."""

    result: str


class WorkerReport(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[Meta]
    spec: WorkerReportSpec


def labels_of(obj: Job | JobSet | BugSignature | WorkerReport | FuzzCampaign) -> dict[str, str]:
    """An object's labels; an object without any has none."""
    return obj["metadata"].get("labels") or {}


def annotations_of(obj: FuzzCampaign) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


def job_status(job: Job) -> JobStatus:
    return job.get("status") or {}


def job_spec(job: Job) -> JobSpec:
    return job.get("spec") or {}


def sig_spec(sig: BugSignature) -> BugSignatureSpec:
    """A signature's spec as the operator acts on it: people's, with the state the operator
    recorded in status laid over it. A regression of a bug people marked fixed is recorded in
    status (state: regressed, at the spec's generation), never written into the spec, which
    people, or a GitOps tool keeping signatures in Git, own. It holds until people edit the
    spec again (a new fixedIn, or the state), which is their answer to it."""
    spec = sig.get("spec") or {}
    status = sig.get("status") or {}
    if (spec.get("state") == "fixed" and status.get("state") == "regressed"
            and status.get("regressedGeneration") == sig["metadata"].get("generation")):
        return {**spec, "state": "regressed"}
    return spec


def sig_status(sig: BugSignature) -> BugSignatureStatus:
    return sig.get("status") or {}


class PatchMeta(TypedDict):
    resourceVersion: str


class SignaturePatch(TypedDict, total=False):
    """A merge patch of a BugSignature (or its status subresource)."""

    metadata: PatchMeta
    spec: BugSignatureSpec
    status: BugSignatureStatus


# --- Results (a WorkerReport's spec.result, JSON the engine's cluster/pod.py writes) -----


class BisectionResult(TypedDict, total=False):
    type: Required[Literal["bisection"]]
    candidate: str
    signature: str
    status: str
    finding: str
    job: str
    time: str
    versions: dict[str, str]
    culprit_op: str
    culprit_pass: str
    fusion_kind: str
    repro: str
    error: str
    introducedIn: str
    lastGood: str
    versionRange: str
    versionStatus: str
    versionError: str
    reduced_ops: int | None
    original_ops: int | None


class VerificationResult(Verification, total=False):
    """A verification as the Job's result object carries it: the Verification, typed and
    naming its signature."""

    type: Required[Literal["verification"]]
    signature: str


class FixDraftResult(TypedDict, total=False):
    type: Required[Literal["fixDraft"]]
    drafts: list[object]  # each checked by agents.draft_problem


Result: TypeAlias = BisectionResult | VerificationResult | FixDraftResult


# --- Alertmanager v2 (POST /api/v2/alerts) ------------------------------------------------


class Alert(TypedDict, total=False):
    labels: Required[dict[str, str]]
    annotations: Required[dict[str, str]]
    startsAt: Required[str]
    endsAt: Required[str]
    generatorURL: str
