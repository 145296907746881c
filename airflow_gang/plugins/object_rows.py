"""Rows of a job page's pods, events and conditions, as plain JSON (pure).

Wire-form objects (as `GangJobHook` returns them) in, small JSON-serialisable dicts with
snake_case keys out: `condition_rows` (a job's or PodGroup's conditions), `pod_rows` (the
replicas in replica order, each with its node, phase and container state) and `event_rows` (the
newest events, one per object and reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind

JsonDict = dict[str, Any]
MAX_EVENTS = 50


def _metadata(obj: Mapping[str, Any] | None) -> JsonDict:
    return dict((obj or {}).get("metadata") or {})


def condition_rows(obj: JsonDict | None) -> list[JsonDict]:
    """An object's ``status.conditions`` in the server's order."""
    return [
        {
            "type": condition.get("type"),
            "status": condition.get("status"),
            "reason": condition.get("reason"),
            "message": condition.get("message"),
            "last_transition_time": condition.get("lastTransitionTime"),
        }
        for condition in ((obj or {}).get("status") or {}).get("conditions") or []
    ]


def _container_state(pod: JsonDict, container: str) -> JsonDict:
    statuses = ((pod.get("status") or {}).get("containerStatuses")) or []
    status = next((s for s in statuses if s.get("name") == container), statuses[0] if statuses else {})
    state = status.get("state") or {}
    terminated = state.get("terminated") or (status.get("lastState") or {}).get("terminated") or {}
    waiting = state.get("waiting") or {}
    return {
        "restarts": int(status.get("restartCount") or 0),
        "exit_code": terminated.get("exitCode"),
        "reason": terminated.get("reason") or waiting.get("reason"),
    }


def pod_row(pod: JsonDict, job_kind: JobKind = DEFAULT_JOB_KIND) -> JsonDict:
    """A replica pod: which replica, where it runs (node), its phase and how its container ended
    (a TrainJob's: replica type ``node``, index its rank)."""
    metadata = _metadata(pod)
    labels = metadata.get("labels") or {}
    status = pod.get("status") or {}
    unschedulable = next(
        (
            c.get("message")
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        ),
        None,
    )
    return {
        "name": metadata.get("name"),
        "replica_type": labels.get(job_kind.replica_type_label),
        "replica_index": labels.get(job_kind.replica_index_label),
        "phase": status.get("phase"),
        "node": (pod.get("spec") or {}).get("nodeName"),
        "started_at": status.get("startTime"),
        "unschedulable": unschedulable,
        "deleting": bool(metadata.get("deletionTimestamp")),
        **_container_state(pod, job_kind.container),
    }


def _pod_sort_key(pod: JsonDict, job_kind: JobKind) -> tuple[int, str, int]:
    labels = _metadata(pod).get("labels") or {}
    kind = str(labels.get(job_kind.replica_type_label) or "")
    try:
        index = int(labels.get(job_kind.replica_index_label) or 0)
    except ValueError:
        index = 0
    return (0 if kind.lower() == job_kind.leader.lower() else 1, kind, index)


def pod_rows(pods: Iterable[JsonDict], job_kind: JobKind = DEFAULT_JOB_KIND) -> list[JsonDict]:
    """Pods leader first (a PyTorchJob's Master), then by replica type and index (rank)."""
    return [pod_row(pod, job_kind) for pod in sorted(pods, key=lambda pod: _pod_sort_key(pod, job_kind))]


def event_row(event: JsonDict) -> JsonDict:
    involved = event.get("involvedObject") or {}
    return {
        "object_kind": involved.get("kind"),
        "object_name": involved.get("name"),
        "type": event.get("type"),
        "reason": event.get("reason"),
        "message": event.get("message"),
        "count": event.get("count") or 1,
        "last_seen": event.get("lastTimestamp")
        or event.get("eventTime")
        or _metadata(event).get("creationTimestamp"),
    }


def event_rows(events: Iterable[JsonDict], limit: int = MAX_EVENTS) -> list[JsonDict]:
    """The newest ``limit`` events, newest first, one row per distinct event object."""
    seen: set[str] = set()
    rows = []
    for event in events:
        uid = str(_metadata(event).get("uid") or id(event))
        if uid not in seen:
            seen.add(uid)
            rows.append(event_row(event))
    rows.sort(key=lambda row: str(row["last_seen"] or ""), reverse=True)
    return rows[:limit]


def pods_by_label(pods: Iterable[JsonDict], label: str) -> dict[str, list[JsonDict]]:
    """Pods grouped by the value of ``label`` (a job kind's `JobKind.pod_job_label`)."""
    grouped: dict[str, list[JsonDict]] = {}
    for pod in pods:
        value = ((pod.get("metadata") or {}).get("labels") or {}).get(label)
        if value:
            grouped.setdefault(str(value), []).append(pod)
    return grouped
