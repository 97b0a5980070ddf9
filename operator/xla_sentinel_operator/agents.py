"""The agent swarm of a campaign (spec.agents; docs/agents.md "Running a swarm"): the agent
Jobs that should exist, and the fix drafts agent pods report back.

Agents run as one Indexed Job per role, not a Deployment: an agent's work is finite (the
tasks of its role, each under a token, tool-call and wall-time budget) and a Deployment
would restart a finished or budget-stopped agent forever, spending tokens on an empty
queue. A Job's index gives each replica a stable name (`<job>-<index>`, also after a
retry), which is its holder identity on the task Leases and the one WorkerReport name the
admission policy lets its pod write. Exit 1 (a budget stopped it) and 2 (a missing or
rejected credential) fail the index at once: a retry would only spend more or fail alike.

Fix drafts travel as results (agents/swarm.py writes a `fixDraft` WorkerReport result):
the operator takes one only from a pod of a fix agent Job of the same campaign, and only
drafts the agents' gate verified (cured, no regression); it writes BugSignature
status.fixDraft and posts an Event. The agent pods cannot write BugSignatures.

The agent pod (`SandboxConfig`, docs/agents.md "The sandbox container"): the `runtime`
container runs the agent, its MCP server and the engine; it alone holds the model's key
and the ServiceAccount token (an explicit projected volume; the pod mounts none itself).
Agent-written code (a snippet's loading, a reproducer with an agent's pass plugin) runs in
the `sandbox` container, a native sidecar (an init container that restarts: it ends when
the runtime does, so the Job completes) of the same image under another uid, with no
token, no secrets, a read-only root and artifacts, a scratch emptyDir, limits, no
capabilities; the two share only the `exchange` emptyDir with the sandbox server's socket.

Pure desired-state functions first; `converge` and `ingest_fix_drafts` are the thin API part.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

from xla_sentinel.agents.gate import MIN_REGRESSION_ENV, REGRESSION_CORPUS_ENV, configured_minimum
from xla_sentinel.agents.kube_tasks import LEASE_GROUP, LEASE_PLURAL, LEASE_VERSION
from xla_sentinel.agents.lease_keys import ROLE_LABEL as AGENT_ROLE_LABEL
from xla_sentinel.agents.lease_keys import TASK_LABEL
from xla_sentinel.agents.sandbox_exchange import SHARED_ENV, SOCKET_ENV
from xla_sentinel.agents.spend import Budget
from xla_sentinel.cluster.report import CAMPAIGN_LABEL, REPORT_PLURAL, report_from_object
from xla_sentinel.spec.campaign import (
    AGENT_CREDENTIAL_ENV,
    API_VERSION,
    AgentRoleSpec,
    AgentSpendingSpec,
    CampaignSpec,
)

from . import desired, signatures, waves
from .bodies import (
    BugSignature,
    EnvVar,
    FixDraft,
    FixDraftResult,
    Job,
    Manifest,
    Meta,
    job_spec,
    labels_of,
    sig_status,
)
from .config import SandboxConfig
from .kube import ApiError, path
from .runtime import Runtime, campaign_ref, log, now_text, object_ref
from .timestamps import rfc3339

FIX_DRAFT = "fixDraft"
AGENT_REVISION_LABEL = "xlasentinel.dev/agent-revision"
WAVE_LABEL = "xlasentinel.dev/agent-wave"  # a Job started by events (waves.py), its id
EVENTS_ANNOTATION = "xlasentinel.dev/agent-events"
WAVE_TTL_SECONDS = 86400  # a finished wave Job stays a day (kubectl logs), then the Job controller removes it
OUT = "/tmp/agent"  # the agent's own folder (claims, transcripts); on the pod's tmp volume
RUNTIME_CONTAINER = "runtime"  # the agent runtime: model key, token, MCP server, engine
SANDBOX_CONTAINER = "sandbox"  # agent-written code (xla-sentinel sandbox-server)
EXCHANGE_MOUNT = "/sandbox"  # the emptyDir both share: the sandbox server's socket, run folders
SANDBOX_SOCKET = f"{EXCHANGE_MOUNT}/sandbox.sock"
SANDBOX_UID = 10002  # not the runtime's (desired.POD_SECURITY's 10001): none of its files are its
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"  # where client libraries look
TOKEN_SECONDS = 3607  # the kubelet's default for a projected token (it refreshes it)
# Index failures that are final: 1 a budget stopped the agent, 2 a bad credential or input.
AGENT_FAILURE_POLICY = {"rules": [
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    {"action": "FailIndex", "onExitCodes": {"containerName": RUNTIME_CONTAINER, "operator": "In",
                                            "values": [1, 2]}},
]}
DRAFT_FIELDS = ("cure", "reproducer", "agent", "model", "rationale", "reason", "regressionCorpus",
                "regressions", "alsoCures", "evidence", "time")


class GateConfig(NamedTuple):
    """The operator's choice of the agents' regression corpus (a folder; "" = the package's)
    and minimum (None = the gate's default): config.JobsConfig."""

    corpus: str = ""
    minimum: int | None = None


def revision(spec: CampaignSpec) -> str:
    """Hash of what agent pods see; a change replaces the agent Jobs (not the workers)."""
    data = spec.to_dict()
    return desired.short_hash([data.get(k) for k in ("agents", "image", "corpus", "injectPasses",
                                                      "targets", "references", "tolerances")], 8)


def _args(spec: CampaignSpec, role: AgentRoleSpec) -> list[str]:
    agents = spec.agents
    assert agents is not None
    budget = agents.role_budget(role)
    return ["agent", "--role", role.role, "--model", agents.role_model(role), "--out", OUT,
            "--tasks", str(agents.tasks), "--lease-seconds", str(agents.leaseSeconds),
            "--max-tokens", str(budget.tokens), "--max-tool-calls", str(budget.toolCalls),
            "--max-seconds", str(budget.seconds), "--task-attempts", str(agents.taskAttempts),
            *_spending_args(agents.spending)]


def _spending_args(spending: AgentSpendingSpec | None) -> list[str]:
    """The campaign-wide budget as the agent's flags (it sums the tasks' spending itself)."""
    out: list[str] = []
    if spending is not None and spending.tokens is not None:
        out += ["--campaign-max-tokens", str(spending.tokens)]
    if spending is not None and spending.usd is not None:
        out += ["--campaign-max-usd", repr(spending.usd)]
    return out


def spending_budget(spec: CampaignSpec) -> Budget:
    """spec.agents.spending as the agents' Budget (no limits when unset)."""
    s = spec.agents.spending if spec.agents else None
    return Budget(s.tokens, s.usd) if s is not None else Budget()


def _env(c: desired.Campaign, role: AgentRoleSpec, spec_json: str, gate: GateConfig) -> list[EnvVar]:
    agents = c.spec.agents
    assert agents is not None
    env: list[EnvVar] = [
        {"name": "XLA_SENTINEL_TASK_QUEUE", "value": "kube"},
        {"name": "XLA_SENTINEL_SPEC", "value": spec_json},
        {"name": "XLA_SENTINEL_CAMPAIGN", "value": c.name},
        {"name": "XLA_SENTINEL_CAMPAIGN_UID", "value": c.uid},
        {"name": "XLA_SENTINEL_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        desired.POD_ENV,
        # Agents judge and cure on XLA:CPU (bench/repros and the gate run there).
        {"name": "JAX_PLATFORMS", "value": "cpu"},
    ]
    provider = agents.role_model(role).partition(":")[0]
    ref = agents.credentialSecretRef
    if ref is not None and provider in AGENT_CREDENTIAL_ENV:
        # From the Secret by the kubelet; the agent keeps it out of its MCP server's workers.
        env.append({"name": AGENT_CREDENTIAL_ENV[provider],
                    "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    if agents.endpoint:
        env.append({"name": "OPENAI_BASE_URL", "value": agents.endpoint})
    if agents.vertex is not None and provider == "google-cloud":
        # Vertex AI: the pod's cloud identity (its ServiceAccount through Workload Identity)
        # in this project and location; no key.
        env += [{"name": "GOOGLE_CLOUD_PROJECT", "value": agents.vertex.project},
                {"name": "GOOGLE_CLOUD_LOCATION", "value": agents.vertex.location}]
    # The gate's corpus and minimum: read by the pod's MCP server, out of the model's reach.
    if gate.corpus:
        env.append({"name": REGRESSION_CORPUS_ENV, "value": gate.corpus})
    if gate.minimum is not None:
        env.append({"name": MIN_REGRESSION_ENV, "value": str(gate.minimum)})
    return env


def agent_jobs(c: desired.Campaign, *, default_image: str,
               service_account: str = "xla-sentinel-agent", gate: GateConfig | None = None,
               sandbox: SandboxConfig | None = None) -> list[Job]:
    """The agent Jobs the campaign should have: one Indexed Job per role of spec.agents."""
    if c.spec.agents is None:
        return []
    return [agent_job(c, role, default_image=default_image, service_account=service_account, gate=gate,
                      sandbox=sandbox)
            for role in c.spec.agents.roles]


def _token_volume() -> Manifest:
    """The ServiceAccount token as the API server's admission would project it, but named
    by the pod: only the containers that mount it (the runtime) see it."""
    return {"name": "kube-api-access", "projected": {"defaultMode": 0o444, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}


def sandbox_container(image: str, config: SandboxConfig, artifacts: bool) -> Manifest:
    """The agent pod's sandbox: `xla-sentinel sandbox-server` on the exchange's socket, a
    native sidecar (restartPolicy Always in initContainers: started before the runtime,
    stopped after it). Another uid than the runtime's, no token (nothing mounts it here),
    no environment but its own, a read-only root and artifacts, a scratch /tmp."""
    mounts: list[Manifest] = [{"name": "exchange", "mountPath": EXCHANGE_MOUNT},
                              {"name": "sandbox-tmp", "mountPath": "/tmp"}]
    if artifacts:
        mounts.append({"name": "artifacts", "mountPath": desired.ARTIFACTS_MOUNT, "readOnly": True})
    return {"name": SANDBOX_CONTAINER, "image": image, "restartPolicy": "Always",
            "args": ["sandbox-server", "--socket", SANDBOX_SOCKET, "--own-container",
                     "--run-seconds", repr(config.max_seconds)],
            "env": [{"name": "JAX_PLATFORMS", "value": "cpu"}, {"name": "HOME", "value": "/tmp"},
                    {"name": "TMPDIR", "value": "/tmp"}],
            "volumeMounts": mounts,
            "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                          "limits": {"cpu": config.cpu, "memory": config.memory}},
            "securityContext": {**desired.CONTAINER_SECURITY, "runAsUser": SANDBOX_UID,
                                "runAsGroup": SANDBOX_UID, "privileged": False}}


def agent_pod(image: str, args: list[str], env: list[EnvVar], service_account: str,
              artifacts_pvc: str, sandbox: SandboxConfig) -> Manifest:
    """The agent pod spec: the runtime alone (sandbox off), or runtime and sandbox."""
    volumes: list[Manifest] = [{"name": "tmp", "emptyDir": {}}]
    mounts: list[Manifest] = [{"name": "tmp", "mountPath": "/tmp"}]
    if artifacts_pvc:  # the corpus and the campaign's bundles live there
        volumes.append({"name": "artifacts", "persistentVolumeClaim": {"claimName": artifacts_pvc}})
        mounts.append({"name": "artifacts", "mountPath": desired.ARTIFACTS_MOUNT})
    runtime: Manifest = {"name": RUNTIME_CONTAINER, "image": image, "args": args, "env": env,
                         "volumeMounts": mounts, "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                         "securityContext": desired.CONTAINER_SECURITY}
    pod: Manifest = {"restartPolicy": "Never", "serviceAccountName": service_account,
                     "securityContext": desired.POD_SECURITY, "containers": [runtime], "volumes": volumes}
    if sandbox.runtime_class:
        pod["runtimeClassName"] = sandbox.runtime_class
    if not sandbox.container:
        return pod
    pod["automountServiceAccountToken"] = False
    volumes += [_token_volume(), {"name": "exchange", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "sandbox-tmp", "emptyDir": {"sizeLimit": "4Gi"}}]
    mounts += [{"name": "kube-api-access", "mountPath": TOKEN_MOUNT, "readOnly": True},
               {"name": "exchange", "mountPath": EXCHANGE_MOUNT}]
    runtime["env"] = [*env, {"name": SOCKET_ENV, "value": SANDBOX_SOCKET},
                      *([{"name": SHARED_ENV, "value": desired.ARTIFACTS_MOUNT}] if artifacts_pvc else [])]
    pod["initContainers"] = [sandbox_container(image, sandbox, bool(artifacts_pvc))]
    return pod


def agent_job(c: desired.Campaign, role: AgentRoleSpec, *, default_image: str,
              service_account: str = "xla-sentinel-agent", gate: GateConfig | None = None,
              wave: str = "", events: list[str] | None = None, sandbox: SandboxConfig | None = None) -> Job:
    """One role's Indexed Job: its first (at campaign create or a change of the agents), or
    a wave started by events (`wave`: its id, waves.wave_id; `events`: the events that
    started it, named on the Job), of at most `role.replicas` pods, one per event for
    signatures and reports (a pod takes one task), all for a coverage plateau."""
    assert c.spec.agents is not None
    rev = revision(c.spec)
    spec_json = json.dumps(c.spec.to_dict(), sort_keys=True)
    image = c.spec.image or default_image
    labels = {**desired.campaign_selector(c.name), desired.ROLE_LABEL: "agent",
              AGENT_ROLE_LABEL: role.role, AGENT_REVISION_LABEL: rev}
    annotations: dict[str, str] = {}
    replicas = role.replicas
    if wave:
        labels[WAVE_LABEL] = wave
        annotations[EVENTS_ANNOTATION] = json.dumps((events or [])[:waves.WAVE_EVENTS_SHOWN])
        if role.role != "stress":
            replicas = max(1, min(role.replicas, len(events or [])))
    pod = agent_pod(image, _args(c.spec, role), _env(c, role, spec_json, gate or GateConfig()),
                    service_account, c.spec.artifacts.pvc or "", sandbox or SandboxConfig())
    name = desired.job_name(c.name, "agent", role.role, rev, *([wave] if wave else []))
    meta: Meta = {"name": name, "namespace": c.namespace, "labels": labels,
                  "ownerReferences": [desired.owner_reference(c)]}
    if annotations:
        meta["annotations"] = annotations
    spec: Manifest = {"completionMode": "Indexed", "completions": replicas, "parallelism": replicas,
                      "backoffLimitPerIndex": 2, "podFailurePolicy": AGENT_FAILURE_POLICY,
                      "suspend": bool(c.spec.suspend), "template": {"metadata": {"labels": labels}, "spec": pod}}
    if wave:  # one Job per event: the finished ones go (their runs are kept in the store)
        spec["ttlSecondsAfterFinished"] = WAVE_TTL_SECONDS
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}  # type: ignore[typeddict-item]


def plan_agents(c: desired.Campaign, want: list[Job], have: list[Job]
                ) -> tuple[list[Job], list[str], dict[str, bool]]:
    """(Jobs to create, Job names to delete, suspend to set by name): the wanted ones of the
    current revision, none of an older revision or a role no longer listed. A wave of the
    current revision (started by events: converge_waves) stays while its role is listed."""
    rev = revision(c.spec)
    roles = {r.role for r in c.spec.agents.roles} if c.spec.agents else set()
    names = {j["metadata"]["name"] for j in have}
    wanted = {j["metadata"]["name"] for j in want} | {
        j["metadata"]["name"] for j in have
        if labels_of(j).get(WAVE_LABEL) and labels_of(j).get(AGENT_REVISION_LABEL) == rev
        and labels_of(j).get(AGENT_ROLE_LABEL) in roles}
    create = [] if c.spec.suspend else [j for j in want if j["metadata"]["name"] not in names]
    delete = sorted(names - wanted)
    suspend = {j["metadata"]["name"]: bool(c.spec.suspend) for j in have
               if j["metadata"]["name"] in wanted
               and bool(job_spec(j).get("suspend")) != bool(c.spec.suspend)}
    return create, delete, suspend


async def converge(rt: Runtime, c: desired.Campaign) -> None:
    """Create, delete and (un)suspend the campaign's agent Jobs (handlers.reconcile_campaign)."""
    jobs_path = path("batch/v1", "jobs", c.namespace)
    have = await rt.api.list(jobs_path, Job,
                             {**desired.campaign_selector(c.name), desired.ROLE_LABEL: "agent"})
    want = agent_jobs(c, default_image=rt.runner_image(c),
                      service_account=rt.config.jobs.agent_service_account,
                      gate=GateConfig(rt.config.jobs.agent_regression_corpus, rt.config.jobs.agent_min_regression),
                      sandbox=rt.config.jobs.agent_sandbox)
    create, delete, suspend = plan_agents(c, want, have)
    for job in create:
        _, created = await rt.api.create(jobs_path, job)
        if created:
            log.info("agents.created", campaign=c.name, namespace=c.namespace,
                     job=job["metadata"]["name"], replicas=job_spec(job).get("completions"))
    for name, value in suspend.items():
        await rt.api.patch(f"{jobs_path}/{name}", {"spec": {"suspend": value}})
    for name in delete:
        await rt.api.delete(f"{jobs_path}/{name}")
        log.info("agents.retired", campaign=c.name, namespace=c.namespace, job=name)


# --- waves: agent work started by events (waves.py) -----------------------------------------

async def _worker_coverage(rt: Runtime, c: desired.Campaign) -> waves.CoverageLevel:
    """What the campaign's workers covered, from their WorkerReports (every revision's)."""
    objs = await rt.api.list(path(API_VERSION, REPORT_PLURAL, c.namespace), Manifest,
                             desired.campaign_selector(c.name))
    found = [r for o in objs if (r := report_from_object(o)) is not None]
    return waves.coverage_level(r.coverage for r in found)


async def _ledger(rt: Runtime, c: desired.Campaign) -> waves.Ledger:
    """The campaign's task Leases, summed (waves.task_ledger)."""
    return waves.task_ledger(await rt.api.list(
        path(f"{LEASE_GROUP}/{LEASE_VERSION}", LEASE_PLURAL, c.namespace), Manifest,
        {**desired.campaign_selector(c.name), TASK_LABEL: "true"}))


def _gauges(rt: Runtime, c: desired.Campaign, ledger: waves.Ledger) -> None:
    m, labels = rt.metrics, (c.namespace, c.name)
    m.agent_tokens.labels(*labels).set(ledger.spent.tokens)
    m.agent_usd.labels(*labels).set(ledger.spent.usd)
    m.agent_tasks_dropped.labels(*labels).set(len(ledger.dropped))


async def converge_waves(rt: Runtime, c: desired.Campaign, status: Mapping[str, Any],
                         sigs: Iterable[BugSignature]) -> dict[str, list[str]]:
    """Start the agent work the campaign's events call for (periodic.py, after each
    roll-up): one wave Job per role with new events and no Job running, recorded in
    status.agents. `status` is the campaign's status as last seen, `sigs` the BugSignatures
    of its namespace (the operator's index). Returns the waves started."""
    agents = c.spec.agents
    if agents is None or c.spec.suspend:
        return {}
    now = datetime.now(UTC)
    plateau = waves.plateau_seconds()
    roles = {r.role: r for r in agents.roles}
    previous = cast(waves.AgentsStatus, status.get("agents") or {})
    events = waves.signature_events(c.name, sigs) if "fix" in roles else []
    coverage = previous.get("coverage") or {}
    ledger: waves.Ledger | None = None
    if waves.coverage_due(previous, now, plateau):  # the reads of many objects, now and then
        if "stress" in roles:
            coverage = waves.track_coverage(coverage, await _worker_coverage(rt, c), now)
        else:
            coverage = {**coverage, "checked": rfc3339(now)}
        ledger = await _ledger(rt, c)
    if "stress" in roles and (event := waves.plateau_event(coverage, now, plateau)) is not None:
        events.append(event)
    if "reproduce" in roles and ledger is not None:
        events += ledger.reports  # reports an agent pod seeded that no reproduce agent took
    jobs_path = path("batch/v1", "jobs", c.namespace)
    have = await rt.api.list(jobs_path, Job, {**desired.campaign_selector(c.name), desired.ROLE_LABEL: "agent"})
    busy = {labels_of(j).get(AGENT_ROLE_LABEL, "") for j in have if not waves.job_finished(j)}
    if ledger is None and waves.startable(events, previous, set(roles) - busy):
        ledger = await _ledger(rt, c)  # before a wave starts: did an earlier Job's agent do it?
    spending = previous.get("spending") or {}
    if ledger is not None:
        spending = waves.spending_record(ledger, spending_budget(c.spec))
        _gauges(rt, c, ledger)
    if spending.get("exhausted"):
        busy = set(roles)  # the budget is spent: no agent is started, the events wait
    planned = waves.plan(set(roles), busy, events, previous, coverage, now,
                         ledger.settled if ledger is not None else ())
    if ledger is not None:
        planned.status["spending"] = spending
        planned.status["tasks"] = ledger.states
        planned.status["dropped"] = ledger.dropped[:waves.DROPPED_SHOWN]
        planned.status["droppedTotal"] = len(ledger.dropped)
    for role, started in planned.waves.items():
        job = agent_job(c, roles[role], default_image=rt.runner_image(c),
                        service_account=rt.config.jobs.agent_service_account,
                        gate=GateConfig(rt.config.jobs.agent_regression_corpus, rt.config.jobs.agent_min_regression),
                        wave=waves.wave_id(started), events=started, sandbox=rt.config.jobs.agent_sandbox)
        await rt.api.create(jobs_path, job)
        planned.status["lastWave"] = {"role": role, "job": job["metadata"]["name"],
                                      "time": rfc3339(now), "events": started[:waves.WAVE_EVENTS_SHOWN]}
        log.info("agents.wave", campaign=c.name, namespace=c.namespace, role=role,
                 job=job["metadata"]["name"], events=started[:waves.WAVE_EVENTS_SHOWN])
        await rt.event(campaign_ref(c), "Normal", "AgentsStarted",
                       f"{role} agents started by {len(started)} event(s): {', '.join(started[:5])}")
    if planned.status != previous:
        try:
            await rt.api.patch(path(API_VERSION, "fuzzcampaigns", c.namespace, c.name, "status"),
                               {"status": {"agents": planned.status}})
        except ApiError as e:
            if e.status != 404:
                raise
    return planned.waves


# --- fix drafts ---------------------------------------------------------------------------

def writer_problem(c: desired.Campaign, name: str, job: Job | None) -> str | None:
    """Why result object `name` is not a fix agent pod's of campaign `c`, or None. A pod may
    write only the object named `<job>-<index>` after itself (the admission policy)."""
    if job is None:
        return f"{name}: no agent Job {name.rpartition('-')[0]!r} (a fix draft comes from a fix agent's pod)"
    labels = labels_of(job)
    if labels.get(desired.ROLE_LABEL) != "agent" or labels.get(AGENT_ROLE_LABEL) != "fix" \
            or labels.get(CAMPAIGN_LABEL) != desired.campaign_selector(c.name)[CAMPAIGN_LABEL]:
        return f"{name}: Job {job['metadata']['name']} is no fix agent of campaign {c.name}"
    return None


def min_regression(configured: int | None = None) -> int:
    """The fewest known bugs' reproducers a fix of the compiler must have been verified
    against: the operator's --agent-min-regression, else $XLA_SENTINEL_MIN_REGRESSION on the
    operator, else the gate's own default."""
    return configured if configured is not None else configured_minimum()


def draft_problem(draft: object, minimum: int | None = None) -> str | None:
    """Why a fix draft does not count, or None: only what the gate verified does (it cured
    the reproducer, no reproducer of the regression corpus got worse), and for a cure of the
    compiler only on a regression corpus of at least `minimum` reproducers (a rewrite of
    the program changes no compiler: the gate checks it on fresh inputs instead)."""
    if not isinstance(draft, dict) or not draft.get("signature") or not draft.get("cure"):
        return "a fix draft names its signature and cure"
    if not (draft.get("verified") is True and draft.get("cured") is True):
        return f"fix draft for {draft['signature']}: not verified by the gate"
    if draft.get("regressions"):
        return f"fix draft for {draft['signature']}: regressions {draft['regressions']}"
    floor = min_regression() if minimum is None else minimum
    corpus = draft.get("regressionCorpus")
    rewrite = str(draft["cure"]).startswith("rewrite (")
    if not rewrite and not (isinstance(corpus, int) and corpus >= floor):
        return (f"fix draft for {draft['signature']}: verified against {corpus} known bugs' reproducers, "
                f"fewer than the minimum {floor}")
    return None


def fix_draft_status(draft: FixDraft, job: str) -> FixDraft:
    """BugSignature status.fixDraft from a verified draft (crds/bugsignature.yaml)."""
    out = {k: draft[k] for k in DRAFT_FIELDS if draft.get(k) not in (None, "")}
    return {**out, "job": job}


async def ingest_fix_drafts(rt: Runtime, c: desired.Campaign, name: str,
                            result: FixDraftResult) -> None:
    """A fix agent pod's drafts (result `name`): each verified one becomes its signature's
    status.fixDraft, with an Event on the signature and the campaign; anything else is a
    Warning Event and nothing more."""
    job_name = name.rpartition("-")[0] or name
    job = await rt.api.get(path("batch/v1", "jobs", c.namespace, job_name), Job)
    problem = writer_problem(c, name, job)
    if problem is not None:
        await rt.event(campaign_ref(c), "Warning", "ResultRefused", problem)
        log.warning("fixdraft.refused", campaign=c.name, namespace=c.namespace, reason=problem)
        return
    for draft in result.get("drafts") or []:
        problem = draft_problem(draft, min_regression(rt.config.jobs.agent_min_regression))
        if problem is not None or not isinstance(draft, dict):
            await rt.event(campaign_ref(c), "Warning", "FixDraftRefused", f"{name}: {problem}")
            continue
        await _write_draft(rt, c, draft, job_name)


async def _write_draft(rt: Runtime, c: desired.Campaign, draft: FixDraft, job: str) -> None:
    signature = str(draft["signature"])
    record = fix_draft_status(draft, job)
    ns, sig_name = c.namespace, signatures.signature_name(signature)
    async with rt.lock(ns, signature):
        sig = await rt.api.get(path(API_VERSION, "bugsignatures", ns, sig_name), BugSignature)
        if sig is None:
            await rt.event(campaign_ref(c), "Warning", "FixDraftRefused",
                           f"fix draft for {signature}: no BugSignature {sig_name}")
            return
        if sig_status(sig).get("fixDraft") == record:
            return  # ingested before (a restarted operator reads results again)
        # A replace of the whole draft (merge patch: null clears an earlier draft's keys).
        # Guarded: a 409 (written in between) raises, and the re-ingestion loop retries.
        old = sig_status(sig).get("fixDraft") or {}
        patch: FixDraft = {**{k: None for k in old if k not in record}, **record}
        written = await rt.api.patch(path(API_VERSION, "bugsignatures", ns, sig_name, "status"),
                                     signatures.guarded(sig, {"status": {"fixDraft": patch}}),
                                     BugSignature)

    message = (f"agent {draft.get('agent')} ({draft.get('model')}): {draft['cure']} cures {signature}, "
               f"verified by the gate ({draft.get('reason')})")
    await rt.event(object_ref(written, "BugSignature"), "Normal", "FixDrafted", message)
    await rt.event(campaign_ref(c), "Normal", "FixDrafted", message)
    log.info("fixdraft.ingested", signature=signature, namespace=ns, cure=draft["cure"],
             agent=draft.get("agent"), at=now_text())
