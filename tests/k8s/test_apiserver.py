"""The extensions to kmock that the operator tests rely on behave like an API server."""

from __future__ import annotations

import pytest
from xla_sentinel_operator.kube import ApiError, path

from .apiserver import parse_selector, selected
from .conftest import API, NS, campaign

CM = path("v1", "configmaps", NS)


async def test_list_filters_by_label_selector_and_names_its_kind(client):
    for name, labels in (("a", {"app": "x", "tier": "web"}), ("b", {"app": "x"}), ("c", {"app": "y"})):
        await client.create(CM, {"metadata": {"name": name, "labels": labels}})
    listed = await client.request("GET", CM, params={"labelSelector": "app=x,tier!=web"})
    assert listed["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["b"]
    assert [i["metadata"]["name"] for i in await client.list(CM, {"app": "y"})] == ["c"]


def test_selector_grammar():
    labels = {"a": "1", "b": "2"}
    assert selected(labels, parse_selector("a in (1, 3),!c,b"))
    assert not selected(labels, parse_selector("b notin (2)"))
    with pytest.raises(Exception, match="unable to parse"):
        parse_selector("a=(")


async def test_generation_moves_with_spec_only_and_status_is_a_subresource(client):
    fc_path = path(API, "fuzzcampaigns", NS)
    created, _ = await client.create(fc_path, campaign(workers=1))
    url = f"{fc_path}/nightly"
    after_status = await client.patch(f"{url}/status", {"status": {"phase": "Running"}, "spec": {"workers": 9}})
    assert after_status["metadata"]["generation"] == 1 and after_status["spec"]["workers"] == 1
    after_spec = await client.patch(url, {"spec": {"workers": 2}, "status": {"phase": "Stalled"}})
    assert after_spec["metadata"]["generation"] == 2 and after_spec["status"]["phase"] == "Running"
    assert int(after_spec["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_stale_resource_version_is_a_conflict(client):
    created, _ = await client.create(CM, {"metadata": {"name": "a"}, "data": {"k": "1"}})
    await client.patch(f"{CM}/a", {"data": {"k": "2"}})
    with pytest.raises(ApiError) as err:
        await client.patch(f"{CM}/a", {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                                       "data": {"k": "3"}})
    assert err.value.status == 409


async def test_deleting_an_owner_collects_what_it_owns(client, api):
    owner, _ = await client.create(CM, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    await client.create(CM, {"metadata": {"name": "child", "ownerReferences": [ref]}})
    await client.create(CM, {"metadata": {"name": "stranger"}})
    await client.delete(f"{CM}/owner")
    assert [c["metadata"]["name"] for c in api.all("v1/configmaps", NS)] == ["stranger"]


async def test_finalizers_hold_deletion_until_removed(client, api):
    await client.create(CM, {"metadata": {"name": "held", "finalizers": ["x/y"]}})
    await client.delete(f"{CM}/held")
    assert api.get("v1/configmaps", NS, "held")["metadata"]["deletionTimestamp"]
    await client.patch(f"{CM}/held", {"metadata": {"finalizers": None}})
    assert api.get("v1/configmaps", NS, "held") is None
