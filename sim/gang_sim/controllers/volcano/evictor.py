"""vc-scheduler's evictor: what a pod that preempt or reclaim chose goes through.

As ``pkg/scheduler/cache/cache.go`` at v1.16.0-alpha.1 (commit a4b775ad) does it:

- ``SchedulerCache.Evict`` (:938-981): a Normal ``Evict`` event on the *PodGroup* whose message is
  the reason itself (``preempt`` or ``reclaim``), at once; the rest runs in the background (a
  goroutine there, `BackgroundWrites` here). No PodGroup, no eviction (:955-958).
- ``defaultEvictor.Evict`` (:270-313): a Warning ``Evict`` event on the pod, "Pod is evicted,
  because of <reason>"; the pod conditions ``Ready=False`` (reason ``Evict``, that message) and
  ``DisruptionTarget=True`` (reason ``PreemptionByScheduler``, "<schedulerName>: preempting to
  accommodate a higher priority pod", the same text for reclaim), written through
  ``pods/status`` against the resourceVersion the session saw; then a delete with empty
  ``DeleteOptions``, so the pod's own ``terminationGracePeriodSeconds`` applies and the pod stays,
  terminating and holding its node's resources, until its kubelet is done with it.
- If the pod already carries either condition exactly, ``UpdatePodCondition`` reports no change
  and the evictor returns without writing or deleting (:285-301). A write or delete that fails
  (the pod changed or went meanwhile) leaves the pod for the next session to judge, as
  ``resyncTask`` does.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339
from gang_sim.controllers.concurrency import BackgroundWrites
from gang_sim.controllers.event_recorder import EventRecorder
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import PODGROUPS, PODS
from gang_sim.controllers.volcano.model import Eviction

log = logging.getLogger(__name__)

NO_OPTIONS: JsonDict = {"apiVersion": "v1", "kind": "DeleteOptions"}


class Evictor:
    """Evicts the pods a session chose (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        events: EventRecorder,
        scheduler_name: str,
        decide_again: Callable[[JsonDict], None],
    ) -> None:
        self.client = client
        self.cache = cache
        self.events = events
        self.scheduler_name = scheduler_name
        self.decide_again = decide_again
        self.writes = BackgroundWrites(limit=4)

    def evict(self, eviction: Eviction, now: dt.datetime) -> None:
        """``SchedulerCache.Evict``: the PodGroup's event now, the pod's eviction in the background."""
        podgroup = self.cache.get(PODGROUPS, *eviction.podgroup)
        pod = self.cache.get(PODS, *eviction.pod)
        if podgroup is None or pod is None:
            return
        resource_version = str(deep_get(pod, "metadata", "resourceVersion") or "")
        write = functools.partial(self._evict_pod, eviction, resource_version, now)
        self.writes.submit(eviction.pod, write)
        self.events.record(podgroup, "Normal", "Evict", eviction.reason)

    async def close(self) -> None:
        await self.writes.close()

    async def _evict_pod(self, eviction: Eviction, resource_version: str, now: dt.datetime) -> None:
        namespace, name = eviction.pod
        pod = self.cache.get(PODS, namespace, name)
        if pod is None or deep_get(pod, "metadata", "deletionTimestamp"):
            return
        message = f"Pod is evicted, because of {eviction.reason}"
        self.events.record(pod, "Warning", "Evict", message)
        scheduler = deep_get(pod, "spec", "schedulerName") or self.scheduler_name
        wanted = [
            {"type": "Ready", "status": "False", "reason": "Evict", "message": message},
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"{scheduler}: preempting to accommodate a higher priority pod",
            },
        ]
        conditions = list(deep_get(pod, "status", "conditions") or [])
        for condition in wanted:
            if any(same_condition(current, condition) for current in conditions):
                log.debug("volcano: %s/%s already has %s: not evicted", namespace, name, condition["type"])
                return
            conditions = [c for c in conditions if c.get("type") != condition["type"]]
            conditions.append({**condition, "lastProbeTime": None, "lastTransitionTime": rfc3339(now)})
        body = {"metadata": {"resourceVersion": resource_version}, "status": {"conditions": conditions}}
        try:
            updated = await self.client.patch(PODS, name, body, namespace, subresource="status")
            self.cache[PODS].observe(updated)
            await self.client.request("DELETE", PODS.path(namespace, name), body=NO_OPTIONS)
        except (ApiError, aiohttp.ClientError, OSError) as error:
            log.debug("volcano: evicting %s/%s failed: %s", namespace, name, error)
            self.decide_again(pod)
            return
        log.info("pod evicted pod=%s/%s reason=%s", namespace, name, eviction.reason)


def same_condition(current: JsonDict, wanted: JsonDict) -> bool:
    """``podutil.UpdatePodCondition`` would change nothing: same type, status, reason, message,
    and no probe time (the transition time is kept while the status stays)."""
    return all(current.get(key) == value for key, value in wanted.items()) and not current.get(
        "lastProbeTime"
    )
