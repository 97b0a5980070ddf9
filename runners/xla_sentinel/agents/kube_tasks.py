"""The task queue of a campaign's agent swarm in a cluster: each task is a
coordination.k8s.io/v1 Lease, so agent pods on any node take from one queue and two agents
never take the same task.

The interface is `tasks.TaskQueue`'s (put, lease, finish, release, tasks); only the store
differs. `refuse` also records a task that cannot be done (a malformed failure report),
settled as "refused" with the error as its result. A task's Lease is named from the campaign and the task key (`lease_name`), so
seeding is idempotent across pods: `put` is a create, and 409 means the task is queued
already. Taking one is an update of the Lease read as free (no holder, or a lease that ran
out) carrying the resourceVersion it was read at: the API server applies one of two racing
updates and answers the other 409, which moves on to the next task (optimistic
concurrency, the way kube's own leader election takes a Lease). Finishing or giving a task
back is refused unless `spec.holderIdentity` is the caller; the result is an annotation.

What a task says lives in annotations (key, payload, state, result, spent), its role and
campaign in labels (a list by selector finds one role's tasks). Its attempts are the
Lease's own `leaseTransitions`: one taken `max_attempts` times and free again (given back,
or its holder died) is dropped, as in tasks.py. No jax, no SQLite here.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from typing import Any

from xla_sentinel.agents.lease_keys import (
    KEY_ANNOTATION,
    PAYLOAD_ANNOTATION,
    RESULT_ANNOTATION,
    ROLE_LABEL,
    SPENT_ANNOTATION,
    STATE_ANNOTATION,
    TASK_LABEL,
)
from xla_sentinel.agents.spend import Spend
from xla_sentinel.agents.tasks import MAX_ATTEMPTS, QueueError, Task, dropped_result, failed_result
from xla_sentinel.cluster.report import CAMPAIGN_LABEL, dns_name, label_value
from xla_sentinel.spec.campaign import AGENT_ROLES as ROLES

LEASE_GROUP, LEASE_VERSION, LEASE_PLURAL = "coordination.k8s.io", "v1", "leases"
# An annotation value counts against the object's 256 KiB of annotations: results are cut.
RESULT_CHARS = 16 * 1024
CONFLICTS = 5  # re-reads of one Lease after a 409 before finish/release give up


def lease_name(campaign: str, key: str) -> str:
    """The Lease of task `key`: the same in every pod, so a task is queued once."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return dns_name(campaign, "task", digest, limit=253)


def _micro_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    text = text.replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _data(obj: Any) -> dict[str, Any]:
    """A Lease as plain JSON (the client answers objects when not asked for raw data)."""
    if isinstance(obj, dict):
        return obj
    data: dict[str, Any] = json.loads(json.dumps(obj.to_dict(), default=str))
    return data


