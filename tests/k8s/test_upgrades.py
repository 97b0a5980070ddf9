"""Operator upgrades against the real control plane (the operator in this process, so an
"upgrade" is the same operator restarted with a module changed): one that adds a defaulted
spec field recreates no worker Job; one that renders the worker pods differently replaces
the running Job under the same name (the real Job controller, the real API server)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from xla_sentinel.spec.campaign import CampaignSpec
from xla_sentinel_operator import desired, runtime

from .conftest import campaign, create, eventually
from .test_lifecycle import jobs, status


def with_new_default(parse):  # type: ignore[no-untyped-def]
    """parse_spec of a newer release whose CampaignSpec has one more field, defaulted."""
    newer = dataclasses.make_dataclass(
        "CampaignSpec", [("retryPolicy", str, dataclasses.field(default="auto"))],
        bases=(CampaignSpec,), frozen=True)

    def parse_spec(data, path="spec"):  # type: ignore[no-untyped-def]
        spec = parse(data, path)
        return newer(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})
    return parse_spec


async def test_an_upgrade_that_adds_a_defaulted_field_recreates_no_job(
        api, ns, client, start_operator, monkeypatch: pytest.MonkeyPatch) -> None:
    op = await start_operator()
    await create(client, campaign(ns, workers=2))
    (job,) = await eventually(lambda: jobs(api, ns))
    await eventually(lambda: status(api, ns).get("revision"))
    await op.stop()

    monkeypatch.setattr(runtime, "parse_spec", with_new_default(runtime.parse_spec))
    await start_operator()
    rev = status(api, ns)["revision"]
    await asyncio.sleep(3)  # ten roll-ups of the upgraded operator
    (after,) = jobs(api, ns)
    assert after["metadata"]["uid"] == job["metadata"]["uid"]
    assert status(api, ns)["revision"] == rev


async def test_a_changed_rendering_replaces_the_running_job_under_its_name(
        api, ns, client, start_operator, monkeypatch: pytest.MonkeyPatch) -> None:
    await start_operator()
    await create(client, campaign(ns, workers=2))
    (job,) = await eventually(lambda: jobs(api, ns))
    before = job["metadata"]["annotations"][desired.TEMPLATE_ANNOTATION]
    # The upgraded operator drops one more capability from the runner container.
    monkeypatch.setattr(desired, "CONTAINER_SECURITY", {
        **desired.CONTAINER_SECURITY, "capabilities": {"drop": ["ALL", "NET_RAW"]}})

    def replaced() -> dict | None:
        found = jobs(api, ns)
        return next((j for j in found if j["metadata"]["uid"] != job["metadata"]["uid"]), None)

    new = await eventually(replaced)
    assert new["metadata"]["name"] == job["metadata"]["name"]
    assert new["metadata"]["annotations"][desired.TEMPLATE_ANNOTATION] != before
    container = new["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL", "NET_RAW"]
    # Rolled out once: the replacement is left alone.
    await asyncio.sleep(2)
    assert [j["metadata"]["uid"] for j in jobs(api, ns)] == [new["metadata"]["uid"]]
