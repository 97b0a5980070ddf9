"""The chart as GKE runs it (issue 26), from `helm template` output:

- NetworkPolicy: each connection a GKE deployment makes is evaluated against the rendered
  policies (ipBlock, namespace and pod selectors, ports, as NetworkPolicy defines them): DNS
  through kube-dns, NodeLocal DNSCache and Cloud DNS, the metadata server (Workload
  Identity, so gs://), Alertmanager on 9093, the API server, a slice's hosts to each other,
  bisector and verifier pods covered; and what stays closed.
- Artifacts: no PVC unless asked; a ReadWriteMany claim without a class that provides it
  is refused at render time instead of staying Pending on GKE's default StorageClass.
- Alerts: the values say what the operator sends (Alertmanager's API), not Slack or
  PagerDuty payloads.
- Runner images and the WorkerReport admission policy: the flags and objects the chart
  gives the operator and the API server.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
import yaml
from xla_sentinel.cluster.report import CAMPAIGN_LABEL
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired
from xla_sentinel_operator.main import config_from_args

from .render import CHART, CI_VALUES, by_kind, helm, render, template_args

NP_VALUES = next(p for p in CI_VALUES if p.name == "networkpolicy-values.yaml")
WORKER_NS = "xla-fuzz"
KUBE_SYSTEM = {"kubernetes.io/metadata.name": "kube-system"}
MONITORING = {"kubernetes.io/metadata.name": "monitoring"}


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector matches labels (matchLabels and the operators NetworkPolicy uses)."""
    if selector is None:
        return True
    ok = all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())
    for e in selector.get("matchExpressions") or []:
        op, key, values = e["operator"], e["key"], e.get("values") or []
        ok &= {"Exists": key in labels, "DoesNotExist": key not in labels,
               "In": labels.get(key) in values,
               "NotIn": key not in labels or labels[key] not in values}[op]
    return ok


class Peer:
    """The far end of a connection: a pod (namespace labels, pod labels, IP) or an address."""

    def __init__(self, ip: str, pod: dict[str, str] | None = None,
                 namespace: dict[str, str] | None = None) -> None:
        self.ip, self.pod, self.namespace = ipaddress.ip_address(ip), pod, namespace


def peer_matches(rule_peer: dict[str, Any], peer: Peer, own_ns: dict[str, str]) -> bool:
    if "ipBlock" in rule_peer:
        block = rule_peer["ipBlock"]
        if peer.ip not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(peer.ip in ipaddress.ip_network(x) for x in block.get("except") or [])
    if peer.pod is None:  # a host-network or external address: only ipBlocks match it
        return False
    if "namespaceSelector" in rule_peer:
        if not selects(rule_peer["namespaceSelector"], peer.namespace or {}):
            return False
    elif peer.namespace != own_ns:  # a bare podSelector: the policy's own namespace
        return False
    return selects(rule_peer.get("podSelector"), peer.pod)


def port_matches(rule: dict[str, Any], port: int, protocol: str, named: dict[str, int]) -> bool:
    ports = rule.get("ports")
    if not ports:
        return True
    for p in ports:
        want = p.get("port")
        want = named.get(want, want) if isinstance(want, str) else want
        if p.get("protocol", "TCP") == protocol and (want is None or want == port):
            return True
    return False


def allowed(policies: list[dict[str, Any]], direction: str, pod: dict[str, str],
            ns: dict[str, str], peer: Peer, port: int, protocol: str = "TCP",
            named: dict[str, int] | None = None) -> bool:
    """Whether the policies selecting `pod` allow this connection (no policy: allowed)."""
    mine = [p for p in policies if p["metadata"]["namespace"] == ns["kubernetes.io/metadata.name"]
            and selects(p["spec"]["podSelector"], pod)
            and direction.capitalize() in p["spec"]["policyTypes"]]
    if not mine:
        return True
    key = "to" if direction == "egress" else "from"
    for policy in mine:
        for rule in policy["spec"].get(direction) or []:
            peers = rule.get(key)
            if (not peers or any(peer_matches(r, peer, ns) for r in peers)) and \
                    port_matches(rule, port, protocol, named or {}):
                return True
    return False


