"""What a session's decisions write, as vc-scheduler's status updater writes them: only changes.

- A PodGroup's status goes out as a whole-object ``PUT`` (PodGroups have no status
  subresource). Its conditions keep their ``transitionID`` and ``lastTransitionTime`` while
  unchanged; a session that changes nothing writes nothing, where vc-scheduler rewrites every
  session, so that watches stay quiet.
- A pod left pending gets ``PodScheduled=False``/``Unschedulable`` with the session's message
  (and ``status.nominatedNodeName`` when a pod was evicted for it), patched through
  ``pods/status`` against the resourceVersion it was cached with: a compare-and-swap.
- A queue's status goes through its ``/status`` subresource.

Each write reads the object as cached when it goes out, not as the session saw it. A PodGroup
or pod write that fails for another reason than a conflict or a deletion makes its gang
undecided (`SessionMemo.forget`, ``decide_again``), so the next session states it again.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import PODGROUPS, PODS, QUEUES
from gang_sim.controllers.volcano.model import SessionMemo

log = logging.getLogger(__name__)


class StatusUpdater:
    """Writes a session's PodGroup, pod and queue statuses (see the module docstring).

    :param decide_again: called with a pod whose condition did not get written, so that its
        gang does not count as settled next session.
    """

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        memo: SessionMemo,
        decide_again: Callable[[JsonDict], None],
    ) -> None:
        self.client = client
        self.cache = cache
        self.memo = memo
        self.decide_again = decide_again

    def podgroup_update(
        self, key: tuple[str, str], status: JsonDict, transition: str, now: dt.datetime
    ) -> tuple[JsonDict | None, JsonDict]:
        """The PodGroup and its new status, or (None, {}) when the session changes nothing."""
        current = self.cache.get(PODGROUPS, *key)
        if current is None:
            return None, {}
        old = current.get("status") or {}
        conditions = []
        for condition in status["conditions"]:
            previous = next(
                (c for c in old.get("conditions") or [] if c.get("type") == condition["type"]), None
            )
            same = previous is not None and all(previous.get(k) == v for k, v in condition.items())
            conditions.append(
                previous
                if same
                else {**condition, "transitionID": transition, "lastTransitionTime": rfc3339(now)}
            )
        new_status = {**old, **status, "conditions": conditions}
        if not conditions:
            new_status.pop("conditions")
        if new_status == old:
            return None, {}  # vc-scheduler rewrites every session; writing only changes keeps watches quiet
        return current, new_status

    async def write_podgroup(
        self, key: tuple[str, str], status: JsonDict, transition: str, now: dt.datetime
    ) -> None:
        current, new_status = self.podgroup_update(key, status, transition, now)  # as cached now
        if current is None:
            return
        old = current.get("status") or {}
        if old.get("phase") != new_status["phase"]:
            log.info(
                "podgroup %s/%s phase %s->%s",
                key[0],
                key[1],
                old.get("phase") or "(none)",
                new_status["phase"],
            )
        try:
            self.cache[PODGROUPS].observe(
                await self.client.replace(PODGROUPS, {**current, "status": new_status})
            )
        except ApiError as error:
            if error.status not in (404, 409):  # 409: it changed, so the next session decides anew
                self.memo.forget(key)
                raise
        except (aiohttp.ClientError, OSError):
            self.memo.forget(key)
            raise

    async def mark_unschedulable(
        self, namespace: str, name: str, message: str, nominated: str, now: dt.datetime
    ) -> None:
        pod = self.cache.get(PODS, namespace, name)  # as cached now, not as the session saw it
        if (
            pod is None
            or deep_get(pod, "spec", "nodeName")
            or not not_yet_unschedulable(pod, message, nominated)
        ):
            return  # gone, bound since the session decided, or already marked
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": rfc3339(now),
            "lastProbeTime": None,
        }
        current = deep_get(pod, "status", "conditions") or []
        conditions = [*(c for c in current if c.get("type") != "PodScheduled"), condition]
        # The resourceVersion makes it a compare-and-swap, as vc-scheduler's UpdateStatus is: a
        # pod the kubelet or a binding changed meanwhile is left for the next session to judge.
        status: JsonDict = {"conditions": conditions}
        if nominated:  # only ever set, never cleared (cache.go:1092-1097)
            status["nominatedNodeName"] = nominated
        body = {
            "metadata": {"resourceVersion": deep_get(pod, "metadata", "resourceVersion")},
            "status": status,
        }
        try:
            updated = await self.client.patch(PODS, name, body, namespace, subresource="status")
            self.cache[PODS].observe(updated)
        except ApiError as error:
            if error.status not in (404, 409):
                self.decide_again(pod)
                raise
        except (aiohttp.ClientError, OSError):
            self.decide_again(pod)
            raise

    async def write_queue_status(self, name: str, status: JsonDict) -> None:
        queue = self.cache.get(QUEUES, "", name)
        if queue is None:
            return
        old = queue.get("status") or {}
        if {**old, **status} == old:
            return
        try:
            updated = await self.client.replace(
                QUEUES, {**queue, "status": {**old, **status}}, subresource="status"
            )
            self.cache[QUEUES].observe(updated)
        except ApiError as error:
            if error.status not in (404, 409):
                raise


def not_yet_unschedulable(pod: JsonDict, message: str, nominated: str = "") -> bool:
    """Whether the pod lacks ``PodScheduled=False`` with this message, or the node it is
    nominated to (a write is due)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
    if nominated and (pod.get("status") or {}).get("nominatedNodeName") != nominated:
        return True
    return not (current and current.get("status") == "False" and current.get("message") == message)
