"""A campaign whose spec no longer runs JobSets (accelerator.hosts 2 -> 1, a TPU slice ->
CPU) keeps none of its older revision's: reconcile lists every worker JobSet the campaign
owns, whatever its spec says now (campaigns.slice_jobsets(retired=True)), and
desired.plan_workers deletes those no rendering of the current spec wants. Pure: the
JobSets are the operator's renderings as the API returns them (an owner's uid, a status);
test_jobset_stale.py runs the same on the real control plane with the operator."""

from __future__ import annotations

from typing import Any

from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, jobsets

from .test_jobset_pure import jobset_status


def camp(accelerator: dict[str, Any], uid: str = "u-1") -> desired.Campaign:
    return desired.Campaign(
        name="mh",
        namespace="fuzz",
        uid=uid,
        spec=parse_spec({"workers": 2, "accelerator": accelerator, "generator": {"devices": 4}}),
    )


def stored(js: dict[str, Any], owner: str = "u-1") -> dict[str, Any]:
    """`js` as the API holds it: created by the operator for the campaign of uid `owner`."""
    back = jobset_status(js, active=2, uid=f"js-{js['metadata']['name']}")
    back["metadata"]["ownerReferences"] = [{**js["metadata"]["ownerReferences"][0], "uid": owner}]
    return back


def names(items: list[Any]) -> list[str]:
    return sorted(j["metadata"]["name"] for j in items)


def test_hosts_2_to_1_deletes_the_older_revisions_jobsets_and_creates_the_job() -> None:
    before = camp({"type": "cpu", "hosts": 2})
    running = [stored(js) for js in desired.worker_jobs(before, default_image="img")]
    assert len(running) == 2 and desired.runs_jobsets(before.spec)

    after = camp({"type": "cpu", "hosts": 1})
    # The roll-up lists no JobSet for a campaign that runs none: only reconcile finds them.
    assert not desired.runs_jobsets(after.spec)
    want = desired.worker_jobs(after, default_image="img")
    assert [j["kind"] for j in want] == ["Job"]
    have = [jobsets.as_worker_job(js) for js in desired.owned_jobsets(after, running)]
    plan = desired.plan_workers(after, want, have, completed=False)
    assert plan.delete == names(running)
    assert names(plan.create) == names(want)
    assert not plan.suspend and not plan.replace and not plan.adopt


def test_a_tpu_slice_campaign_moved_to_cpu_deletes_its_slices() -> None:
    v6e = camp({"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "4x4", "count": 4})
    running = [stored(js) for js in desired.worker_jobs(v6e, default_image="img")]
    cpu = camp({"type": "cpu"})
    want = desired.worker_jobs(cpu, default_image="img")
    have = [jobsets.as_worker_job(js) for js in desired.owned_jobsets(cpu, running)]
    assert desired.plan_workers(cpu, want, have, completed=False).delete == names(running)


def test_a_campaign_deletes_only_jobsets_it_owns() -> None:
    """A JobSet of an earlier campaign of the same name (its uid another, the garbage
    collector's to remove) carries the same labels: it is neither counted nor deleted."""
    c = camp({"type": "cpu", "hosts": 2})
    mine = [stored(js) for js in desired.worker_jobs(c, default_image="img")]
    earlier = {
        **mine[0],
        "metadata": {
            **mine[0]["metadata"],
            "name": "mh-main-old-s0",
            "ownerReferences": [{"uid": "u-0"}],
        },
    }
    unowned = {
        **mine[1],
        "metadata": {**mine[1]["metadata"], "name": "mh-main-bare-s1", "ownerReferences": []},
    }
    assert names(desired.owned_jobsets(c, [*mine, earlier, unowned])) == names(mine)
    assert desired.owned_jobsets(camp({"type": "cpu", "hosts": 2}, uid="u-2"), mine) == []


def test_a_revision_with_the_same_hosts_replaces_its_jobsets_as_before() -> None:
    """hosts 2 -> 4 (a new revision and a new shape): the roll-up lists them as it did."""
    two = camp({"type": "cpu", "hosts": 2})
    running = [stored(js) for js in desired.worker_jobs(two, default_image="img")]
    four = camp({"type": "cpu", "hosts": 4})
    assert desired.runs_jobsets(four.spec)
    want = desired.worker_jobs(four, default_image="img")
    have = [jobsets.as_worker_job(js) for js in desired.owned_jobsets(four, running)]
    plan = desired.plan_workers(four, want, have, completed=False)
    assert plan.delete == names(running) and names(plan.create) == names(want)
    assert set(plan.delete).isdisjoint(names(want))
