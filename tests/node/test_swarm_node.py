"""The agent swarm on the real node (issue 37): a FuzzCampaign with spec.agents (one fix
agent) -> the operator's fix agent Job -> an agent pod of the runner image `make images`
built, run by the real kubelet and containerd (its runtime container with `xla-sentinel
agent`, its MCP server, the engine and XLA:CPU; its sandbox container with `xla-sentinel
sandbox-server`, the chart's default) -> a new BugSignature starts a fix wave (an event,
not the campaign's creation) -> the gate in the pod verifies the cure -> the operator
writes BugSignature status.fixDraft. Then the agent pods are deleted, and what the pod
persisted to the campaign's store (its run record, transcript and claims) is read from the
store: it outlived the pod.

What is not real here, and why:
- the model. No remote model API can exist in the tests: the scripted OpenAI-compatible
  server of tests/k8s/test_swarm.py (ScriptedModel, imported) runs on this host, listening
  on the host side of the pod bridge and reached from the pod as `model.NS.svc`
  (RealNode.expose_host_port: a headless Service whose EndpointSlice is that address,
  resolved by the node's CoreDNS), through the agents' real client path
  (`openai-chat:scripted`, spec.agents.endpoint as OPENAI_BASE_URL, the key from the
  campaign's Secret).
- the operator runs as a thread of this process (tests/k8s/conftest.py's RunningOperator)
  with the chart's RBAC, not as the chart's pods: tests/node/test_chart.py runs those; here
  the node's part is the agent pods.
- the artifacts PVC. This node has no storage provisioner and the control plane runs no
  PersistentVolume controller, so the test plays both, as a cluster's would: a hostPath
  PersistentVolume (a folder of this host, owned by the pods' uid) pre-bound to the
  campaign's PersistentVolumeClaim, whose Bound status the test writes. The pods mount the
  claim as the operator renders them; the folder outlives them as a disk would.
- the BugSignature is created by the test, as the operator would after a bisection, with
  the repository's reproducer of a real XLA:CPU bug (bench/repros/shift_set_then_reshape.py,
  cured by disabling algsimp, not cse; the image ships it as the package's corpus) as its
  repro; the cure is found and verified for real by the gate in the pod, against a
  regression corpus of three known bugs' reproducers the test put on the artifacts volume
  (the operator's --agent-regression-corpus and --agent-min-regression, as test_swarm.py
  sets them: a corpus small enough for the suite).
- the worker (spec.workers is at least 1) requests 100m CPU instead of the chart's default:
  the node is this 2-core machine, and the agent pod's two containers request one CPU each.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane.cluster import ControlPlane
from controlplane.kit import (
    NOT_APPLIED,
    OPERATOR_SA,
    RELEASE_NS,
    Api,
    apply,
    chart_operator_flags,
    helm_template,
    kubectl,
)
from controlplane.node import GATEWAY, RealNode
from k8s.conftest import RunningOperator, as_service_account, eventually, make_operator_config
from k8s.test_swarm import CORPUS, KEY, REGRESSION, SHIFT, SIGNATURE, ScriptedModel
from xla_sentinel.agents.lease_keys import ROLE_LABEL, STATE_ANNOTATION, TASK_LABEL
from xla_sentinel.cluster.report import CAMPAIGN_LABEL, writer_name
from xla_sentinel_operator import agents, desired
from xla_sentinel_operator.config import (
    Config,
)

from .conftest import RESTRICTED, UID, wait_for

API = "xlasentinel.dev/v1alpha1"
CAMPAIGN = "swarm"
PVC = "swarm-artifacts"
MOUNT = Path(desired.ARTIFACTS_MOUNT)  # where every pod of the campaign mounts the claim
# The repository's reproducer as a BugSignature names it; the image ships bench/repros as the
# package's corpus, where the pod's tools find it (a script of the volume is not trusted).
REPRO = f"bench/repros/{SHIFT.name}"
CORPUS_IN_POD = MOUNT / "regression-corpus"


@pytest.fixture
def swarm_ns(control_plane: ControlPlane, api: Api, node: RealNode) -> Iterator[str]:
    """A fresh `restricted` namespace with what the chart renders for it when the operator
    watches it (its Roles, the worker and agent ServiceAccounts, the WorkerReport admission
    policy: the pods' tokens are bound to them here), the CRDs, and the operator's
    ServiceAccount."""
    name = f"swarm-{uuid.uuid4().hex[:6]}"
    api.create("v1/namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": name, "labels": RESTRICTED}})
    release_ns = api.get("v1/namespaces", None, RELEASE_NS) is None  # the operator's, made here
    if release_ns:
        api.create("v1/namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": RELEASE_NS}})
    objs = helm_template(f"operator.watchNamespaces={{{name}}}")
    crds = [o for o in objs if o["kind"] == "CustomResourceDefinition"]
    apply(control_plane, crds)
    for crd in crds:
        done = kubectl(control_plane, "wait", "--for=condition=Established",
                       f"crd/{crd['metadata']['name']}", "--timeout=60s")
        assert done.returncode == 0, done.stderr
    rest = [o for o in objs if o["kind"] not in NOT_APPLIED | {"CustomResourceDefinition", "Pod"}]
    apply(control_plane, rest)
    wait_for(lambda: api.get("v1/serviceaccounts", name, "default"), 60, "default ServiceAccount")
    yield name
    api.delete("v1/namespaces", None, name)
    if release_ns:
        api.delete("v1/namespaces", None, RELEASE_NS)
    for o in rest:  # the cluster-scoped ones (the namespace took the others)
        if "namespace" not in o["metadata"]:
            kind = {"ClusterRole": "rbac.authorization.k8s.io/v1/clusterroles",
                    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1/clusterrolebindings",
                    "ValidatingAdmissionPolicy": "admissionregistration.k8s.io/v1/validatingadmissionpolicies",
                    "ValidatingAdmissionPolicyBinding":
                        "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"}[o["kind"]]
            api.delete(kind, None, o["metadata"]["name"])


@pytest.fixture
def store(api: Api, swarm_ns: str, tmp_path: Path) -> Iterator[Path]:
    """The campaign's artifacts PVC, bound to a hostPath PersistentVolume (the module's
    docstring): the host folder, holding the regression corpus."""
    folder = tmp_path / "pv"
    (folder / CORPUS_IN_POD.name).mkdir(parents=True)
    for name in REGRESSION:
        shutil.copy(CORPUS / name, folder / CORPUS_IN_POD.name / name)  # the file, not the link
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, UID, UID)
    pv = f"{swarm_ns}-artifacts"
    claim = api.create("v1/persistentvolumeclaims", swarm_ns, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        # As the PersistentVolume controller marks a claim it bound.
        "metadata": {"name": PVC, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
                 "resources": {"requests": {"storage": "1Gi"}}}})
    api.create("v1/persistentvolumes", None, {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain",
                 "hostPath": {"path": str(folder), "type": "Directory"},
                 "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": swarm_ns,
                              "name": PVC, "uid": claim["metadata"]["uid"]}}})
    api.patch("v1/persistentvolumes", None, pv, {"status": {"phase": "Bound"}}, sub="status")
    api.patch("v1/persistentvolumeclaims", swarm_ns, PVC, {"status": {
        "phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}, sub="status")
    yield folder
    api.delete("v1/persistentvolumes", None, pv)


@pytest.fixture
async def model(node: RealNode, swarm_ns: str) -> AsyncIterator[ScriptedModel]:
    m = ScriptedModel()
    await m.start(GATEWAY)  # the pod bridge's host address: the one host address pods reach
    host = node.expose_host_port(swarm_ns, "model", m.port)
    m.url = f"http://{host}:{m.port}/v1"  # as the campaign names it
    yield m
    await m.close()


def operator_config(cp: ControlPlane, api: Api, ns: str, image: str) -> Config:
    """The test operator (tests/k8s/conftest.py's operator_config) as the chart's operator
    ServiceAccount, creating pods of the built runner image."""
    flags = chart_operator_flags()
    return make_operator_config(
        ns, as_service_account(cp, api, RELEASE_NS, OPERATOR_SA), rollup_interval=0.5,
        jobs={"runner_image": image, "service_account": flags["--service-account"],
              "agent_service_account": flags["--agent-service-account"],
              "agent_regression_corpus": str(CORPUS_IN_POD), "agent_min_regression": len(REGRESSION)})


def campaign(ns: str, endpoint: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "FuzzCampaign", "metadata": {"name": CAMPAIGN, "namespace": ns},
            "spec": {"seed": 1, "workers": 1, "targets": [{"name": "default"}], "budget": {"programs": 1},
                     "generator": {"version": 1, "minOps": 2, "maxOps": 4, "dtypes": ["f32"]},
                     "bisect": {"enabled": False}, "artifacts": {"pvc": PVC},
                     "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
                     "agents": {"model": "openai-chat:scripted", "endpoint": endpoint,
                                "credentialSecretRef": {"name": "model-key", "key": "api-key"},
                                "budget": {"tokens": 200000, "toolCalls": 10, "seconds": 900},
                                "roles": [{"role": "fix", "replicas": 1}]}}}


def agent_jobs(api: Api, ns: str) -> list[dict[str, Any]]:
    return api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "agent"})


def agent_pods(api: Api, ns: str) -> list[dict[str, Any]]:
    return api.all("v1/pods", ns, {"xlasentinel.dev/role": "agent"})


def diagnose(cp: ControlPlane, api: Api, ns: str) -> str:
    lines = []
    for p in agent_pods(api, ns):
        name = p["metadata"]["name"]
        lines.append(f"--- {name} {p['status'].get('phase')} {json.dumps(p['status'].get('conditions'))[:600]}")
        for c in (agents.RUNTIME_CONTAINER, agents.SANDBOX_CONTAINER):
            done = kubectl(cp, "logs", "-n", ns, name, "-c", c)
            lines.append(f"[{c}] {(done.stdout + done.stderr)[-3000:]}")
    events = kubectl(cp, "get", "events", "-n", ns, "-o",
                     "custom-columns=OBJ:.involvedObject.name,REASON:.reason,MSG:.message")
    return "\n".join([*lines, events.stdout[-4000:]])


async def finished(cp: ControlPlane, api: Api, ns: str, job: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The one pod of an agent Job once it ended; its diagnosis where it does not."""
    name = job["metadata"]["name"]

    def ended() -> dict[str, Any] | None:
        pods = [p for p in agent_pods(api, ns) if p["metadata"]["labels"].get("job-name") == name]
        return pods[0] if len(pods) == 1 and pods[0]["status"].get("phase") in ("Succeeded", "Failed") else None

    try:
        pod: dict[str, Any] = await eventually(ended, timeout=timeout, interval=2)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnose(cp, api, ns)}") from None
    assert pod["status"]["phase"] == "Succeeded", diagnose(cp, api, ns)
    return pod