def _policies(*sets: str) -> list[dict[str, Any]]:
    out = helm(*template_args(NP_VALUES, sets=sets))
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "NetworkPolicy"]


def _pod_labels(role: str) -> dict[str, str]:
    spec = parse_spec({})
    c = desired.Campaign(name="nightly", namespace=WORKER_NS, uid="u", spec=spec)
    if role == "worker":
        (job,) = desired.worker_jobs(c, default_image="img")
    elif role == "verifier":
        job = desired.verify_job(c, "sig", "/r", "0.10.1", default_image="img")
    else:
        job = desired.bisector_job(c, {"signature": "sig", "id": "f00d", "dir": "d"}, "main-0",
                                   default_image="img")
    return job["spec"]["template"]["metadata"]["labels"]


POLICIES = _policies()
NS = {"kubernetes.io/metadata.name": WORKER_NS}
KUBE_DNS = Peer("10.8.0.20", {"k8s-app": "kube-dns"}, KUBE_SYSTEM)


@pytest.mark.parametrize("role", ["worker", "bisector", "verifier"])
@pytest.mark.parametrize(("case", "peer", "port", "protocol"), [
    ("kube-dns pods", KUBE_DNS, 53, "UDP"),
    ("kube-dns pods over TCP", KUBE_DNS, 53, "TCP"),
    ("NodeLocal DNSCache", Peer("169.254.20.10"), 53, "UDP"),
    ("Cloud DNS for GKE (metadata server)", Peer("169.254.169.254"), 53, "UDP"),
    ("metadata server: Workload Identity tokens", Peer("169.254.169.254"), 80, "TCP"),
    ("GKE metadata server on Dataplane V2", Peer("169.254.169.252"), 988, "TCP"),
    ("API server (the GKE control plane endpoint)", Peer("172.16.0.2"), 443, "TCP"),
    ("gs:// artifacts (storage.googleapis.com)", Peer("142.250.1.207"), 443, "TCP"),
])
def test_worker_pods_reach_what_gke_needs(role, case, peer, port, protocol):
    assert allowed(POLICIES, "egress", _pod_labels(role), NS, peer, port, protocol), case


def test_the_hosts_of_a_slice_reach_each_other_and_nothing_else_reaches_them():
    host0, host1 = _pod_labels("worker"), {**_pod_labels("worker"), desired.SLICE_LABEL: "1"}
    other_host = Peer("10.4.0.12", host1, NS)
    for port in (8471, 8476, 8431):  # libtpu and jax.distributed's coordinator
        assert allowed(POLICIES, "egress", host0, NS, other_host, port)
        assert allowed(POLICIES, "ingress", host0, NS, Peer("10.4.0.12", host1, NS), port)
    stranger = Peer("10.4.0.99", {"app": "web"}, NS)
    assert not allowed(POLICIES, "ingress", host0, NS, stranger, 8476)
    assert not allowed(POLICIES, "ingress", host0, NS,
                       Peer("10.4.1.3", host1, {"kubernetes.io/metadata.name": "other"}), 8476)
    # Nor does a worker reach arbitrary pods or addresses.
    assert not allowed(POLICIES, "egress", host0, NS, Peer("10.4.0.99", {"app": "db"}, NS), 5432)
    assert not allowed(POLICIES, "egress", host0, NS, Peer("8.8.8.8"), 53, "UDP")
    assert not allowed(POLICIES, "egress", host0, NS, Peer("10.8.0.30", {"app": "x"}, KUBE_SYSTEM), 53, "UDP")


