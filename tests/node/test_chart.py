"""The chart on the real node, as a platform engineer installs it: `helm install` with the
images `make images` built (by tag, imagePullPolicy IfNotPresent), into a namespace that
enforces Pod Security `restricted`; the operator runs as pods of the chart's Deployment
(two replicas, peering) from its image; a FuzzCampaign applied with kubectl runs its worker
in the runner image as uid 10001 on a read-only root; the worker's reports roll up into the
campaign's status, its findings into BugSignatures and alerts in a real Alertmanager. Then the
faults a node brings, on one continuous campaign: a worker evicted (SIGTERM, 143, its index
resumes), the leader operator pod deleted (the standby takes over, no second Job), an
operator wedged (SIGSTOP; the chart's liveness probe has the kubelet restart it), kubelet and
containerd restarted (nothing lost); and a worker over its memory limit OOM-killed by the
kernel (137, OOMKilled, its index resumes, no finding lost or counted twice).

The campaign is examples/k8s-quickstart.yaml made small for a 2-core CI machine: one worker,
8 programs of the end-to-end test's generator settings and references, requests of 100m CPU
and 512Mi instead of 4 workers x (1 CPU, 2Gi) for 2000 programs, and an injected miscompile
(the quickstart's real XLA finds nothing in 8 programs) so that it has findings to alert on."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from controlplane.cluster import ControlPlane, ControlPlaneError
from controlplane.kit import CHART, Api, kubectl
from controlplane.node import GATEWAY, RealNode, chart_image_values
from k8s.alertmanager import Alertmanager
from tools import REPO_ROOT, helm_path
from xla_sentinel.xla.faults import FAULTS
from xla_sentinel_operator import leadership
from xla_sentinel_operator.desired import CAMPAIGN_LABEL

from .conftest import UID, wait_for

API = "xlasentinel.dev/v1alpha1"
RELEASE = "xs"
QUICKSTART = REPO_ROOT / "examples" / "k8s-quickstart.yaml"
# Where the runner image (Dockerfile: a venv in /opt/venv, Python 3.11) installs the package,
# so a fault plugin's path inside the worker's container.
RUNNER_SITE = "/opt/venv/lib/python3.11/site-packages"
FAULT = "fusion_bf16_rounding"  # an injected miscompile the 8 programs hit (tests/k8s/test_end_to_end.py)
# The chart's own liveness probe (GET /livez on the http port), its timing set through the
# chart's values so a wedged operator is seen in ~10 s instead of 60 s (defaults sized for a
# loaded production node): test time, not a weaker probe. The kill then waits the pod's 30 s
# grace period (the chart's values schema has no probe-level terminationGracePeriodSeconds).
LIVENESS_FOR_CI = ["operator.livenessProbe.periodSeconds=5", "operator.livenessProbe.failureThreshold=2"]


def small_quickstart(ns: str) -> dict[str, Any]:
    """The quickstart's FuzzCampaign, sized for CI (see the module docstring), with an
    injected miscompile so its 8 programs give findings, and its alert route kept."""
    (campaign,) = [d for d in yaml.safe_load_all(QUICKSTART.read_text())
                   if d and d["kind"] == "FuzzCampaign"]
    campaign["metadata"]["namespace"] = ns
    spec = campaign["spec"]
    spec.update({"seed": 3, "workers": 1, "budget": {"programs": 8}, "bisect": {"enabled": False},
                 "generator": {"version": 1, "minOps": 3, "maxOps": 12, "dtypes": ["f32"]},
                 "references": ["f64_eager", "f64_jit", "eager"],
                 "injectPasses": [f"{RUNNER_SITE}/xla_sentinel/xla/faults/{FAULTS[FAULT]}"],
                 "resources": {"requests": {"cpu": "100m", "memory": "512Mi"},
                               "limits": {"memory": "2Gi"}}})
    return campaign


@pytest.fixture(scope="module")
def alertmanager(api: Api, node: RealNode, release: str) -> Iterator[Alertmanager]:
    """A real Alertmanager on this host, listening on the host side of the pod bridge (the
    one address pods reach besides each other: they have no default route), named as the
    quickstart's webhook Secret names it: `alertmanager.monitoring.svc`, a headless Service
    whose EndpointSlice points at that address, resolved by the node's CoreDNS
    (RealNode.expose_host_port); nothing leaves the machine."""
    am = Alertmanager(host=GATEWAY)
    host = node.expose_host_port("monitoring", "alertmanager", am.port)
    (secret,) = [d for d in yaml.safe_load_all(QUICKSTART.read_text()) if d and d["kind"] == "Secret"]
    secret["metadata"]["namespace"] = release
    # The quickstart's URL, on the port this Alertmanager got (9093 may be taken here).
    secret["stringData"]["url"] = secret["stringData"]["url"].replace(":9093/", f":{am.port}/")
    assert f"//{host}:{am.port}/" in secret["stringData"]["url"], secret
    api.create("v1/secrets", release, secret)
    yield am
    api.delete("v1/namespaces", None, "monitoring")
    am.stop()


def ready_operator_pods(api: Api, ns: str) -> list[dict[str, Any]]:
    pods = api.all("v1/pods", ns, {"app.kubernetes.io/component": "operator"})
    return [p for p in pods if p["metadata"].get("deletionTimestamp") is None and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])]


@pytest.fixture(scope="module")
def release(control_plane: ControlPlane, node: RealNode, api: Api,
            images: dict[str, dict[str, Any]]) -> Iterator[str]:
    """`helm install` of the chart into a fresh `restricted` namespace; both operator
    replicas Ready. Yields the namespace."""
    ns = "xs-real"
    api.create("v1/namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": ns, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    helm = [str(helm_path()), "--kubeconfig", str(control_plane.kubeconfig_path)]
    # The quickstart's webhook Secret, which the operator may read once named here.
    sets = [*chart_image_values(images), *LIVENESS_FOR_CI, "alerts.extraSecretNames={xla-cpu-webhook}"]
    done = subprocess.run([*helm, "install", RELEASE, str(CHART), "-n", ns,
                           *[a for s in sets for a in ("--set", s)]],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    try:
        wait_for(lambda: len(ready_operator_pods(api, ns)) == 2, 300, "two Ready operator pods")
    except AssertionError as e:
        # What the operator said before it died: an image older than the chart's flags, say.
        logs = kubectl(control_plane, "logs", "-n", ns, "--previous", "--tail=5",
                       "-l", "app.kubernetes.io/component=operator")
        raise AssertionError(f"{e}\noperator pods' last words:\n{logs.stdout}{logs.stderr}") from None
    yield ns
    subprocess.run([*helm, "uninstall", RELEASE, "-n", ns], capture_output=True, timeout=300)
    api.delete("v1/namespaces", None, ns)


def test_operator_runs_as_pods_of_the_chart_from_its_image(api: Api, release: str,
                                                           images: dict[str, dict[str, Any]]
                                                           ) -> None:
    pods = ready_operator_pods(api, release)
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {images["operator"]["ref"]}
    assert {p["spec"]["containers"][0]["imagePullPolicy"] for p in pods} == {"IfNotPresent"}
    for p in pods:
        (status,) = p["status"]["containerStatuses"]
        assert status["imageID"].startswith("sha256:") or "@sha256:" in status["imageID"]
        assert status["restartCount"] == 0, status  # it started, and stayed up


def test_applied_campaign_runs_its_worker_in_the_runner_image_rolls_up_and_alerts(
        control_plane: ControlPlane, api: Api, release: str, alertmanager: Alertmanager,
        images: dict[str, dict[str, Any]]) -> None:
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(small_quickstart(release)))
    assert done.returncode == 0, done.stderr

    def status() -> dict[str, Any]:
        return (api.get(f"{API}/fuzzcampaigns", release, "quickstart") or {}).get("status") or {}

    reports: set[str] = set()

    def completed() -> dict[str, Any] | None:
        reports.update(r["metadata"]["name"] for r in api.all(f"{API}/workerreports", release))
        st = status()
        return st if st.get("phase") == "Completed" else None

    st = wait_for(completed, 900, "campaign quickstart Completed", interval=1)
    assert st["programs"] == 8, st
    (worker,) = api.all("v1/pods", release, {"xlasentinel.dev/role": "worker", CAMPAIGN_LABEL: "quickstart"})
    assert worker["status"]["phase"] == "Succeeded", worker["status"]
    assert worker["spec"]["containers"][0]["image"] == images["runner-cpu"]["ref"]
    sc = worker["spec"]["securityContext"] | worker["spec"]["containers"][0].get("securityContext", {})
    assert sc.get("runAsUser") == UID and sc.get("readOnlyRootFilesystem") is True, sc
    (state,) = [s["state"]["terminated"] for s in worker["status"]["containerStatuses"]]
    assert state["exitCode"] == 0, state
    assert reports, "no WorkerReport was seen while the campaign ran"

    # The injected miscompile's findings: BugSignatures counting all of them, and one alert
    # per signature in the real Alertmanager, posted by the operator pod through the
    # quickstart's webhook Secret (alertmanager.monitoring.svc, resolved by CoreDNS).
    assert st["findingsTotal"] >= 1, st
    sigs = wait_for(lambda: len(s := api.all(f"{API}/bugsignatures", release)) == st["signatures"]
                    and sum(x.get("status", {}).get("count", 0) for x in s) == st["findingsTotal"] and s,
                    120, "BugSignatures counting every finding")
    wanted = {x["spec"]["signature"] for x in sigs}

    def firing() -> list[dict[str, Any]]:
        return [a for a in alertmanager.alerts() if a["labels"].get("namespace") == release]

    alerts = wait_for(lambda: len(f := firing()) == len(wanted) and f, 120,
                      "one alert per signature in Alertmanager")
    assert {a["labels"]["signature"] for a in alerts} == wanted
    assert {a["labels"]["reason"] for a in alerts} == {"new"}
    assert {a["labels"]["team"] for a in alerts} == {"xla-cpu"}


LONG_WORKERS = {"xlasentinel.dev/role": "worker", CAMPAIGN_LABEL: "long"}


def long_status(api: Api, ns: str) -> dict[str, Any]:
    return (api.get(f"{API}/fuzzcampaigns", ns, "long") or {}).get("status") or {}


def running_long_worker(api: Api, ns: str) -> dict[str, Any] | None:
    pods = [p for p in api.all("v1/pods", ns, LONG_WORKERS)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return pods[0] if pods else None


def programs_grow(api: Api, ns: str, past: int, what: str) -> int:
    """Wait until the campaign's rolled-up programs exceed `past`: the worker runs and the
    acting operator rolls its reports up."""
    return wait_for(lambda: (n := long_status(api, ns).get("programs") or 0) > past and n,
                    240, f"campaign long's programs above {past} ({what})")


@pytest.fixture(scope="module")
def long_campaign(control_plane: ControlPlane, api: Api, release: str) -> Iterator[str]:
    """A continuous campaign (one worker that runs until deleted), shared by the fault
    tests below; yields its namespace once its worker reports."""
    campaign = small_quickstart(release)
    campaign["metadata"]["name"] = "long"
    campaign["spec"]["budget"] = {"continuous": True}
    campaign["spec"].pop("injectPasses")  # its work is the point here, not findings
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(campaign))
    assert done.returncode == 0, done.stderr
    wait_for(lambda: running_long_worker(api, release), 300, "a Running worker pod of campaign long")
    wait_for(lambda: long_status(api, release).get("workers", {}).get("reporting") == 1, 300,
             "the worker reporting")
    yield release
    api.delete(f"{API}/fuzzcampaigns", release, "long")


def test_evicted_worker_gets_sigterm_exits_143_and_its_index_resumes(
        api: Api, long_campaign: str) -> None:
    release = long_campaign
    first = running_long_worker(api, release)
    assert first is not None
    name = first["metadata"]["name"]
    code, answer = api.request("POST", f"/api/v1/namespaces/{release}/pods/{name}/eviction",
                               {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": release}})
    assert code == 201, answer

    # kubelet stops the container with SIGTERM to its PID 1 (the worker), which exits 143.
    def terminated() -> dict[str, Any] | None:
        pod = api.get("v1/pods", release, name)
        if pod is None:
            return {"gone": True}
        statuses = pod["status"].get("containerStatuses") or []
        return statuses[0]["state"].get("terminated") if statuses else None

    state = wait_for(terminated, 120, f"evicted worker {name} terminated", interval=0.2)
    assert state.get("exitCode") == 143, state
    second = wait_for(lambda: (p := running_long_worker(api, release))
                      and p["metadata"]["uid"] != first["metadata"]["uid"] and p,
                      300, "a new worker pod for the index")
    assert second["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    (job,) = api.all("batch/v1/jobs", release, LONG_WORKERS)
    assert not job["status"].get("completedIndexes") and not job["status"].get("failed"), job["status"]


def leader(api: Api, ns: str) -> str:
    """The replica that acts: the live peer of highest priority in the KopfPeering object
    (kopf's rule, operator/xla_sentinel_operator/leadership.py)."""
    def find() -> str | None:
        peers = (api.get("kopf.dev/v1/kopfpeerings", ns, "xla-sentinel") or {}).get("status") or {}
        now = datetime.now(UTC)
        live = {k: v for k, v in peers.items() if isinstance(v, dict) and leadership.alive(v, now)}
        return max(live, key=lambda k: int(live[k].get("priority") or 0)) if live else None
    return wait_for(find, 60, "a live peer in the KopfPeering object")


def test_deleted_leader_pod_hands_over_to_the_other_replica_without_a_second_job(
        control_plane: ControlPlane, api: Api, long_campaign: str) -> None:
    release = long_campaign
    before = {p["metadata"]["name"] for p in ready_operator_pods(api, release)}
    victim = leader(api, release)
    assert victim in before, (victim, before)
    (survivor,) = before - {victim}
    jobs = {j["metadata"]["uid"] for j in api.all("batch/v1/jobs", release, LONG_WORKERS)}
    assert len(jobs) == 1, jobs
    programs = long_status(api, release).get("programs") or 0

    code, out = api.request("DELETE", f"/api/v1/namespaces/{release}/pods/{victim}")
    assert code == 200, out
    # The standby takes over (kopf removes a stopping peer from the peering object, so no
    # lease has to run out) and rolls the campaign up: its programs keep growing.
    wait_for(lambda: leader(api, release) == survivor, 120, f"{survivor} leading")

    def says_it_acts() -> bool:  # at its next heartbeat, which reads the peering object
        logs = kubectl(control_plane, "logs", "-n", release, survivor)
        assert logs.returncode == 0, logs.stderr
        turns = [line for line in logs.stdout.splitlines()
                 if '"peering.acting"' in line or '"peering.standby"' in line]
        return bool(turns) and '"peering.acting"' in turns[-1]
    wait_for(says_it_acts, 60, f"{survivor} logging peering.acting", interval=2)
    programs_grow(api, release, programs, "rolled up by the new leader")
    # The Deployment replaces the deleted pod, and the new replica (started later, so of
    # lower priority) stays standby.
    after = wait_for(lambda: len(pods := ready_operator_pods(api, release)) == 2
                     and victim not in {p["metadata"]["name"] for p in pods} and pods,
                     300, "a replacement operator pod Ready")
    assert survivor in {p["metadata"]["name"] for p in after}
    assert leader(api, release) == survivor
    # Neither replica made a second Job for the campaign's one worker index.
    assert {j["metadata"]["uid"] for j in api.all("batch/v1/jobs", release, LONG_WORKERS)} == jobs


def test_wedged_operator_is_restarted_by_the_kubelet_through_the_charts_liveness_probe(
        api: Api, node: RealNode, long_campaign: str) -> None:
    release = long_campaign
    standby = sorted({p["metadata"]["name"] for p in ready_operator_pods(api, release)}
                     - {leader(api, release)})[0]
    pod = api.get("v1/pods", release, standby)
    (status,) = pod["status"]["containerStatuses"]
    # SIGSTOP from the host to the operator process (its container's PID 1): its event loop
    # and /livez stop answering, as a deadlocked process's would; only a restart ends it.
    os.kill(node.container_pid(status["containerID"]), signal.SIGSTOP)

    def restarted() -> dict[str, Any] | None:
        (s,) = api.get("v1/pods", release, standby)["status"]["containerStatuses"]
        return s if s["restartCount"] > status["restartCount"] and s.get("ready") else None

    now = wait_for(restarted, 180, f"operator pod {standby} restarted and Ready again")
    assert now["lastState"]["terminated"]["exitCode"] == 137, now["lastState"]  # SIGKILL
    events = api.all("v1/events", release)
    assert any(e.get("involvedObject", {}).get("name") == standby and e.get("reason") == "Unhealthy"
               and "Liveness probe failed" in e.get("message", "") for e in events), [
        (e.get("reason"), e.get("message")) for e in events]


def test_node_restart_of_kubelet_and_containerd_loses_nothing(api: Api, node: RealNode,
                                                              long_campaign: str) -> None:
    release = long_campaign
    worker = running_long_worker(api, release)
    assert worker is not None
    operators = {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"]
                 for p in ready_operator_pods(api, release)}
    reports = {r["metadata"]["name"] for r in api.all(f"{API}/workerreports", release)}
    programs = programs_grow(api, release, 0, "before the restart")
    jobs = {j["metadata"]["uid"] for j in api.all("batch/v1/jobs", release, LONG_WORKERS)}
    findings = long_status(api, release).get("findingsTotal") or 0

    node.restart()

    # The same worker pod keeps running in the same container, and its reports keep coming.
    programs_grow(api, release, programs, "after the restart")
    again = running_long_worker(api, release)
    assert again is not None and again["metadata"]["uid"] == worker["metadata"]["uid"]
    assert again["status"]["containerStatuses"][0]["restartCount"] == (
        worker["status"]["containerStatuses"][0]["restartCount"])
    assert again["status"]["containerStatuses"][0]["containerID"] == (
        worker["status"]["containerStatuses"][0]["containerID"])
    # Both operator replicas kept their pods and containers; no report, Job or finding lost.
    wait_for(lambda: len(ready_operator_pods(api, release)) == 2, 120, "both operator pods Ready")
    assert {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"]
            for p in ready_operator_pods(api, release)} == operators
    assert reports <= {r["metadata"]["name"] for r in api.all(f"{API}/workerreports", release)}
    assert {j["metadata"]["uid"] for j in api.all("batch/v1/jobs", release, LONG_WORKERS)} == jobs
    assert (long_status(api, release).get("findingsTotal") or 0) >= findings


HUNGRY_WORKERS = {"xlasentinel.dev/role": "worker", CAMPAIGN_LABEL: "hungry"}
# The engine's workers recycle under a share of this limit (worker/memory.py: before they
# did, its programs-and-references worker outgrew it within a minute, ~10 MB/s), so what
# overruns it is one compile: cluster/memory_hog.py, a pass plugin that, from the pod's
# 25th compile on, writes to more memory than the limit.
HUNGRY_LIMIT = "640Mi"
MEMORY_HOG = f"{RUNNER_SITE}/xla_sentinel/cluster/memory_hog.py"


def hungry_findings(api: Api, ns: str) -> tuple[int, int]:
    """(the campaign's findingsTotal, the sum of its hits over the BugSignatures)."""
    st = (api.get(f"{API}/fuzzcampaigns", ns, "hungry") or {}).get("status") or {}
    hits = sum(v for s in api.all(f"{API}/bugsignatures", ns)
               for k, v in (s.get("status", {}).get("hits") or {}).items() if k.startswith("hungry/"))
    return int(st.get("findingsTotal") or 0), hits


def test_worker_over_its_memory_limit_is_oom_killed_its_index_resumes_and_nothing_is_lost_or_doubled(
        control_plane: ControlPlane, api: Api, node: RealNode, release: str) -> None:
    """The kernel's OOM killer, not an eviction: a continuous campaign one of whose compiles
    needs more than its worker's memory limit (HUNGRY_LIMIT, MEMORY_HOG; the engine itself
    stays under it by recycling its workers). The whole container dies, exit
    137, reason OOMKilled: on a cgroup v2 node (GKE) by memory.oom.group, which the kubelet
    sets; on this cgroup v1 node the kernel kills only the engine's largest process, and the
    worker stops itself at that kill (runners/xla_sentinel/cluster/oom.py; before it, the
    engine restarted that process and lost the program in flight, unseen). The Job's index
    runs again in a new pod, which replays the shard from its seeds; the campaign's and the
    BugSignatures' counts neither drop nor double."""
    campaign = small_quickstart(release)
    campaign["metadata"]["name"] = "hungry"
    campaign["spec"]["budget"] = {"continuous": True}
    campaign["spec"]["injectPasses"] = [*campaign["spec"]["injectPasses"], MEMORY_HOG]
    campaign["spec"]["resources"] = {"requests": {"cpu": "100m", "memory": "256Mi"},
                                     "limits": {"memory": HUNGRY_LIMIT}}
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(campaign))
    assert done.returncode == 0, done.stderr
    try:
        oom_killed_and_resumed(api, node, release)
    finally:
        api.delete(f"{API}/fuzzcampaigns", release, "hungry")


