"""Read-modify-write updates carry the resourceVersion they were computed from and are
redone after a 409; watches select reports and worker Jobs on the server. A fake API in
memory, no HTTP."""

from __future__ import annotations

import copy
from typing import Any

import kopf
from kopf._cogs.structs.references import Resource
from xla_sentinel.cluster.report import SignatureEntry
from xla_sentinel.cluster.reporter import K8sReporter
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, handlers, ingest, signatures
from xla_sentinel_operator.config import Config, MetricsConfig
from xla_sentinel_operator.kube import ApiError
from xla_sentinel_operator.runtime import CONFLICT_ATTEMPTS, Runtime

NAME = "sig-00000000000000aa"


class FakeApi:
    """One BugSignature; `conflicts` patches are refused with 409 after someone else's
    write (another worker's hit) lands in between, as a real API server would."""

    def __init__(self, conflicts: int) -> None:
        self.sig = {"metadata": {"name": NAME, "namespace": "fuzz", "resourceVersion": "1"},
                    "spec": {"signature": "00000000000000aa", "verdict": "crash", "state": "triaged"},
                    "status": {"hits": {"other/main-0": 4}, "count": 4, "alertKey": "new"}}
        self.conflicts = conflicts
        self.patches: list[dict[str, Any]] = []

    # As Kube's: `shape` is the body type the caller reads the object as (bodies.py).
    async def get(self, url: str, shape: object = None) -> dict[str, Any] | None:
        return copy.deepcopy(self.sig) if url.endswith(NAME) else None

    async def create(self, url: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        raise AssertionError("the signature exists")

    async def request(self, method: str, url: str, body: Any = None, **_: Any) -> dict[str, Any]:
        assert (method, url.rsplit("/", 1)[-1]) == ("POST", "events")  # Events only
        return {}

    async def patch(self, url: str, body: dict[str, Any], shape: object = None) -> dict[str, Any]:

        self.patches.append(body)
        if "bugsignatures" not in url:
            return {}
        rv = body.get("metadata", {}).get("resourceVersion")
        if self.conflicts:
            self.conflicts -= 1
            self.sig["status"]["hits"]["other/main-1"] = 2  # the write that won the race
            self.sig["status"]["count"] = 6
            self.sig["metadata"]["resourceVersion"] = str(int(self.sig["metadata"]["resourceVersion"]) + 1)
        if rv is not None and rv != self.sig["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified")
        for part in ("spec", "status"):
            self.sig[part].update(body.get(part) or {})
        self.sig["metadata"]["resourceVersion"] = str(int(self.sig["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.sig)


def runtime(api: FakeApi) -> Runtime:
    rt = Runtime(Config(metrics=MetricsConfig(port=None)))
    rt.kube = api  # type: ignore[assignment]
    return rt


CAMPAIGN = desired.Campaign(name="nightly", namespace="fuzz", uid="u",
                            spec=parse_spec({"bisect": {"enabled": False}}))


async def test_a_conflicting_count_update_is_redone_from_a_fresh_read():
    api = FakeApi(conflicts=1)
    await ingest.ingest_signature(runtime(api), CAMPAIGN, "main-0", "00000000000000aa",
                                  SignatureEntry(verdict="crash", count=3), {})
    status_patches = [p for p in api.patches if "hits" in (p.get("status") or {})]
    assert len(status_patches) == 2 and all(p["metadata"]["resourceVersion"] for p in status_patches)
    assert api.sig["status"]["hits"] == {"other/main-0": 4, "other/main-1": 2, "nightly/main-0": 3}
    assert api.sig["status"]["count"] == 9  # the other writer's hit survived


async def test_a_regression_is_recorded_in_status_and_the_spec_is_left_to_people():
    from xla_sentinel_operator.bodies import sig_spec

    api = FakeApi(conflicts=0)
    api.sig["metadata"]["generation"] = 3
    api.sig["spec"].update({"state": "fixed", "fixedIn": "0.10.3"})
    api.sig["status"]["fixedAt"] = "2026-12-01T00:00:00Z"
    await ingest.ingest_signature(runtime(api), CAMPAIGN, "main-0", "00000000000000aa",
                                  SignatureEntry(verdict="crash", count=1), {"jaxlib": "0.10.3"})
    # Not one write to the spec (a GitOps tool that keeps signatures in Git owns it).
    assert not [p for p in api.patches if "spec" in p]
    status = api.sig["status"]
    assert (status["state"], status["regressedGeneration"], status["regressions"]) == ("regressed", 3, 1)
    assert status["fixedAt"] is None and status["alertKey"] == "regressed-1"
    assert api.sig["spec"]["state"] == "fixed"
    assert sig_spec(api.sig)["state"] == "regressed"  # what the operator acts on
    # Counted once: the next hit is not a second regression.
    await ingest.ingest_signature(runtime(api), CAMPAIGN, "main-0", "00000000000000aa",
                                  SignatureEntry(verdict="crash", count=2), {"jaxlib": "0.10.3"})
    assert api.sig["status"]["regressions"] == 1
    # People edit the spec (a new fixedIn): their word holds again.
    api.sig["metadata"]["generation"] = 4
    api.sig["spec"]["fixedIn"] = "0.10.5"
    assert sig_spec(api.sig)["state"] == "fixed"


async def test_conflicts_that_never_end_are_raised_for_kopf_to_retry():
    api = FakeApi(conflicts=CONFLICT_ATTEMPTS)
    try:
        await ingest.ingest_signature(runtime(api), CAMPAIGN, "main-0", "00000000000000aa",
                                      SignatureEntry(verdict="crash", count=3), {})
    except ApiError as e:
        assert e.status == 409
    else:
        raise AssertionError("an endless conflict must not pass silently")


def test_guarded_patch_names_the_version_it_read():
    sig = {"metadata": {"resourceVersion": "42"}}
    assert signatures.guarded(sig, {"status": {"count": 1}}) == {
        "status": {"count": 1}, "metadata": {"resourceVersion": "42"}}


def test_a_regression_whose_status_write_lost_a_race_is_still_recorded():
    assert signatures.regressed({"state": "regressed"}, {"fixedAt": "2026-12-01T00:00:00Z"}, None)
    assert not signatures.regressed({"state": "regressed"}, {"fixedAt": None}, None)


def _matches(selector: str, labels: dict[str, str]) -> bool:
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    return True


def test_watches_select_worker_jobs_on_the_server_and_reports_are_their_own_kind():
    settings = kopf.OperatorSettings()
    for resource, selector in handlers.WATCH_SELECTORS.items():
        settings.watching.label_selectors[resource] = selector
    jobs = Resource(group="batch", version="v1", plural="jobs")
    (job_selector,) = settings.watching.label_selectors.collect(jobs)
    c = desired.Campaign(name="nightly", namespace="fuzz", uid="u", spec=parse_spec({}))
    (worker,) = desired.worker_jobs(c, default_image="img")
    bisector = desired.bisector_job(c, {"id": "f1", "signature": "0" * 16}, "main-0", default_image="img")
    assert _matches(job_selector, worker["metadata"]["labels"])
    assert not _matches(job_selector, bisector["metadata"]["labels"])
    assert not _matches(job_selector, {"app": "someone-elses-job"})
    # Pods: only worker pods stream (their disruptions are counted), never the cluster's.
    pods = Resource(group="", version="v1", plural="pods")
    (pod_selector,) = settings.watching.label_selectors.collect(pods)
    assert _matches(pod_selector, worker["spec"]["template"]["metadata"]["labels"])
    assert not _matches(pod_selector, {"app": "web"})
    # No ConfigMap is watched at all: reports are WorkerReport objects.
    configmaps = Resource(group="", version="v1", plural="configmaps")
    assert settings.watching.label_selectors.collect(configmaps) == []
    report = K8sReporter(None, namespace="fuzz", campaign="nightly", campaign_uid="u", worker="main-0")
    assert report._object()["kind"] == "WorkerReport"
