"""The simulated disruption controller (kube-controller-manager's): PodDisruptionBudget status.

The Eviction API (the API server's ``apiserver/eviction.py``) decides from a budget's status
alone, so this controller keeps that status current, as upstream's ``pkg/controller/disruption``
does:

- ``expectedPods`` and ``desiredHealthy``: an integer ``minAvailable`` counts the matching pods
  and wants that many; a percentage ``minAvailable`` or any ``maxUnavailable`` needs the scale
  of the pods' controllers (``getExpectedScale``): each controller's ``scale`` subresource
  (a PyTorchJob's is its Worker count, as its CRD declares), pods without a controller left
  out. A pod whose controller has no scale (a batch Job, a TrainJob) makes the budget fail
  safe: no disruption allowed, condition ``DisruptionAllowed`` False reason ``SyncFailed``.
- ``currentHealthy``: matching pods that are Ready, not being deleted and not in
  ``disruptedPods`` (pods an eviction just took, for up to two minutes).
- ``disruptionsAllowed``: ``currentHealthy - desiredHealthy`` (never below 0, and 0 while no
  pod is expected), with condition ``DisruptionAllowed`` True ``SufficientPods`` or False
  ``InsufficientPods``, and ``observedGeneration``.

Functions named after upstream's ``pkg/controller/disruption/disruption.go`` (``trySync``,
``getExpectedPodCount``, ``getExpectedScale``, ``buildDisruptedPodMap``, ``countHealthyPods``,
``updatePdbStatus``, ``failSafe``). The status is replaced with the resourceVersion it was
computed from, so an eviction that spent the budget meanwhile wins (409) and the next round
starts from it. Selectors: ``{}`` selects every pod of the namespace (``policy/v1``), no
selector none.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import parse_time, utc_now
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import (
    JOBS,
    JOBSETS,
    PODDISRUPTIONBUDGETS,
    PODS,
    PYTORCHJOBS,
    TRAINJOBS,
    Kind,
    object_key,
)
from gang_sim.controllers.metav1_conditions import set_condition
from gang_sim.controllers.runner import Controller
from gang_sim.intstr import scaled_value
from gang_sim.label_selector import selects
from gang_sim.pod_conditions import is_ready

log = logging.getLogger(__name__)

DELETION_TIMEOUT = dt.timedelta(minutes=2)  # upstream's DeletionTimeout for disruptedPods
# Controllers a pod's controllerRef may name, to find their scale subresource (the RESTMapper's job).
_CONTROLLER_KINDS = {(k.api_version, k.kind): k for k in (PYTORCHJOBS, JOBS, JOBSETS, TRAINJOBS)}


class ScaleUnknown(Exception):
    """``getExpectedScale`` failed: the budget fails safe with this message."""


class DisruptionController(Controller):
    """Keeps every PodDisruptionBudget's status; see the module docstring."""

    name = "disruption"
    kinds = (PODDISRUPTIONBUDGETS, PODS)

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        period: float | None = 1.0,
        clock: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        super().__init__(client, cache, period)
        self.clock = clock

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        if kind == PODDISRUPTIONBUDGETS:
            return True
        namespace = object_key(obj)[0]
        return any(object_key(pdb)[0] == namespace for pdb in self.cache.items(PODDISRUPTIONBUDGETS))

    async def reconcile(self) -> None:
        for pdb in self.cache.items(PODDISRUPTIONBUDGETS):
            try:
                await self._sync(pdb)
            except ApiError as error:
                if error.status not in (404, 409):
                    raise
                self.requeue()  # changed or gone meanwhile: the next round reads it again

    async def _sync(self, pdb: JsonDict) -> None:
        namespace = object_key(pdb)[0]
        selector = deep_get(pdb, "spec", "selector")
        pods = [
            pod
            for pod in self.cache.items(PODS)
            if object_key(pod)[0] == namespace and selects(selector, deep_get(pod, "metadata", "labels"))
        ]
        now = self.clock()
        try:
            expected, desired = await self._expected(pdb, pods)
        except ScaleUnknown as error:
            await self._write(pdb, _fail_safe(pdb, str(error), now))
            return
        disrupted = _still_disrupted(pdb, pods, now)
        healthy = sum(
            1
            for pod in pods
            if not deep_get(pod, "metadata", "deletionTimestamp")
            and object_key(pod)[1] not in disrupted
            and is_ready(pod)
        )
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        status: JsonDict = {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
            "observedGeneration": int(deep_get(pdb, "metadata", "generation", default=0) or 0),
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        sufficient = allowed > 0
        status["conditions"] = set_condition(
            deep_get(pdb, "status", "conditions", default=[]) or [],
            "DisruptionAllowed",
            "True" if sufficient else "False",
            "SufficientPods" if sufficient else "InsufficientPods",
            "",
            now=now,
        )
        for condition in status["conditions"]:
            condition["observedGeneration"] = status["observedGeneration"]
        await self._write(pdb, status)

    async def _expected(self, pdb: JsonDict, pods: list[JsonDict]) -> tuple[int, int]:
        """``getExpectedPodCount``: (expectedPods, desiredHealthy)."""
        spec = pdb.get("spec") or {}
        max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
        if max_unavailable is not None:
            expected = await self._expected_scale(pods)
            desired = expected - scaled_value(max_unavailable, expected, round_up=True)
            return expected, max(desired, 0)
        if isinstance(min_available, int):
            return len(pods), min_available
        if min_available is not None:
            expected = await self._expected_scale(pods)
            return expected, scaled_value(min_available, expected, round_up=True)
        return 0, 0

    async def _expected_scale(self, pods: list[JsonDict]) -> int:
        """The sum of the scales of the pods' controllers; pods without one do not count."""
        scales: dict[str, int] = {}
        for pod in pods:
            refs = deep_get(pod, "metadata", "ownerReferences", default=[]) or []
            ref = next((r for r in refs if r.get("controller")), None)
            if ref is None or ref.get("uid") in scales:
                continue
            scale = await self._scale_of(ref, object_key(pod)[0])
            if scale is None:
                raise ScaleUnknown(f'found no controllers for pod "{object_key(pod)[1]}"')
            scales[str(ref.get("uid"))] = scale
        return sum(scales.values())

    async def _scale_of(self, ref: JsonDict, namespace: str) -> int | None:
        kind = _CONTROLLER_KINDS.get((str(ref.get("apiVersion")), str(ref.get("kind"))))
        if kind is None:
            return None
        try:
            scale = await self.client.request("GET", kind.path(namespace, str(ref.get("name")), "scale"))
        except ApiError as error:
            if error.status == 404:  # no such controller, or one without a scale subresource
                return None
            raise
        if deep_get(scale, "metadata", "uid") != ref.get("uid"):
            return None  # a successor of the same name is not this pod's controller
        return int(deep_get(scale, "spec", "replicas", default=0) or 0)

    async def _write(self, pdb: JsonDict, status: JsonDict) -> None:
        current = pdb.get("status") or {}
        if all(current.get(key) == value for key, value in status.items()) and set(current) <= set(status):
            return
        body = {
            "apiVersion": PODDISRUPTIONBUDGETS.api_version,
            "kind": PODDISRUPTIONBUDGETS.kind,
            "metadata": pdb["metadata"],
            "spec": pdb.get("spec") or {},
            "status": status,
        }
        written = await self.client.replace(PODDISRUPTIONBUDGETS, body, "status")
        self.cache[PODDISRUPTIONBUDGETS].observe(written)
        log.debug("disruption: %s/%s status %s", *object_key(pdb), status)


def _still_disrupted(pdb: JsonDict, pods: list[JsonDict], now: dt.datetime) -> dict[str, str]:
    """``buildDisruptedPodMap``: the evicted pods still expected to go, and when they were taken."""
    recorded = deep_get(pdb, "status", "disruptedPods", default={}) or {}
    present = {object_key(pod)[1]: pod for pod in pods}
    kept = {}
    for name, stamp in recorded.items():
        pod = present.get(name)
        taken = parse_time(stamp)
        if pod is None or deep_get(pod, "metadata", "deletionTimestamp") or taken is None:
            continue  # gone or going: counted as unhealthy anyway
        if taken + DELETION_TIMEOUT < now:
            log.info("disruption: pod %s was expected to be deleted by now; counting it again", name)
            continue
        kept[name] = stamp
    return kept


def _fail_safe(pdb: JsonDict, message: str, now: dt.datetime) -> JsonDict:
    """``failSafe``: the last status, with no disruption allowed and the reason why."""
    status = dict(pdb.get("status") or {})
    status["disruptionsAllowed"] = 0
    status["conditions"] = set_condition(
        status.get("conditions") or [], "DisruptionAllowed", "False", "SyncFailed", message, now=now
    )
    return status
