"""`xla-sentinel operator`: run the kopf operator (peering, /metrics, /healthz, JSON logs)."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any, cast

import kopf
from kopf._cogs.aiokits import aiotoggles  # kopf's readiness gate: see GatedToggleSet

from . import handlers, logs
from .config import AlertingConfig, Config, JobsConfig, MetricsConfig, PeeringConfig, SandboxConfig
from .runtime import Runtime

if TYPE_CHECKING:
    from kopf._core.engines.peering import Identity  # typed by kopf, not exported


class GatedToggleSet(aiotoggles.ToggleSet):
    """kopf's ToggleSet with one waiter per wanted state on its condition, the others queued
    behind a lock: a state change wakes one task, not every waiting one.

    A starting kopf operator holds every object it lists until every index is filled: each
    object's task drops its toggle and waits on the set, and every toggle made or dropped
    wakes every task already waiting (asyncio.Condition.notify_all). That is quadratic in
    the objects listed: 2,000 cost 88 s of CPU (1.1 s with this gate, tests:
    bench/operator_scale.py --restart), so an operator restarted beside 1,520 workers'
    pods and reports handled nothing for 195 s, one beside 4,196 not even a spec change
    within 300 s, while holding every listed object whole (431 MiB). What a waiter sees is
    unchanged: it returns once the set is in the state it waits for."""

    def __init__(self, fn: Any) -> None:
        super().__init__(fn)
        self._gates = {True: asyncio.Lock(), False: asyncio.Lock()}

    async def wait_for(self, state: bool) -> None:
        state = bool(state)
        while self.is_on() != state:
            async with self._gates[state]:
                if self.is_on() != state:
                    await super().wait_for(state)


def gate_kopf_readiness() -> None:
    """Make kopf build its toggle sets (readiness, pausing) as GatedToggleSet. kopf looks
    the class up in its module at each operator's start; set once per process."""
    aiotoggles.ToggleSet = GatedToggleSet  # type: ignore[misc]