@pytest.mark.timeout(900)  # two agent pods' imports and the gate's XLA compiles on 2 cores
async def test_a_new_signature_starts_a_fix_agent_pod_on_the_real_node_whose_run_outlives_it(
        control_plane: ControlPlane, api: Api, node: RealNode, swarm_ns: str, store: Path,
        model: ScriptedModel, images: dict[str, dict[str, Any]]) -> None:
    ns, image = swarm_ns, images["runner-cpu"]["ref"]
    api.create("v1/secrets", ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key"},
                                  "data": {"api-key": base64.b64encode(KEY.encode()).decode()}})
    operator = await RunningOperator(operator_config(control_plane, api, ns, image)).start()
    try:
        await _swarm(control_plane, api, ns, store, model, image)
    finally:
        await operator.stop()


async def _swarm(cp: ControlPlane, api: Api, ns: str, store: Path, model: ScriptedModel, image: str) -> None:
    done = kubectl(cp, "apply", "-f", "-", stdin=yaml.safe_dump(campaign(ns, model.url)))
    assert done.returncode == 0, done.stderr

    # The campaign's own fix Job: its pod finds no signature, asks the model nothing, exits 0.
    (first,) = await eventually(lambda: agent_jobs(api, ns), timeout=60)
    assert agents.WAVE_LABEL not in first["metadata"]["labels"]
    pod = await finished(cp, api, ns, first, 420)
    assert pod["spec"]["nodeName"] == "node-real"
    assert {c["image"] for c in [*pod["spec"]["containers"], *pod["spec"]["initContainers"]]} == {image}
    assert model.requests == []

    # A new bug of the campaign, as the operator records one after a bisection: the event
    # that starts a fix wave.
    sig_name = f"sig-{SIGNATURE}"
    api.create(f"{API}/bugsignatures", ns, {
        "apiVersion": API, "kind": "BugSignature", "metadata": {"name": sig_name},
        "spec": {"signature": SIGNATURE, "verdict": "mismatch", "culpritOp": "dynamic_update_slice",
                 "repro": REPRO}})
    api.patch(f"{API}/bugsignatures", ns, sig_name, {"status": {"campaigns": [CAMPAIGN], "count": 1}},
              sub="status")
    (wave,) = await eventually(lambda: [j for j in agent_jobs(api, ns)
                                        if agents.WAVE_LABEL in j["metadata"]["labels"]], timeout=60)
    assert json.loads(wave["metadata"]["annotations"][agents.EVENTS_ANNOTATION]) == [f"signature:{SIGNATURE}"]
    started = [e for e in api.all("v1/events", ns) if e["reason"] == "AgentsStarted"]
    assert len(started) == 1 and f"signature:{SIGNATURE}" in started[0]["message"], started
    pod = await finished(cp, api, ns, wave, 600)
    agent = writer_name(pod["metadata"]["name"])
    (runtime,) = pod["status"]["containerStatuses"]
    assert runtime["state"]["terminated"]["exitCode"] == 0, runtime
    # Its sandbox container (for agent-written code; none here) served beside the runtime
    # and was stopped once the runtime ended.
    (sandbox,) = pod["status"]["initContainerStatuses"]
    assert sandbox["name"] == agents.SANDBOX_CONTAINER and "terminated" in sandbox["state"], sandbox
    logs = kubectl(cp, "logs", "-n", ns, pod["metadata"]["name"], "-c", agents.SANDBOX_CONTAINER)
    assert "confinement: " in logs.stdout, logs.stdout + logs.stderr

    # The fix task, taken once by the wave's agent and done (the pods seed every role's
    # tasks: the others wait for agents of their roles).
    leases = api.all("coordination.k8s.io/v1/leases", ns, {CAMPAIGN_LABEL: CAMPAIGN, TASK_LABEL: "true"})
    (lease,) = [x for x in leases if x["metadata"]["labels"][ROLE_LABEL] == "fix"]
    assert {x["metadata"]["annotations"][STATE_ANNOTATION] for x in leases if x is not lease} <= {"open"}
    assert lease["metadata"]["annotations"]["xlasentinel.dev/task-key"] == f"signature:{SIGNATURE}"
    assert lease["metadata"]["annotations"][STATE_ANNOTATION] == "done"
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == (agent, 1)

    # The model's side: one agent, the key from the Secret, cse tried (no cure), algsimp
    # submitted and verified by the gate in the pod.
    assert {r["agent"] for r in model.requests} == {agent}
    assert {r["auth"] for r in model.requests} == {f"Bearer {KEY}"}
    assert [r["step"] for r in model.requests] == [0, 1, 2]
    assert model.requests[0]["task"]["repro"] == REPRO
    tried = json.loads(model.requests[1]["results"][0])
    assert tried["cured"] is False and tried["verified_fix"] is False, tried
    submitted = json.loads(model.requests[2]["results"][1])
    assert submitted["verified"] is True, submitted

    # What the operator wrote: the draft on the signature, and the Event.
    sig = await eventually(lambda: (s := api.get(f"{API}/bugsignatures", ns, sig_name))
                           and s.get("status", {}).get("fixDraft") and s, timeout=60)
    draft = sig["status"]["fixDraft"]
    assert draft["cure"] == "--xla_disable_hlo_passes=algsimp"
    assert (draft["agent"], draft["job"], draft["model"]) == (agent, wave["metadata"]["name"], "openai-chat:scripted")
    assert draft["regressionCorpus"] == len(REGRESSION) and draft.get("regressions", []) == []
    assert [p.rsplit("/", 1)[-1] for p in draft["alsoCures"]] == ["divide_by_broadcast_reciprocal.py"]
    assert await eventually(lambda: [e for e in api.all("v1/events", ns) if e["reason"] == "FixDrafted"
                                     and e["involvedObject"]["kind"] == "BugSignature"], timeout=30)

    # The pods go (their emptyDirs, the agent's own folder, with them); the run stays in the
    # campaign's store on the volume.
    for job in (first, wave):
        code, out = api.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/{job['metadata']['name']}",
                                {"propagationPolicy": "Foreground"})
        assert code == 200, out
    await eventually(lambda: not agent_pods(api, ns) and not agent_jobs(api, ns), timeout=120, interval=1)
    kept = store / CAMPAIGN / "agents"
    (run_file,) = (kept / "runs").glob("*.json")
    run = json.loads(run_file.read_text())
    # The model as its client names it (the draft carries the spec's provider:model).
    assert (run["role"], run["agent"], run["model"]) == ("fix", agent, "scripted")
    assert (run["task"], run["exit"]) == (f"signature:{SIGNATURE}", 0), run
    assert [c["verified"] for c in run["claims"]] == [True], run["claims"]
    assert run["fix_drafts"], run
    transcript = json.loads((kept / "transcripts" / run_file.name).read_text())
    calls = [p["tool_name"] for m in transcript["messages"] for p in m["parts"] if p.get("part_kind") == "tool-call"]
    assert calls == ["try_cure", "submit_fix"], calls
    (claim,) = json.loads((kept / "claims" / run_file.name).read_text())
    assert claim["agent"] == agent and claim["verified"], claim
    assert sorted(p.relative_to(kept).parts[0] for p in kept.rglob("*") if p.is_file()) == [
        "claims", "runs", "transcripts"]