def _slice_pod_labels(role: str) -> dict[str, str]:
    """The pod labels of a host of a multi-host TPU slice JobSet the operator makes for
    `role` (v6e 4x4: 4 hosts)."""
    spec = parse_spec({"accelerator": {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice",
                                       "tpuTopology": "4x4", "count": 4}})
    c = desired.Campaign(name="nightly", namespace=WORKER_NS, uid="u", spec=spec)
    if role == "worker":
        js = desired.worker_jobs(c, default_image="img")[0]
    elif role == "verifier":
        js = desired.verify_job(c, "sig", "/r", "0.10.1", default_image="img")
    else:
        js = desired.bisector_job(c, {"signature": "sig", "id": "f00d", "dir": "d"}, "main-0",
                                  default_image="img")
    assert js["kind"] == "JobSet"
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("role", ["worker", "bisector", "verifier"])
def test_the_hosts_of_every_multi_host_role_reach_each_other(role):
    # A bisector or verifier of a TPU campaign runs on a whole slice as well: its hosts
    # meet through libtpu and jax.distributed like a worker slice's.
    host = _slice_pod_labels(role)
    other = Peer("10.4.0.13", dict(host), NS)
    for port in (8471, 8476, 8431):
        assert allowed(POLICIES, "egress", host, NS, other, port), (role, port)
        assert allowed(POLICIES, "ingress", host, NS, other, port), (role, port)
    assert not allowed(POLICIES, "ingress", host, NS, Peer("10.4.0.99", {"app": "web"}, NS), 8476)


OPERATOR = {"app.kubernetes.io/name": "xla-sentinel", "app.kubernetes.io/instance": "xs",
            "app.kubernetes.io/component": "operator"}
RELEASE = {"kubernetes.io/metadata.name": "xla-sentinel"}


def test_the_operator_reaches_dns_the_api_server_and_alertmanager_on_9093():
    alertmanager = Peer("10.4.2.7", {"app.kubernetes.io/name": "alertmanager"}, MONITORING)
    for peer, port, proto in [(KUBE_DNS, 53, "UDP"), (Peer("169.254.20.10"), 53, "UDP"),
                              (Peer("169.254.169.254"), 53, "UDP"), (Peer("172.16.0.2"), 443, "TCP"),
                              (alertmanager, 9093, "TCP"), (Peer("35.190.0.1"), 443, "TCP")]:
        assert allowed(POLICIES, "egress", OPERATOR, RELEASE, peer, port, proto), (peer.ip, port)
    # Scraped on its metrics port from monitoring only (the CI values' metricsFrom).
    prometheus = Peer("10.4.2.8", {"app": "prometheus"}, MONITORING)
    assert allowed(POLICIES, "ingress", OPERATOR, RELEASE, prometheus, 8080, named={"http": 8080})
    assert not allowed(POLICIES, "ingress", OPERATOR, RELEASE,
                       Peer("10.4.0.5", {"app": "x"}, NS), 8080, named={"http": 8080})


def test_alertmanager_egress_narrows_to_its_namespace_when_told():
    policies = _policies("networkPolicy.alertmanager.to[0].namespaceSelector.matchLabels."
                         "kubernetes\\.io/metadata\\.name=monitoring")
    inside = Peer("10.4.2.7", {"app": "alertmanager"}, MONITORING)
    elsewhere = Peer("10.4.3.7", {"app": "alertmanager"}, NS)
    assert allowed(policies, "egress", OPERATOR, RELEASE, inside, 9093)
    assert not allowed(policies, "egress", OPERATOR, RELEASE, elsewhere, 9093)


def test_the_worker_policy_selects_every_pod_the_operator_makes():
    (worker_policy,) = [p for p in POLICIES if p["metadata"]["name"].endswith("-worker")
                        and p["metadata"]["namespace"] == WORKER_NS]
    for role in ("worker", "bisector", "verifier"):
        assert selects(worker_policy["spec"]["podSelector"], _pod_labels(role)), role
    assert _pod_labels("worker")[CAMPAIGN_LABEL] == "nightly"


