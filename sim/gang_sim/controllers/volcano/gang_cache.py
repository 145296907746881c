"""The scheduler's cache, read by gang: each gang's pods, the pods holding nodes, what changed.

A session must not walk every pod of the cluster: the pods are indexed in the shared informer
cache by the gang they belong to (`GROUP_INDEX`, read through `GroupTasks`), by whether they
hold a node's resources (`HOLDING_INDEX`: all a session needs beyond the gangs' own pods) and,
for gangs that have not finished, by gang again (`UNFINISHED_INDEX`: a Completed gang without
any has settled). `ChangedGangs` follows the cache's stores, so that with a `SessionMemo` a
session decides again only the gangs whose PodGroup or pods changed.
"""

from __future__ import annotations

import functools

from gang_sim.controllers.capacity import TERMINAL_PHASES, holds_resources
from gang_sim.controllers.client import JsonDict
from gang_sim.controllers.informer import Cache, Informer, deep_get
from gang_sim.controllers.kinds import PODGROUPS, PODS, object_key
from gang_sim.controllers.volcano.model import GROUP_ANNOTATION, Key

GROUP_INDEX = "volcano/group"
UNFINISHED_INDEX = "volcano/unfinished-group"
HOLDING_INDEX = "volcano/holding"
HOLDING = "holding"


def index_pods(cache: Cache, scheduler_name: str) -> None:
    """Add the scheduler's three pod indexes to the cache (see the module docstring)."""
    cache[PODS].add_index(GROUP_INDEX, functools.partial(group_of, scheduler_name))
    cache[PODS].add_index(UNFINISHED_INDEX, functools.partial(unfinished_group_of, scheduler_name))
    cache[PODS].add_index(HOLDING_INDEX, holding)


class GroupTasks:
    """`Snapshot.tasks_by_group` read from the pods' group index as the session asks."""

    def __init__(self, pods: Informer) -> None:
        self._pods = pods

    def get(self, key: Key, default: list[JsonDict], /) -> list[JsonDict]:
        return self._pods.indexed(GROUP_INDEX, f"{key[0]}/{key[1]}") or default


def group_of(scheduler_name: str, pod: JsonDict) -> list[str]:
    """``namespace/group`` of a pod this scheduler places as part of a PodGroup."""
    group = deep_get(pod, "metadata", "annotations", GROUP_ANNOTATION)
    if not group or deep_get(pod, "spec", "schedulerName") != scheduler_name:
        return []
    return [f"{object_key(pod)[0]}/{group}"]


def unfinished_group_of(scheduler_name: str, pod: JsonDict) -> list[str]:
    """Like `group_of`, for pods that have not finished: a gang without any has settled."""
    if deep_get(pod, "status", "phase") in TERMINAL_PHASES:
        return []
    return group_of(scheduler_name, pod)


def holding(pod: JsonDict) -> list[str]:
    """Pods that hold node resources: all a session needs to know beyond the gangs' own pods."""
    return [HOLDING] if holds_resources(pod) else []


class ChangedGangs:
    """The gangs whose PodGroup or pods the cache changed since the last session.

    None stands for "any": before the first session, after a re-list, and after a session that
    failed half-way (its memo may be half updated); the next session then looks at every gang.
    """

    def __init__(self, cache: Cache, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self._keys: set[Key] | None = None
        cache[PODGROUPS].subscribe_stores(self._podgroup_stored)
        cache[PODS].subscribe_stores(self._pod_stored)

    def take(self) -> set[Key] | None:
        """The gangs changed since the last `take` (None: any); counting starts afresh."""
        keys, self._keys = self._keys, set()
        return keys

    def all_changed(self) -> None:
        """Count every gang as changed until the next `take`."""
        self._keys = None

    def _podgroup_stored(self, before: JsonDict | None, after: JsonDict | None) -> None:
        if self._keys is not None:
            obj = after if after is not None else before
            if obj is None:
                self._keys = None  # re-listed
            else:
                self._keys.add(object_key(obj))

    def _pod_stored(self, before: JsonDict | None, after: JsonDict | None) -> None:
        if self._keys is None:
            return
        if before is None and after is None:
            self._keys = None  # re-listed
            return
        for pod in (before, after):
            for group in group_of(self.scheduler_name, pod) if pod is not None else ():
                namespace, _, name = group.partition("/")
                self._keys.add((namespace, name))