def _seconds(text: str) -> float:
    """A positive number of seconds (an interval of 0 would spin)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _parser() -> argparse.ArgumentParser:
    d = Config()
    p = argparse.ArgumentParser(prog="xla-sentinel operator",
                                description="Reconcile FuzzCampaigns; dedup and alert BugSignatures.")
    p.add_argument("--namespace", action="append", default=[],
                   help="watch this namespace (repeatable; default: the whole cluster)")
    p.add_argument("--kubeconfig", default=None,
                   help="use this kubeconfig's current context (default: in-cluster, then "
                        "$KUBECONFIG or ~/.kube/config)")
    p.add_argument("--runner-image", default=d.jobs.runner_image,
                   help="runner image of CPU campaigns that name no spec.image")
    p.add_argument("--gpu-runner-image", default=d.jobs.gpu_runner_image,
                   help="runner image (CUDA jaxlib) of GPU campaigns that name no spec.image")
    p.add_argument("--tpu-runner-image", default=d.jobs.tpu_runner_image,
                   help="runner image (libtpu) of TPU campaigns that name no spec.image")
    p.add_argument("--service-account", default=d.jobs.service_account,
                   help="service account of worker and bisector pods")
    p.add_argument("--agent-service-account", default=d.jobs.agent_service_account,
                   help="service account of agent pods (spec.agents)")
    p.add_argument("--agent-regression-corpus", default=d.jobs.agent_regression_corpus, metavar="DIR",
                   help="folder of known bugs' reproducers agent pods verify fixes against "
                        "(default: the runner package's own corpus)")
    p.add_argument("--agent-min-regression", type=int, default=d.jobs.agent_min_regression, metavar="N",
                   help="refuse a fix draft verified against fewer reproducers (default: the gate's, 8)")
    box = d.jobs.agent_sandbox
    p.add_argument("--agent-sandbox", choices=("container", "off"),
                   default="container" if box.container else "off",
                   help="where agent-written code runs: the agent pod's sandbox container (another "
                        "uid, no token, no secrets, read-only root and artifacts) or, off, beside "
                        "the agent in its own container (default: container)")
    p.add_argument("--agent-sandbox-cpu", default=box.cpu, help="the sandbox container's CPU limit")
    p.add_argument("--agent-sandbox-memory", default=box.memory,
                   help="the sandbox container's memory limit")
    p.add_argument("--agent-sandbox-seconds", type=_seconds, default=box.max_seconds,
                   help="the longest one run of agent code may take in the sandbox")
    p.add_argument("--agent-runtime-class", default=box.runtime_class, metavar="NAME",
                   help="RuntimeClass of agent pods, e.g. gvisor for GKE Sandbox (default: none)")
    p.add_argument("--no-jobset", dest="jobset", action="store_false",
                   help="the cluster has no JobSet (sigs.k8s.io/jobset): refuse multi-host TPU "
                        "campaigns (condition Stalled, reason JobSetUnavailable)")
    p.add_argument("--rollup-interval", type=float, default=d.rollup_interval)
    p.add_argument("--alert-retry-interval", type=float, default=d.alerting.retry_interval)
    p.add_argument("--alert-resend-interval", type=_seconds, default=d.alerting.resend_interval,
                   help="seconds between re-sends of open signatures' firing alerts; keep it "
                        "below Alertmanager's resolve_timeout (default 5m)")
    p.add_argument("--alert-attempts", type=int, default=d.alerting.attempts)
    p.add_argument("--alert-backoff", type=float, default=d.alerting.backoff)
    p.add_argument("--alert-rate", type=float, default=d.alerting.rate,
                   help="alerts per second per receiver once a burst is spent")
    p.add_argument("--alert-burst", type=int, default=d.alerting.burst,
                   help="alerts a receiver may get at once")
    p.add_argument("--external-url", default=d.alerting.external_url,
                   help="link put in alerts (e.g. a dashboard)")
    p.add_argument("--metrics-host", default=d.metrics.host)
    p.add_argument("--metrics-port", type=int, default=d.metrics.port,
                   help="port of /metrics, /healthz, /readyz and /livez (0: any free port)")
    p.add_argument("--page-port", type=int, default=d.metrics.page_port,
                   help="port of the triage page /namespaces/NS (default: not served)")
    p.add_argument("--page-token-file", default=d.metrics.page_token_file,
                   help="file holding the bearer token the triage page asks for (read at "
                        "each request, so a rotated token applies at once)")
    p.add_argument("--peering", default=d.peering.name,
                   help="peering name shared by replicas; the highest priority one acts")
    p.add_argument("--priority", type=int, default=None,
                   help="peering priority (default: by seniority, so the replica that started "
                        "first leads and a restarted one never outranks it)")
    p.add_argument("--standalone", action="store_true", help="no peering (a single replica)")
    p.add_argument("--log-level", default="INFO")
    return p


def config_from_args(argv: list[str]) -> Config:
    a = _parser().parse_args(argv)
    return Config(
        namespaces=a.namespace, kubeconfig=a.kubeconfig, rollup_interval=a.rollup_interval,
        jobs=JobsConfig(runner_image=a.runner_image, gpu_runner_image=a.gpu_runner_image,
                        tpu_runner_image=a.tpu_runner_image, service_account=a.service_account,
                        agent_service_account=a.agent_service_account,
                        agent_regression_corpus=a.agent_regression_corpus,
                        agent_min_regression=a.agent_min_regression, jobset=a.jobset,
                        agent_sandbox=SandboxConfig(
                            container=a.agent_sandbox == "container", runtime_class=a.agent_runtime_class,
                            cpu=a.agent_sandbox_cpu, memory=a.agent_sandbox_memory,
                            max_seconds=a.agent_sandbox_seconds)),
        alerting=AlertingConfig(retry_interval=a.alert_retry_interval,
                                resend_interval=a.alert_resend_interval, attempts=a.alert_attempts,
                                backoff=a.alert_backoff, rate=a.alert_rate, burst=a.alert_burst,
                                external_url=a.external_url),
        metrics=MetricsConfig(host=a.metrics_host, port=a.metrics_port, page_port=a.page_port,
                              page_token_file=a.page_token_file),
        peering=PeeringConfig(name=a.peering, priority=a.priority, standalone=a.standalone))


async def operate(config: Config, *, stop_flag: Any = None,
                  ready_flag: Any = None, runtime: Runtime | None = None) -> None:
    """Run one operator until `stop_flag` is set (or forever); its own registry and runtime."""
    gate_kopf_readiness()
    registry = kopf.OperatorRegistry()
    rt = runtime or Runtime(config)
    handlers.register(registry, rt)
    await kopf.operator(
        registry=registry,
        clusterwide=not config.namespaces,
        namespaces=config.namespaces,
        standalone=config.peering.standalone,
        peering_name=config.peering.name,
        # The name the heartbeat looks for in the peering objects; kopf's NewType of str.
        identity=cast("Identity", rt.identity),
        priority=rt.priority,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )


def run(argv: list[str]) -> int:
    try:
        config = config_from_args(argv)
        level = _parser().parse_args(argv).log_level
    except SystemExit as e:  # argparse: 0 after --help, 2 with one line naming the bad flag
        return e.code if isinstance(e.code, int) else 2
    logs.configure(level)
    # No stop flag: kopf stops on SIGTERM/SIGINT itself (a threading.Event flag would be
    # waited on in an executor thread that asyncio.run then joins forever).
    asyncio.run(operate(config))
    return 0
