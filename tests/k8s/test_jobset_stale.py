"""A 2-host CPU campaign whose spec goes to 1 host, run by the real kopf operator on the
real control plane with JobSet's real controller (tests/controlplane/jobset.py): the
campaign's JobSet of the old revision is deleted and its one Indexed Job made, where it
used to keep running until the campaign was deleted (the roll-up lists no JobSet for a
campaign that runs none; reconcile lists them all, test_jobset_stale_pure.py).

No kubelet or scheduler is needed: nothing here waits on a pod."""

from __future__ import annotations

import pytest
from controlplane.jobset import built

from .conftest import campaign, create, eventually
from .test_jobset import JOBSETS
from .test_jobset_operator import worker_jobsets
from .test_lifecycle import fc_path, jobs

pytestmark = pytest.mark.skipif(not built(), reason="JobSet not built: run `make control-plane`")


async def test_hosts_2_to_1_deletes_the_campaigns_jobset(api, ns, client, start_operator, jobset):
    await start_operator()
    await create(
        client,
        campaign(
            ns,
            workers=1,
            accelerator={"type": "cpu", "hosts": 2},
            generator={"devices": 4},
            budget={"programs": 1000},
        ),
    )
    (js,) = await eventually(lambda: worker_jobsets(api, ns), timeout=60)
    name = js["metadata"]["name"]
    assert jobs(api, ns) == []  # JobSet's own Job carries no worker role

    await client.patch(fc_path(ns), {"spec": {"accelerator": {"hosts": 1}}})
    (job,) = await eventually(lambda: jobs(api, ns), timeout=60)
    assert job["spec"]["completions"] == 1
    await eventually(
        lambda: api.get(JOBSETS, ns, name) is None and worker_jobsets(api, ns) == [], timeout=60
    )
