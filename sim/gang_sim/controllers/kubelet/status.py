"""What the simulated kubelet writes: pod status bodies, the Node and its Lease, as pure functions.

Shapes follow the real kubelet's status manager so clients that read ``kubectl get pods`` or
``containerStatuses`` cannot tell the difference: conditions keep their ``lastTransitionTime``
while their status does not change, every container gets a status entry, and the main
container's exit code decides the phase. Every container instance has an ID (a restart makes a
new one) that its terminated state repeats, as the kubelet's log lookup expects. The Node
advertises only an ``InternalIP`` (kube-apiserver tries a ``Hostname`` address first, and a
simulated node's name resolves nowhere) and its kubelet port. Nothing here talks to the API.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from typing import Any

from gang_sim.controllers.clock import rfc3339
from gang_sim.controllers.kinds import NODE_LEASE_NAMESPACE

JsonDict = dict[str, Any]
HOST_IP = "127.0.0.1"
KUBELET_VERSION = "v1.31.0-sim"
LEASE_DURATION_SECONDS = 40  # the kubelet's default --node-lease-duration-seconds
# A node without these keys would make schedulers special-case "missing"; a sim node has them all.
DEFAULT_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "0"}
MAIN_CONTAINER = "pytorch"


def main_container(pod: JsonDict) -> JsonDict:
    """The container whose exit decides the pod: ``pytorch`` (the operator's name), else the first."""
    containers: list[JsonDict] = (pod.get("spec") or {}).get("containers") or [{}]
    return next((c for c in containers if c.get("name") == MAIN_CONTAINER), containers[0])


def _conditions(pod: JsonDict, wanted: Mapping[str, bool], now: str) -> list[JsonDict]:
    """Set condition statuses, keeping ``lastTransitionTime`` where the status is unchanged."""
    current = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    result = []
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        old = current.get(kind)
        status = "True" if wanted.get(kind, True) else "False"
        if old is not None and old.get("status") == status:
            result.append(old)
        else:
            result.append({"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now})
    return result


def container_id(pod_uid: str, name: str, restarts: int) -> str:
    """The ID of a container instance: the ``restarts``-th run of container ``name`` of a pod."""
    return "sim://" + hashlib.sha256(f"{pod_uid}/{name}/{restarts}".encode()).hexdigest()[:32]


def _container_id(pod: JsonDict, name: str, restarts: int) -> str:
    return container_id(str((pod.get("metadata") or {}).get("uid", "")), name, restarts)


def _entry(
    pod: JsonDict, container: JsonDict, state: JsonDict, restarts: int, last: JsonDict | None
) -> JsonDict:
    name = str(container.get("name"))
    image = str(container.get("image", ""))
    instance = _container_id(pod, name, restarts)
    if "terminated" in state and "containerID" not in state["terminated"]:
        state = {"terminated": {"containerID": instance, **state["terminated"]}}
    return {
        "name": name,
        "image": image,
        "imageID": f"{image}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": instance,
        "ready": "running" in state,
        "started": "running" in state,
        "restartCount": restarts,
        "state": state,
        "lastState": last or {},
    }


def _init_statuses(pod: JsonDict, started: str) -> list[JsonDict]:
    # The operator's init-pytorch waits for the master's DNS name; in the simulator it resolves at once.
    state = {
        "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}
    }
    return [
        {**_entry(pod, c, state, 0, None), "ready": True, "started": False}
        for c in (pod.get("spec") or {}).get("initContainers") or []
    ]


def _base(pod: JsonDict, phase: str, now: str, start_time: str | None) -> JsonDict:
    status = pod.get("status") or {}
    body: JsonDict = {
        "phase": phase,
        "hostIP": HOST_IP,
        "hostIPs": [{"ip": HOST_IP}],
        "podIP": HOST_IP,
        "podIPs": [{"ip": HOST_IP}],
        "startTime": status.get("startTime") or start_time or now,
        "qosClass": status.get("qosClass", "BestEffort"),
    }
    init = _init_statuses(pod, body["startTime"])
    if init:
        body["initContainerStatuses"] = init
    return body


def running_status(
    pod: JsonDict, now: dt.datetime, *, restarts: int = 0, last_state: JsonDict | None = None
) -> JsonDict:
    """Every container running since ``now``; the pod Ready."""
    stamp = rfc3339(now)
    body = _base(pod, "Running", stamp, None)
    body["conditions"] = _conditions(pod, {}, stamp)
    state = {"running": {"startedAt": stamp}}
    body["containerStatuses"] = [
        _entry(pod, c, state, restarts, last_state) for c in (pod.get("spec") or {}).get("containers") or []
    ]
    return body


def terminated_state(
    exit_code: int, started: str, finished: str, message: str | None = None, container_id: str = ""
) -> JsonDict:
    """A terminated container state; ``container_id`` names the instance (as ``lastState`` must)."""
    state: JsonDict = {"containerID": container_id} if container_id else {}
    state |= {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": started,
        "finishedAt": finished,
    }
    if message:
        state["message"] = message
    return {"terminated": state}


def terminated_status(
    pod: JsonDict,
    now: dt.datetime,
    *,
    exit_code: int,
    started: str,
    restarts: int = 0,
    reason: str | None = None,
    message: str | None = None,
    last_state: JsonDict | None = None,
) -> JsonDict:
    """The pod's last word: the main container exited with ``exit_code``, the others with 0.

    ``reason``/``message`` override the main container's (``StartError`` when the process could
    not be started, as the real runtime reports it); ``last_state`` is the main container's
    previous run, if it was restarted.
    """
    stamp = rfc3339(now)
    body = _base(pod, "Succeeded" if exit_code == 0 else "Failed", stamp, started)
    body["conditions"] = _conditions(pod, {"ContainersReady": False, "Ready": False}, stamp)
    main = main_container(pod).get("name")
    entries = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        code = exit_code if container.get("name") == main else 0
        state = terminated_state(code, started, stamp, message if code else None)
        if container.get("name") == main and reason:
            state["terminated"]["reason"] = reason
        last = last_state if container.get("name") == main else None
        entries.append(_entry(pod, container, state, restarts, last))
    body["containerStatuses"] = entries
    return body


def waiting_status(
    pod: JsonDict,
    now: dt.datetime,
    *,
    reason: str,
    message: str,
    restarts: int = 0,
    last_state: JsonDict | None = None,
    phase: str = "Running",
) -> JsonDict:
    """Containers waiting (``CrashLoopBackOff`` between restarts, ``CreateContainerConfigError``)."""
    stamp = rfc3339(now)
    body = _base(pod, phase, stamp, None)
    body["conditions"] = _conditions(pod, {"ContainersReady": False, "Ready": False}, stamp)
    state = {"waiting": {"reason": reason, "message": message}}
    body["containerStatuses"] = [
        _entry(pod, c, state, restarts, last_state) for c in (pod.get("spec") or {}).get("containers") or []
    ]
    return body


def lost_containers_status(pod: JsonDict, now: dt.datetime) -> JsonDict:
    """What a kubelet back from a dead machine writes for a pod it must not restart
    (``restartPolicy: Never``): its containers are nowhere to be found, so they are reported as
    the kubelet reports containers it can no longer see, and the pod is Failed."""
    stamp = rfc3339(now)
    status = pod.get("status") or {}
    started = status.get("startTime") or stamp
    body = _base(pod, "Failed", stamp, started)
    body["conditions"] = _conditions(pod, {"ContainersReady": False, "Ready": False}, stamp)
    state = {
        "terminated": {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated",
            "startedAt": started,
            "finishedAt": stamp,
        }
    }
    # The state keeps the last instance's ID (_entry adds it): the node still has its logs, so a
    # job's failure can quote them.
    restarts = {c.get("name"): c.get("restartCount", 0) for c in status.get("containerStatuses") or []}
    body["containerStatuses"] = [
        _entry(pod, c, state, int(restarts.get(c.get("name"), 0)), None)
        for c in (pod.get("spec") or {}).get("containers") or []
    ]
    return body


def node_conditions(now: dt.datetime, previous: list[JsonDict] | None = None) -> list[JsonDict]:
    """The kubelet's node conditions, all well, with ``lastHeartbeatTime`` = now; a condition
    keeps its ``lastTransitionTime`` from ``previous`` while its status is the same."""
    stamp = rfc3339(now)
    old = {c.get("type"): c for c in previous or []}
    rows = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    result = []
    for kind, status, reason, message in rows:
        prior = old.get(kind) or {}
        since = prior.get("lastTransitionTime") if prior.get("status") == status else None
        result.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": since or stamp,
            }
        )
    return result


def node_object(
    name: str, capacity: Mapping[str, str], now: dt.datetime, *, address: str = HOST_IP, port: int = 10250
) -> JsonDict:
    """A Node reachable at ``address`` (InternalIP) with its kubelet API on ``port``."""
    resources = {**DEFAULT_CAPACITY, **capacity}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": node_conditions(now),
            "addresses": [{"type": "InternalIP", "address": address}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "containerRuntimeVersion": "sim://1.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "airflow-gang simulator",
                "kernelVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        },
    }


def micro_time(moment: dt.datetime) -> str:
    """metav1.MicroTime's wire form: microseconds, ``Z``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_lease(node_name: str, node_uid: str, now: dt.datetime) -> JsonDict:
    """The node's heartbeat in ``kube-node-lease``, owned by the Node (it goes with it)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node_name,
            "namespace": NODE_LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}],
        },
        "spec": {
            "holderIdentity": node_name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": micro_time(now),
        },
    }