class KubeTaskQueue:
    """`tasks.TaskQueue` over Leases in `namespace`, for the agents of `campaign`.

    `api` is a kubernetes.client.CustomObjectsApi (Leases are reached through its generic
    calls, which answer plain JSON with the API's own field names)."""

    def __init__(self, api: Any, namespace: str, campaign: str, campaign_uid: str = "",
                 clock: Any = time.time, max_attempts: int = MAX_ATTEMPTS) -> None:
        if max_attempts < 1:
            raise QueueError(f"max_attempts: {max_attempts}; at least 1")
        self.max_attempts = max_attempts
        self.api = api
        self.namespace = namespace
        self.campaign = campaign
        self.campaign_uid = campaign_uid
        self.clock = clock

    def close(self) -> None:
        """Nothing to close: the API client is the caller's."""

    # --- the queue --------------------------------------------------------------------

    def put(self, role: str, key: str, payload: dict[str, Any]) -> bool:
        """Queue a task unless its Lease exists (a gap or a signature is queued once)."""
        return self._create(role, key, payload, "open", None)

    def refuse(self, role: str, key: str, payload: dict[str, Any], error: str) -> bool:
        """Record a task that cannot be worked on (a malformed failure report) as settled
        with `error` as its result: listed with the others, never leased."""
        return self._create(role, key, payload, "refused", {"error": error})

    def _create(self, role: str, key: str, payload: dict[str, Any], state: str,
                result: dict[str, Any] | None) -> bool:
        from kubernetes.client.exceptions import ApiException

        if role not in ROLES:
            raise QueueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
        owner = [{"apiVersion": "xlasentinel.dev/v1alpha1", "kind": "FuzzCampaign",
                  "name": self.campaign, "uid": self.campaign_uid,
                  "blockOwnerDeletion": False, "controller": False}] if self.campaign_uid else []
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": lease_name(self.campaign, key), "namespace": self.namespace,
                             "labels": {CAMPAIGN_LABEL: label_value(self.campaign),
                                        TASK_LABEL: "true", ROLE_LABEL: role},
                             "annotations": {KEY_ANNOTATION: key, STATE_ANNOTATION: state,
                                             PAYLOAD_ANNOTATION: json.dumps(payload, sort_keys=True),
                                             **({RESULT_ANNOTATION: json.dumps(result)[:RESULT_CHARS]}
                                                if result is not None else {})},
                             # Removed with the campaign by the garbage collector.
                             "ownerReferences": owner},
                "spec": {"leaseTransitions": 0}}
        try:
            self.api.create_namespaced_custom_object(LEASE_GROUP, LEASE_VERSION, self.namespace,
                                                     LEASE_PLURAL, body)
        except ApiException as e:
            if e.status == 409:
                return False
            raise
        return True

    def _list(self, role: str | None) -> list[dict[str, Any]]:
        selector = f"{CAMPAIGN_LABEL}={label_value(self.campaign)},{TASK_LABEL}=true"
        if role:
            selector += f",{ROLE_LABEL}={role}"
        got = self.api.list_namespaced_custom_object(LEASE_GROUP, LEASE_VERSION, self.namespace,
                                                     LEASE_PLURAL, label_selector=selector)
        items = [_data(i) for i in _data(got).get("items") or []]
        # Oldest first, as the SQLite queue hands them out; the name breaks ties alike in
        # every pod (creation times have whole seconds).
        return sorted(items, key=lambda o: (o["metadata"].get("creationTimestamp") or "",
                                            o["metadata"]["name"]))

    def _free(self, lease: dict[str, Any], now: float) -> bool:
        state = (lease["metadata"].get("annotations") or {}).get(STATE_ANNOTATION)
        spec = lease.get("spec") or {}
        if state == "open" and not spec.get("holderIdentity"):
            return True
        if state != "leased":
            return False
        renewed = _parse_time(spec.get("renewTime")) or 0.0
        return renewed + float(spec.get("leaseDurationSeconds") or 0) < now  # its holder died

    def lease(self, role: str, agent: str, seconds: float) -> Task | None:
        """The oldest free task of `role`, now held by `agent` for `seconds`; None when none."""
        from kubernetes.client.exceptions import ApiException

        for lease in self._list(role):
            now = self.clock()
            if not self._free(lease, now):
                continue
            meta, spec = lease["metadata"], dict(lease.get("spec") or {})
            attempts = int(spec.get("leaseTransitions") or 0)
            if attempts >= self.max_attempts:
                self._drop(lease, attempts)
                continue
            spec.update(holderIdentity=agent, leaseDurationSeconds=max(1, int(seconds)),
                        acquireTime=_micro_time(now), renewTime=_micro_time(now),
                        leaseTransitions=int(spec.get("leaseTransitions") or 0) + 1)
            annotations = {**meta["annotations"], STATE_ANNOTATION: "leased"}
            # A replace carrying the resourceVersion this read saw: if anyone wrote the Lease
            # since (another agent took it), the API server answers 409 and nothing changes.
            body = {**lease, "metadata": {**meta, "annotations": annotations}, "spec": spec}
            try:
                self.api.replace_namespaced_custom_object(LEASE_GROUP, LEASE_VERSION, self.namespace,
                                                          LEASE_PLURAL, meta["name"], body)
            except ApiException as e:
                if e.status in (404, 409):  # taken (or removed) in between: the next one
                    continue
                raise
            return self._task(body, holder=agent, until=now + seconds)
        return None

    def _drop(self, lease: dict[str, Any], attempts: int) -> None:
        """Settle a free task taken `attempts` times as dropped (a 409: someone else did
        something with it first, which is as good)."""
        from kubernetes.client.exceptions import ApiException

        meta, spec = lease["metadata"], dict(lease.get("spec") or {})
        ann = dict(meta.get("annotations") or {})
        previous = json.loads(ann[RESULT_ANNOTATION]) if ann.get(RESULT_ANNOTATION) else None
        ann[STATE_ANNOTATION] = "dropped"
        ann[RESULT_ANNOTATION] = json.dumps(dropped_result(attempts, previous))[:RESULT_CHARS]
        _free(spec)
        try:
            self.api.replace_namespaced_custom_object(
                LEASE_GROUP, LEASE_VERSION, self.namespace, LEASE_PLURAL, meta["name"],
                {**lease, "metadata": {**meta, "annotations": ann}, "spec": spec})
        except ApiException as e:
            if e.status not in (404, 409):
                raise

    def _task(self, lease: dict[str, Any], holder: str | None = None,
              until: float | None = None) -> Task:
        ann = lease["metadata"].get("annotations") or {}
        return Task(lease["metadata"]["name"], lease["metadata"]["labels"][ROLE_LABEL],
                    ann[KEY_ANNOTATION], json.loads(ann.get(PAYLOAD_ANNOTATION) or "{}"), holder, until)

    def _settle(self, task: Task, agent: str, state: str, result: dict[str, Any] | None,
                spent: Spend | None = None, reason: str | None = None) -> bool:
        """Write `state` (and `result`; a failed attempt's `reason` added to the earlier
        ones) on a task `agent` holds, with what the attempt `spent` added to the task's;
        False when it does not hold it."""
        from kubernetes.client.exceptions import ApiException

        for _ in range(CONFLICTS):
            try:
                lease = _data(self.api.get_namespaced_custom_object(
                    LEASE_GROUP, LEASE_VERSION, self.namespace, LEASE_PLURAL, str(task.id)))
            except ApiException as e:
                if e.status == 404:
                    return False
                raise
            meta, spec = lease["metadata"], dict(lease.get("spec") or {})
            ann = dict(meta.get("annotations") or {})
            if spec.get("holderIdentity") != agent or ann.get(STATE_ANNOTATION) != "leased":
                return False
            ann[STATE_ANNOTATION] = state
            if reason is not None:
                previous = json.loads(ann[RESULT_ANNOTATION]) if ann.get(RESULT_ANNOTATION) else None
                result = failed_result(previous, reason)
            if spent is not None and spent != Spend():
                before = Spend.from_json(json.loads(ann.get(SPENT_ANNOTATION) or "null"))
                ann[SPENT_ANNOTATION] = json.dumps((before + spent).to_json())
            if result is not None:
                ann[RESULT_ANNOTATION] = json.dumps(result, default=str)[:RESULT_CHARS]
            if state == "open":  # given back: free for the next agent at once
                _free(spec)
            try:
                self.api.replace_namespaced_custom_object(
                    LEASE_GROUP, LEASE_VERSION, self.namespace, LEASE_PLURAL, meta["name"],
                    {**lease, "metadata": {**meta, "annotations": ann}, "spec": spec})
                return True
            except ApiException as e:
                if e.status != 409:
                    raise
        return False

    def finish(self, task: Task, agent: str, result: dict[str, Any], spent: Spend | None = None) -> None:
        """Mark a held task done with what came of it; QueueError unless `agent` holds it."""
        if not self._settle(task, agent, "done", result, spent):
            raise QueueError(f"task {task.id} ({task.key}) is not held by {agent}")

    def release(self, task: Task, agent: str, reason: str = "", spent: Spend | None = None) -> None:
        """Give a held task back unfinished (a budget stopped the agent, or it crashed): a
        failed attempt, `reason` recorded in its result."""
        self._settle(task, agent, "open", None, spent, reason)

    def spent(self) -> Spend:
        """What every task of the campaign spent, summed (each Lease's spent annotation)."""
        out = Spend()
        for lease in self._list(None):
            raw = (lease["metadata"].get("annotations") or {}).get(SPENT_ANNOTATION)
            out += Spend.from_json(json.loads(raw) if raw else None)
        return out

    def tasks(self, role: str | None = None) -> list[dict[str, Any]]:
        out = []
        for lease in self._list(role):
            ann = lease["metadata"].get("annotations") or {}
            spec = lease.get("spec") or {}
            out.append({"id": lease["metadata"]["name"], "role": lease["metadata"]["labels"][ROLE_LABEL],
                        "key": ann.get(KEY_ANNOTATION), "payload": json.loads(ann.get(PAYLOAD_ANNOTATION) or "{}"),
                        "state": ann.get(STATE_ANNOTATION), "holder": spec.get("holderIdentity"),
                        "transitions": int(spec.get("leaseTransitions") or 0),
                        "attempts": int(spec.get("leaseTransitions") or 0),
                        "spent": Spend.from_json(json.loads(ann.get(SPENT_ANNOTATION) or "null")).to_json(),
                        "result": json.loads(ann[RESULT_ANNOTATION]) if ann.get(RESULT_ANNOTATION) else None})
        return out


def _free(spec: dict[str, Any]) -> None:
    """A Lease spec with no holder: the next agent may take its task at once."""
    for k in ("holderIdentity", "acquireTime", "renewTime", "leaseDurationSeconds"):
        spec.pop(k, None)