def test_no_pvc_unless_asked_and_an_rwx_claim_needs_a_class_that_provides_it():
    default = render(next(p for p in CI_VALUES if p.name == "default-values.yaml"))
    assert by_kind(default, "PersistentVolumeClaim") == []
    out = helm(*template_args(sets=("artifacts.pvc.create=true",)))
    assert out.returncode != 0
    assert "ReadWriteMany claim needs artifacts.pvc.storageClassName" in out.stderr
    assert "standard-rwx" in out.stderr
    asked = helm(*template_args(sets=("artifacts.pvc.create=true",
                                      "artifacts.pvc.storageClassName=standard-rwx")))
    assert asked.returncode == 0, asked.stderr
    (pvc,) = [d for d in yaml.safe_load_all(asked.stdout) if d and d["kind"] == "PersistentVolumeClaim"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["storageClassName"] == "standard-rwx"
    # A single-node claim (ReadWriteOnce) binds on the default class: no class needed.
    rwo = helm(*template_args(sets=("artifacts.pvc.create=true",
                                    "artifacts.pvc.accessModes={ReadWriteOnce}")))
    assert rwo.returncode == 0, rwo.stderr


def test_the_values_promise_alertmanager_not_chat_payloads():
    text = (CHART / "values.yaml").read_text()
    alerts = text[text.index("# Alert routing."):text.index("\nalerts:")]
    assert "Alertmanager" in alerts and "/api/v2/alerts" in alerts
    assert "sends no Slack, PagerDuty or" in alerts  # they are Alertmanager's receivers
    for values in CI_VALUES:  # no route keeps a Slack webhook under a key named for it
        for route in (yaml.safe_load(values.read_text()).get("alerts") or {}).get("routes") or []:
            assert route["webhookSecretRef"].get("key", "url") not in ("slack", "pagerduty"), values.name


def test_the_operator_gets_each_platforms_runner_image():
    objs = render(next(p for p in CI_VALUES if p.name == "default-values.yaml"))
    (deployment,) = by_kind(objs, "Deployment")
    config = config_from_args(deployment["spec"]["template"]["spec"]["containers"][0]["args"][1:])
    values = yaml.safe_load((CHART / "values.yaml").read_text())["images"]["runner"]
    images = config.jobs.images()
    for platform, flavour in (("cpu", "cpu"), ("gpu", "gpu"), ("tpu", "tpu")):
        assert desired.repository(images[platform]).endswith("/" + values[flavour]["repository"])


def test_the_worker_report_policy_binds_the_worker_service_account_in_watched_namespaces():
    objs = render(NP_VALUES)
    (policy,) = by_kind(objs, "ValidatingAdmissionPolicy")
    (binding,) = by_kind(objs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    (expr,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert expr["values"] == ["xla-fuzz", "xla-fuzz-nightly"]
    worker_sa = next(o["metadata"]["name"] for o in by_kind(objs, "ServiceAccount")
                     if o["metadata"]["name"].endswith("-worker"))
    (condition,) = policy["spec"]["matchConditions"]
    assert f":{worker_sa}'" in condition["expression"]
    off = helm(*template_args(NP_VALUES, sets=("rbac.workerReportPolicy=false",)))
    assert "ValidatingAdmissionPolicy" not in off.stdout


def test_helm_test_checks_the_operator_through_its_service_and_is_let_in():
    from .podsecurity import restricted_violations

    objs = tuple(d for d in yaml.safe_load_all(helm(*template_args(NP_VALUES)).stdout) if d)
    (pod,) = [o for o in by_kind(objs, "Pod")
              if o["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"]
    assert restricted_violations(pod["spec"], pod["spec"]["containers"][0]) == []
    (service,) = [s for s in by_kind(objs, "Service") if s["metadata"]["name"].endswith("-operator")]
    script = pod["spec"]["containers"][0]["command"][-1]
    port = service["spec"]["ports"][0]["port"]
    assert f"http://{service['metadata']['name']}.xla-sentinel.svc:{port}" in script
    assert "/healthz" in script and "/metrics" in script
    # The operator's policy admits scrapes from monitoring only, and this pod besides.
    labels = pod["metadata"]["labels"]
    assert allowed(POLICIES, "ingress", OPERATOR, RELEASE, Peer("10.4.0.7", labels, RELEASE),
                   port, named={"http": port})
