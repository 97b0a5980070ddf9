"""The operator's settings, grouped by what they govern; main.py fills them from its flags
(`xla-sentinel operator --help`), tests construct them directly.

Defaults here are the flags' defaults, so a Config() is what a bare `xla-sentinel operator`
runs with.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SandboxConfig:
    """How agent pods are built (agents.agent_pod; docs/agents.md "The sandbox container"):
    agent code in the pod's sandbox container (`container`) or, with it off, in the
    runtime's own (one container, the ServiceAccount token automounted); the pods'
    RuntimeClass ("" none; GKE Sandbox: gvisor); the sandbox container's limits and the
    longest one run of agent code may take there. Flags --agent-sandbox,
    --agent-sandbox-cpu, --agent-sandbox-memory, --agent-sandbox-seconds,
    --agent-runtime-class; the container is the default, with or without the chart."""

    container: bool = True
    runtime_class: str = ""
    cpu: str = "2"
    memory: str = "4Gi"
    max_seconds: float = 900.0


@dataclass(frozen=True)
class JobsConfig:
    """What the worker, bisector and verification Jobs the operator creates run as."""

    # The runner image of each platform (spec.accelerator.type), for a campaign that names
    # none: a TPU campaign on the CPU image would hold chips it cannot use (jax without
    # libtpu). desired.runner_image picks one and refuses an explicit image of another.
    runner_image: str = "ghcr.io/xla-sentinel/runner:0.1.0"  # cpu
    gpu_runner_image: str = "ghcr.io/xla-sentinel/runner-cuda:0.1.0"
    tpu_runner_image: str = "ghcr.io/xla-sentinel/runner-tpu:0.1.0"
    service_account: str = "xla-sentinel-worker"
    # Identity of agent pods (spec.agents): Leases and BugSignature reads besides the reports.
    agent_service_account: str = "xla-sentinel-agent"
    # The regression corpus agent pods' MCP servers verify fixes against (a folder of known
    # bugs' reproducers in the agent image or on the artifacts PVC; "" = the package's own,
    # bench/repros), and the fewest reproducers a fix of the compiler must have been
    # verified against (None = the gate's default). The operator's choice, never the agent's.
    agent_regression_corpus: str = ""
    agent_min_regression: int | None = None
    agent_sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    # JobSet (sigs.k8s.io/jobset) is installed: multi-host TPU slices run as JobSets
    # (jobsets.py). Without it they are refused (runtime.campaign_of), never split.
    jobset: bool = True

    def images(self) -> dict[str, str]:
        """Runner image by platform (the names of spec.accelerator.type)."""
        return {"cpu": self.runner_image, "gpu": self.gpu_runner_image,
                "tpu": self.tpu_runner_image}


@dataclass(frozen=True)
class AlertingConfig:
    """Delivery of BugSignature alerts to the webhook a campaign names."""

    retry_interval: float = 30.0  # seconds between retries of an alert still owed
    # Seconds between re-sends of every open signature's firing alert (Alertmanager's client
    # contract: keep sending what still fires). Below Alertmanager's resolve_timeout (5 min
    # by default); each alert ends RESEND_HOLD intervals later unless sent again.
    resend_interval: float = 60.0
    attempts: int = 5  # HTTP attempts of one delivery
    backoff: float = 0.5  # seconds before the second attempt, doubling after
    rate: float = 0.2  # alerts per second per receiver, after a burst of `burst`
    burst: int = 5
    external_url: str = ""  # link put in alerts (e.g. a dashboard)


@dataclass(frozen=True)
class MetricsConfig:
    """The HTTP endpoints: /metrics and the probes on `port`; the triage page, opt-in, on
    `page_port` of its own (it shows the signatures and repro paths of every watched
    namespace, so it is not on the port every scraper reaches), behind a bearer token when
    `page_token_file` names one."""

    host: str = "0.0.0.0"
    port: int | None = 8080  # None: no HTTP endpoint; 0: any free port
    page_port: int | None = None  # None: no triage page; 0: any free port
    page_token_file: str | None = None  # requests must bring "Authorization: Bearer <it>"


@dataclass(frozen=True)
class PeeringConfig:
    """kopf peering: which of several replicas acts."""

    name: str = "xla-sentinel"
    priority: int | None = None  # None: by seniority (leadership.seniority_priority)
    standalone: bool = False  # no peering (a single replica)


@dataclass
class Config:
    """Everything one operator runs with. Groups by flag: --runner-image,
    --gpu-runner-image, --tpu-runner-image, --service-account (jobs); --alert-*, --external-url (alerting); --metrics-* (metrics); --peering,
    --priority, --standalone (peering)."""

    namespaces: list[str] = field(default_factory=list)  # empty: the whole cluster
    kubeconfig: str | None = None  # this file's current context instead of in-cluster
    rollup_interval: float = 10.0  # seconds between status roll-ups of a campaign
    jobs: JobsConfig = field(default_factory=JobsConfig)
    alerting: AlertingConfig = field(default_factory=AlertingConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    peering: PeeringConfig = field(default_factory=PeeringConfig)
