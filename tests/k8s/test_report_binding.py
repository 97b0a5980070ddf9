"""Forged results, on the real API server: the chart's ValidatingAdmissionPolicy binds each
WorkerReport to the pod that writes it, through the pod-name claim of the pod's bound
service-account token (TokenRequest bound to a Pod object, as the kubelet mounts it).

Pod A's token writes A's report through the real K8sReporter (create, then patches) and is
refused B's report (patch of an existing one, or creating it first), a result object under a
verifier Job's name, and a report of another name; a worker token bound to no pod is refused
everything; the operator's own writes are untouched. Pods stay Pending (no kubelet needed:
the token binds to the Pod object)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from controlplane.kit import apply, helm_template
from xla_sentinel.cluster.report import (
    GROUP,
    REPORT_PLURAL,
    VERSION,
    result_object,
    writer_name,
)
from xla_sentinel.cluster.reporter import K8sReporter
from xla_sentinel_operator import desired

from .conftest import API, REPORT_POLICY, WORKER_SA
from .workers import finding, reports_api

JOB = "nightly-main-0123456789"  # a worker Job of campaign nightly (desired.job_name)


@pytest.fixture
def policy(control_plane, api, ns) -> Iterator[list[dict[str, Any]]]:
    """The chart's policy and binding for this test's namespace, as `helm install` applies
    them; removed afterwards (cluster-scoped, and the control plane is shared)."""
    objs = [o for o in helm_template(f"operator.watchNamespaces={{{ns}}}")
            if o["kind"] in REPORT_POLICY]
    assert {o["kind"] for o in objs} == set(REPORT_POLICY)
    apply(control_plane, objs)
    yield objs
    for o in objs:
        plural = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
                  "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[o["kind"]]
        assert api.delete(f"admissionregistration.k8s.io/v1/{plural}", None,
                          o["metadata"]["name"]) == 200


def pod(api, ns: str, name: str) -> dict[str, Any]:
    """A worker pod object as the Job controller names them: `<job>-<index>-<5 random>`."""
    return api.create("v1/pods", ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"serviceAccountName": WORKER_SA, "restartPolicy": "Never",
                 "containers": [{"name": "runner", "image": "runner:test"}]}})


def token(api, ns: str, bound: dict[str, Any] | None) -> str:
    """A worker ServiceAccount token, bound to `bound` (a Pod) as the kubelet's projected
    token is, or to nothing."""
    spec: dict[str, Any] = {"expirationSeconds": 3600}
    if bound is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod",
                                  "name": bound["metadata"]["name"], "uid": bound["metadata"]["uid"]}
    code, out = api.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{WORKER_SA}/token",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": spec})
    assert code == 201, out
    return out["status"]["token"]


def client(control_plane, ns: str, who: str, tok: str) -> kubernetes.client.CustomObjectsApi:
    return reports_api(control_plane.write_kubeconfig(f"{ns}-{who}", token=tok, namespace=ns))


def report(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "WorkerReport",
            "metadata": {"name": name, "namespace": ns, "labels": {"xlasentinel.dev/campaign": "nightly"}},
            "spec": {"campaign": "nightly", "worker": "main-1", "report": "{}"}}


def refused(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(kubernetes.client.exceptions.ApiException) as e:
        call(*args, **kwargs)
    assert e.value.status == 403, e.value.body
    return str(e.value.body)


def enforced(reports: kubernetes.client.CustomObjectsApi, ns: str, timeout: float = 30) -> None:
    """Wait until the API server enforces the new binding (it loads policies asynchronously)."""
    deadline = time.monotonic() + timeout
    for attempt in range(10**6):
        try:
            reports.create_namespaced_custom_object(GROUP, VERSION, ns, REPORT_PLURAL,
                                                    report(ns, f"probe-{attempt}"))
        except kubernetes.client.exceptions.ApiException as e:
            if e.status == 403:
                return
            raise
        assert time.monotonic() < deadline, "the WorkerReport policy is not enforced"
        time.sleep(0.5)


def test_a_pod_writes_its_own_report_and_no_other(control_plane, api, ns, policy):
    a = pod(api, ns, f"{JOB}-0-abcde")
    b = pod(api, ns, f"{JOB}-1-fghij")
    unbound = client(control_plane, ns, "unbound", token(api, ns, None))
    enforced(unbound, ns)
    as_a = client(control_plane, ns, "pod-a", token(api, ns, a))
    as_b = client(control_plane, ns, "pod-b", token(api, ns, b))

    # B writes its own report, as the real reporter does in pod B (XLA_SENTINEL_POD).
    assert writer_name(b["metadata"]["name"]) == f"{JOB}-1"
    rb = K8sReporter(as_b, namespace=ns, campaign="nightly", campaign_uid="", worker="main-1",
                     progress_interval=0.0, name=writer_name(b["metadata"]["name"]))
    rb.start()
    rb.finding(finding("0123456789abcdef", 1))
    rb.close()
    # A writes its own too: create, then patches.
    ra = K8sReporter(as_a, namespace=ns, campaign="nightly", campaign_uid="", worker="main-0",
                     progress_interval=0.0, name=writer_name(a["metadata"]["name"]))
    ra.start()
    ra.progress({"programs": 5, "elapsed_s": 1.0})
    ra.close()
    assert api.get(f"{API}/workerreports", ns, f"{JOB}-0")["spec"]["worker"] == "main-0"

    # A may not touch B's report: no patch (a forged finding count) ...
    message = refused(as_a.patch_namespaced_custom_object, GROUP, VERSION, ns, REPORT_PLURAL,
                      f"{JOB}-1", {"spec": {"report": '{"worker": "main-1"}'}})
    assert f"pod {JOB}-0-abcde may write WorkerReport {JOB}-0 only, not {JOB}-1" in message
    assert "0123456789abcdef" in api.get(f"{API}/workerreports", ns, f"{JOB}-1")["spec"]["report"]
    # ... nor create a report before its pod does, nor write a result under a verifier
    # Job's name (a forged "verified").
    refused(as_a.create_namespaced_custom_object, GROUP, VERSION, ns, REPORT_PLURAL,
            report(ns, f"{JOB}-2"))
    forged = result_object(namespace=ns, campaign="nightly", campaign_uid="", kind="verification",
                           key="sig", result={"signature": "sig", "result": "verified"},
                           name=desired.job_name("nightly", "verify", "sig", "abcdef"))
    refused(as_a.create_namespaced_custom_object, GROUP, VERSION, ns, REPORT_PLURAL, forged)
    # A token bound to no pod writes nothing, not even a report named like a pod's.
    assert "bound to no pod" in refused(
        unbound.patch_namespaced_custom_object, GROUP, VERSION, ns, REPORT_PLURAL, f"{JOB}-0",
        {"spec": {"report": "{}"}})

    # The operator (and people) are not workers: the policy leaves them alone.
    api.patch(f"{API}/workerreports", ns, f"{JOB}-1", {"metadata": {"labels": {"checked": "yes"}}})


def test_a_bisector_pod_writes_its_result_under_its_jobs_name(control_plane, api, ns, policy):
    job = desired.job_name("nightly", "bisect", "f00d")
    p = pod(api, ns, f"{job}-x7k2p")  # a plain Job's pods: `<job>-<5 random>`
    enforced(client(control_plane, ns, "unbound", token(api, ns, None)), ns)
    as_p = client(control_plane, ns, "bisector", token(api, ns, p))
    obj = result_object(namespace=ns, campaign="nightly", campaign_uid="", kind="bisection",
                        key="f00d", result={"status": "localized"},
                        name=writer_name(p["metadata"]["name"]))
    assert obj["metadata"]["name"] == job
    as_p.create_namespaced_custom_object(GROUP, VERSION, ns, REPORT_PLURAL, obj)
    # Its retry (a new pod of the same Job) replaces the result, as write_result does.
    retry = pod(api, ns, f"{job}-q9w3e")
    as_retry = client(control_plane, ns, "bisector-retry", token(api, ns, retry))
    as_retry.patch_namespaced_custom_object(GROUP, VERSION, ns, REPORT_PLURAL, job,
                                            {"spec": {"result": obj["spec"]["result"]}})


def test_worker_pods_know_their_name_and_their_job_names_keep_it_whole():
    """The operator gives every pod its name (XLA_SENTINEL_POD) and keeps `<job>-<index>-`
    within the 58 characters the Job controller leaves whole, so writer_name() of a pod is
    `<job>-<index>`, the name the policy allows."""
    from xla_sentinel.spec.campaign import parse_spec

    spec = parse_spec({"workers": 4096})
    c = desired.Campaign(name="n" * 253, namespace="ns", uid="u", spec=spec)
    (job,) = desired.worker_jobs(c, default_image="img")
    name = job["metadata"]["name"]
    assert len(f"{name}-4095-") <= 58
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert desired.POD_ENV in env
    assert writer_name(f"{name}-4095-abcde") == f"{name}-4095"
    verify = desired.verify_job(c, "sig", "/r", "0.10.1", default_image="img")
    assert desired.POD_ENV in verify["spec"]["template"]["spec"]["containers"][0]["env"]
