"""The chart's NetworkPolicy for campaign pods, enforced on the real node by a real engine
(kube-router's network policy controller, tests/controlplane/node.py) and tested by traffic:
TCP connections between pods of the runner image on jax's coordinator port, before, while
and after the policies the chart renders for a watched namespace are in force.

The policies are the chart's NetworkPolicies for a watched namespace, rendered by real helm
with networkPolicy.enabled, among them the `-worker` one under test (charts/xla-sentinel/
templates/networkpolicy.yaml: campaign pods admit only the other hosts of a slice, and reach
only them, DNS, the metadata server, the API server and HTTPS); the pods carry the labels
the operator puts on a campaign's worker pods (desired.campaign_selector and the role
label). Without an engine enforcing it, the connection it forbids would succeed and the test
fails."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.kit import Api, helm_template, kubectl
from controlplane.node import GATEWAY, POLICY_CHAINS, RealNode
from xla_sentinel_operator.desired import ROLE_LABEL, campaign_selector

from .conftest import restricted_pod, wait_for
from .test_multihost_node import (  # the 2-host JobSet of that module, run here under policy
    diagnose,
    host_pods,
    jobset_condition,
    slice_ns,  # noqa: F401 (a fixture)
    start_campaign,
)

# jax.distributed's coordinator port between a multi-host group's pods (the chart's
# slice-peer rule names it; the runner's driver uses 8483 beside it).
COORDINATOR_PORT = 8482
NETPOL = "networking.k8s.io/v1/networkpolicies"
# How long a policy change may take to show in the node's iptables: kube-router syncs on
# each NetworkPolicy and Pod event, in about a second here; the rest is headroom for a
# loaded machine.
ENFORCED_WITHIN_S = 90

# Each pod answers connections on the coordinator port; `probe` connects from inside one.
SERVE = (
    "import socket\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    f"s.bind(('0.0.0.0', {COORDINATOR_PORT}))\n"
    "s.listen(16)\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    c.sendall(b'coordinator')\n"
    "    c.close()\n"
)
# 'connected' only with the server's answer read: a SYN let through with the answer dropped
# would otherwise pass. A policy's drop shows as a timeout, a reject as a refusal.
PROBE = (
    "import socket, sys\n"
    "try:\n"
    f"    c = socket.create_connection((sys.argv[1], {COORDINATOR_PORT}), timeout=3)\n"
    "    c.settimeout(3)\n"
    "    print('connected' if c.recv(64) == b'coordinator' else 'wrong answer')\n"
    "except TimeoutError:\n"
    "    print('timed out')\n"
    "except OSError as e:\n"
    "    print(f'refused ({e})')\n"
)


def chart_policies(namespace: str, *sets: str) -> list[dict[str, Any]]:
    """The chart's NetworkPolicies for the pods of a watched namespace (the campaign pods'
    `-worker` one among them), as helm renders them with network policies on, the operator
    watching `namespace`, and `sets`."""
    objs = helm_template(
        "networkPolicy.enabled=true", f"operator.watchNamespaces={{{namespace}}}", *sets
    )
    policies = [
        o for o in objs if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == namespace
    ]
    assert any(p["metadata"]["name"].endswith("-worker") for p in policies), policies
    return policies


def serving_pod(api: Api, ns: str, name: str, image: str, labels: dict[str, str]) -> str:
    """Start a pod answering on the coordinator port; its IP once it runs."""
    pod = restricted_pod(name, image, ["python3", "-c", SERVE])
    pod["metadata"]["labels"] = labels
    api.create("v1/pods", ns, pod)

    def ip() -> str | None:
        status = (api.get("v1/pods", ns, name) or {}).get("status") or {}
        return status.get("podIP") if status.get("phase") == "Running" else None

    return str(wait_for(ip, 180, f"pod {ns}/{name} running"))


def probe(cp: ControlPlane, ns: str, pod: str, ip: str) -> str:
    """What a TCP connection from `pod` to `ip`'s coordinator port gets: 'connected',
    'timed out' or 'refused (...)' (kubectl exec, inside the pod's network namespace)."""
    try:
        done = kubectl(cp, "exec", "-n", ns, pod, "--", "python3", "-c", PROBE, ip)
    except subprocess.TimeoutExpired:
        return "kubectl exec timed out"
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def settles(check: Callable[[], str], want: Callable[[str], bool], what: str) -> str:
    """Probe until the answer is what the policy's state says (the engine's sync takes a
    moment), failing with the last answer past ENFORCED_WITHIN_S."""
    answers: list[str] = []

    def settled() -> bool:
        answers.append(check())
        return want(answers[-1])

    try:
        wait_for(settled, ENFORCED_WITHIN_S, what, interval=1)
    except AssertionError as e:
        raise AssertionError(f"{e}; the last answers: {answers[-3:]}") from None
    return answers[-1]


def test_chart_worker_policy_admits_slice_peers_on_the_coordinator_port_and_refuses_others(
    control_plane: ControlPlane,
    api: Api,
    policy_engine: RealNode,
    restricted_ns: str,
    images: dict[str, dict[str, Any]],
) -> None:
    ns, image = restricted_ns, images["runner-cpu"]["ref"]
    campaign = f"np-{uuid.uuid4().hex[:6]}"
    worker = {**campaign_selector(campaign), ROLE_LABEL: "worker"}
    host0 = serving_pod(api, ns, "host-0", image, worker)
    serving_pod(api, ns, "host-1", image, worker)
    # A pod of the namespace that is not part of any slice (no campaign, no role).
    stranger = serving_pod(api, ns, "stranger", image, {"app": "stranger"})

    def connected(got: str) -> bool:
        return got == "connected"

    def cut_off(got: str) -> bool:
        # kube-router REJECTs (a refusal), other engines drop (a timeout). A closed port is
        # refused too: host 1 reaching the same server right after shows it was listening.
        return got == "timed out" or got.startswith("refused")

    # No policy yet: the bridge lets every pod reach every other (the engine runs, with
    # nothing to enforce).
    assert probe(control_plane, ns, "stranger", host0) == "connected"
    assert probe(control_plane, ns, "host-1", stranger) == "connected"

    policies = chart_policies(ns)
    for policy in policies:
        api.create(NETPOL, ns, policy)
    # Ingress: host 0 admits only slice peers, so the stranger is cut off...
    settles(
        lambda: probe(control_plane, ns, "stranger", host0),
        cut_off,
        "the chart's worker policy keeping a non-slice pod from host 0's coordinator port",
    )
    # ... while host 1 (a peer both ways: its egress to host 0, host 0's ingress) still
    # reaches host 0, as jax.distributed's hosts must.
    assert probe(control_plane, ns, "host-1", host0) == "connected"
    # Egress: a worker reaches no pod but its slice peers.
    assert cut_off(probe(control_plane, ns, "host-1", stranger))

    # The policies are what cut the stranger off: without them the same connection succeeds.
    for policy in policies:
        assert api.delete(NETPOL, ns, policy["metadata"]["name"]) == 200
    settles(
        lambda: probe(control_plane, ns, "stranger", host0),
        connected,
        "the stranger reaching host 0 again once the policies are deleted",
    )
    assert probe(control_plane, ns, "host-1", stranger) == "connected"


def policed_ips() -> set[str]:
    """The pod addresses the engine has a firewall chain for in the filter table now (one
    KUBE-POD-FW- chain per pod some policy selects, matched by its address)."""
    saved = subprocess.run(
        ["iptables-save", "-t", "filter"], capture_output=True, text=True, check=True
    ).stdout
    ips = set()
    for line in saved.splitlines():
        rule = line.split()
        if line.startswith("-A ") and rule[-1].startswith(POLICY_CHAINS[2]) and "-d" in rule:
            ips.add(rule[rule.index("-d") + 1].removesuffix("/32"))
    return ips


@pytest.mark.timeout(900)  # the slice's own wait (420 s) and its diagnosis
def test_a_two_host_slice_runs_to_completion_under_the_chart_policies(
    control_plane: ControlPlane,
    api: Api,
    policy_engine: RealNode,
    slice_ns: str,  # noqa: F811 (the fixture imported above)
    images: dict[str, dict[str, Any]],
) -> None:
    """What a multi-host slice really sends (jax.distributed's coordinator, gloo's
    collectives, the driver port, host 0 looked up by name, the WorkerReport to the API
    server) is all admitted by the chart's policies, with the engine policing both hosts.

    Two values say where this node's services are, as a GKE install says where its own are:
    DNS is the node's CoreDNS on the bridge's host address (networkPolicy.dns.cidrs, which
    on GKE names NodeLocal DNSCache), and the API server is reached at 127.0.0.1 on its own
    port once the node's DNAT has turned 10.96.0.1:443 into it: NetworkPolicy is evaluated
    on the translated destination (networkPolicy.apiServer.ports)."""
    ns = slice_ns
    policies = chart_policies(
        ns,
        f"networkPolicy.dns.cidrs={{{GATEWAY}/32}}",
        f"networkPolicy.apiServer.ports={{443,{control_plane.port}}}",
    )
    for policy in policies:
        api.create(NETPOL, ns, policy)
    _, name = start_campaign(api, ns, images["runner-cpu"]["ref"], "np-slice", 4)

    def hosts_policed() -> bool:
        ips = {p["status"].get("podIP") for p in host_pods(api, ns, name).values()}
        return len(ips) == 2 and None not in ips and ips <= policed_ips()

    try:
        wait_for(hosts_policed, 300, "both hosts' pods under the engine's firewall", interval=1)
        done = wait_for(
            lambda: jobset_condition(api, ns, name), 420, f"JobSet {name} finished", interval=2
        )
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnose(control_plane, api, ns, name)}") from None
    assert done == "Completed", diagnose(control_plane, api, ns, name)