def oom_killed_and_resumed(api: Api, node: RealNode, release: str) -> None:
    def running() -> dict[str, Any] | None:
        pods = [p for p in api.all("v1/pods", release, HUNGRY_WORKERS)
                if p["status"].get("phase") == "Running" and p["status"].get("containerStatuses")
                and p["status"]["containerStatuses"][0].get("containerID")]
        return pods[0] if pods else None

    first = wait_for(running, 300, "a Running worker pod of campaign hungry")
    container = first["status"]["containerStatuses"][0]["containerID"]

    def oom() -> dict[str, Any] | None:
        """The first pod's terminated state, or the OOM kills in its still running container."""
        pod = api.get("v1/pods", release, first["metadata"]["name"]) or {}
        statuses = pod.get("status", {}).get("containerStatuses") or []
        state = statuses[0]["state"].get("terminated") if statuses else None
        if state or not statuses:
            return state or {"gone": True}
        try:
            kills = node.oom_kills(container)
        except ControlPlaneError:  # the task ended between the two reads
            return None
        return {"oom_kills": kills} if kills else None

    seen = wait_for(oom, 300, f"the kernel OOM-killing in worker {first['metadata']['name']}", interval=0.5)
    if "oom_kills" in seen:  # seen in the cgroup before the container ended (if it does)
        seen = wait_for(lambda: (s := oom()) and "oom_kills" not in s and s, 60,
                        f"worker {first['metadata']['name']}, {seen['oom_kills']} of whose "
                        "processes the kernel OOM-killed, ending")
    assert seen.get("exitCode") == 137 and seen.get("reason") == "OOMKilled", seen
    # What the killed pod had reported, once rolled up into the status and the BugSignatures
    # (the replacement's replay cannot raise it before it passes the same point: reports
    # merge by maximum).
    findings_at_kill, _ = wait_for(lambda: (f := hungry_findings(api, release))[0] == f[1] and f,
                                   120, "the killed pod's findings rolled up")

    second = wait_for(lambda: (p := running()) and p["metadata"]["uid"] != first["metadata"]["uid"] and p,
                      300, "a new worker pod for the index")
    assert second["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    # The new pod replays the shard from its first program, re-finding what the first found:
    # once it has run as long as the first did, the counts are back where they were (a
    # finding lost would leave them lower; counted twice, about double).
    lived = (datetime.fromisoformat(seen["finishedAt"].replace("Z", "+00:00"))
             - datetime.fromisoformat(seen["startedAt"].replace("Z", "+00:00"))).total_seconds()
    time.sleep(lived)
    assert findings_at_kill > 0, "the first pod found nothing before it was killed"
    findings, hits = wait_for(lambda: (f := hungry_findings(api, release))[0] == f[1] and f, 120,
                              "BugSignature hits counting every finding of the campaign")
    assert findings_at_kill <= findings < 2 * findings_at_kill, (findings_at_kill, findings)
