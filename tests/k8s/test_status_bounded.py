"""The status of a 10,000-worker campaign over 3 revisions, as the operator writes it (its
roll-up and its status patch, as the chart's operator ServiceAccount), fits the real API
server and etcd (1.5 MiB a request by default) and keeps every field (the CRD's schema
prunes what it does not declare). Reports in memory: 30,000 WorkerReport objects would
only slow the test, the write is the same."""

from __future__ import annotations

import json

from xla_sentinel_operator.campaigns import roll_up_and_write
from xla_sentinel_operator.config import Config, JobsConfig, MetricsConfig
from xla_sentinel_operator.kube import Kube, connection_from_kubeconfig
from xla_sentinel_operator.runtime import Runtime

from .conftest import API, WORKER_SA, campaign, create
from .test_status_bounded_pure import ETCD_REQUEST_LIMIT, SPEC, big_reports


async def test_the_status_of_ten_thousand_workers_fits_the_api_server(
        api, ns, client, operator_kubeconfig):
    spec = {"workers": SPEC.workers, "budget": {"continuous": True}, "suspend": True,
            "targets": [{"name": t.name, **({"image": t.image} if t.image else {})}
                        for t in SPEC.targets]}
    body = await create(client, campaign(ns, **spec))
    rt = Runtime(Config(namespaces=[ns], metrics=MetricsConfig(port=None),
                        jobs=JobsConfig(runner_image="runner:test", service_account=WORKER_SA)))
    rt.kube = Kube(connection_from_kubeconfig(operator_kubeconfig))
    try:
        await roll_up_and_write(rt, body, [], big_reports())
    finally:
        await rt.kube.close()

    stored = api.get(f"{API}/fuzzcampaigns", ns, "nightly")
    assert len(json.dumps(stored)) < ETCD_REQUEST_LIMIT // 10
    st = stored["status"]
    assert st["workers"]["desired"] == 10_000 and st["workerStats"]["reports"] == 30_000
    assert st["storageErrorsTotal"] == st["reportErrorsTotal"] == 10_000
    assert len(st["workerSummary"]) == 50 and len(st["storageErrors"]) == 10
    assert {c["type"] for c in st["conditions"]} >= {"Ready", "Reconciling", "Stalled", "StorageAvailable"}
    assert api.all("v1/pods", ns) == []  # suspended: no pod of the 10,000
