"""Node-pressure eviction by the simulated kubelet: what it writes when its node runs short.

A real kubelet whose node crosses a hard eviction threshold (``memory.available<100Mi``, ...)
picks a pod, kills it (grace period 0 for a hard threshold) and ends it ``Failed`` itself, as
``pkg/kubelet/eviction/eviction_manager.go`` ``evictPod`` does: ``status.reason: Evicted``, the
message built from ``helpers.go``'s ``nodeLowMessageFmt`` ("The node was low on resource: %v. "),
``thresholdMetMessageFmt`` ("Threshold quantity: %v, available: %v. ") and, for a container
using more than it requested, "Container %s was using %s, request is %s, has larger consumption
of %v. " (the wording of recent releases; older ones differ; ``pkg/kubelet/eviction`` is cited
by function and string, kubernetes/kubernetes could not be read at a tag for this work); the
condition ``DisruptionTarget`` reason ``TerminationByKubelet`` with the same message; and a
Warning ``Evicted`` event. The kubelet does not delete the pod: its owner decides (a Job counts
it in ``status.failed``, the training-operator deletes and recreates it).

The simulator has no real memory to run out of: which pod to evict, and the numbers, come from
the `KUBELET_EVICTION_ANNOTATION` the API server's fault injection puts on the pod
(``kubelet_evictions`` in a fault spec). Pure functions; `kubelet.Kubelet` carries it out.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from gang_sim.controllers.clock import rfc3339
from gang_sim.controllers.kubelet.status import main_container, terminated_status
from gang_sim.pod_conditions import KUBELET, disruption_target, with_condition

JsonDict = dict[str, Any]

REASON = "Evicted"
NODE_LOW = "The node was low on resource: {resource}. "
THRESHOLD_MET = "Threshold quantity: {threshold}, available: {available}. "
CONTAINER_USAGE = (
    "Container {container} was using {usage}, request is {request}, has larger consumption of {resource}. "
)
KILLED_EXIT_CODE = 137  # SIGKILL: a hard threshold leaves no grace period


@dataclass(frozen=True)
class Pressure:
    """What the node ran short of, as the fault spec's ``kubelet_evictions`` entry says."""

    resource: str
    threshold: str
    available: str
    usage: str | None = None

    @classmethod
    def parse(cls, text: str) -> Pressure | None:
        """The annotation's value; None when it cannot be read (the kubelet then ignores it)."""
        try:
            data = json.loads(text)
            return cls(
                str(data["resource"]), str(data["threshold"]), str(data["available"]), data.get("usage")
            )
        except (ValueError, KeyError, TypeError):
            return None

    def to_annotation(self) -> str:
        data = {"resource": self.resource, "threshold": self.threshold, "available": self.available}
        if self.usage is not None:
            data["usage"] = self.usage
        return json.dumps(data, sort_keys=True)


def eviction_message(pod: JsonDict, pressure: Pressure) -> str:
    """``evictionMessage``: the resource, the threshold met, and the main container's use if it
    exceeds its request."""
    message = NODE_LOW.format(resource=pressure.resource)
    message += THRESHOLD_MET.format(threshold=pressure.threshold, available=pressure.available)
    if pressure.usage is not None:
        container = main_container(pod)
        request = ((container.get("resources") or {}).get("requests") or {}).get(pressure.resource, "0")
        message += CONTAINER_USAGE.format(
            container=container.get("name"), usage=pressure.usage, request=request, resource=pressure.resource
        )
    return message


def evicted_status(pod: JsonDict, now: dt.datetime, *, restarts: int, message: str) -> JsonDict:
    """The pod's last status: Failed, reason ``Evicted``, containers killed, ``DisruptionTarget``."""
    stamp = rfc3339(now)
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    running = [s["state"]["running"] for s in statuses if "running" in (s.get("state") or {})]
    started = str(
        (running[0] if running else {}).get("startedAt")
        or (pod.get("status") or {}).get("startTime")
        or stamp
    )
    body = terminated_status(pod, now, exit_code=KILLED_EXIT_CODE, started=started, restarts=restarts)
    body["reason"] = REASON
    body["message"] = message
    condition = disruption_target(KUBELET, message)
    body["conditions"] = with_condition(body["conditions"], condition, stamp)
    return body


def evicted_event(pod: JsonDict, node: str, message: str, now: str) -> JsonDict:
    """The Warning ``Evicted`` event the eviction manager records on the pod."""
    metadata = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{metadata.get('name')}.", "namespace": metadata.get("namespace")},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": metadata.get("namespace"),
            "name": metadata.get("name"),
            "uid": metadata.get("uid"),
        },
        "reason": REASON,
        "message": message,
        "type": "Warning",
        "source": {"component": "kubelet", "host": node},
        "reportingComponent": "kubelet",
        "reportingInstance": node,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
