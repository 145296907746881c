"""Server-side printing: ``meta.k8s.io/v1`` Tables for ``kubectl get``.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the columns the
server chooses. Custom resources use their ``additionalPrinterColumns`` (JSONPath, ``date``
cells as timestamps that kubectl turns into ages), built-ins use cell functions that compute
what kube-apiserver's printers show (pod READY/STATUS/RESTARTS, node STATUS...).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from gang_sim.apiserver.registry import PrinterColumn, ResourceInfo

JsonDict = dict[str, Any]

_NAME = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "priority": 0,
    "description": "Name must be unique within a namespace.",
}


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``-like: 45s, 12m, 5h, 3d."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def age(obj: JsonDict) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    return human_duration((dt.datetime.now(dt.UTC) - parse_time(created)).total_seconds())


def pod_ready(pod: JsonDict) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def pod_status(pod: JsonDict) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = term.get("reason") or f"ExitCode:{term.get('exitCode', 0)}"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def pod_restarts(pod: JsonDict) -> int:
    return sum(
        int(s.get("restartCount", 0)) for s in (pod.get("status") or {}).get("containerStatuses") or []
    )


def node_status(node: JsonDict) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    state = "Ready" if ready and ready.get("status") == "True" else ("NotReady" if ready else "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    return state


def node_roles(node: JsonDict) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = [
        k[len(prefix) :] for k in ((node.get("metadata") or {}).get("labels") or {}) if k.startswith(prefix)
    ]
    return ",".join(sorted(roles)) or "<none>"


def service_ports(svc: JsonDict) -> str:
    ports = (svc.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def data_count(config_map: JsonDict) -> int:
    return len(config_map.get("data") or {}) + len(config_map.get("binaryData") or {})


def event_object(event: JsonDict) -> str:
    involved = event.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _true_conditions(obj: JsonDict) -> list[str]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return [str(c.get("type")) for c in conditions if c.get("status") == "True"]


def job_status(job: JsonDict) -> str:
    """kubectl's Job STATUS: the terminal or suspended state, else Running."""
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    true = _true_conditions(job)
    for state in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"):
        if state in true:
            return state
    return "Running"


def job_completions(job: JsonDict) -> str:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    return f"{succeeded}/1 of {spec.get('parallelism', 1)}"


def job_duration(job: JsonDict) -> str:
    status = job.get("status") or {}
    if not status.get("startTime"):
        return ""
    end = parse_time(status["completionTime"]) if status.get("completionTime") else dt.datetime.now(dt.UTC)
    return human_duration((end - parse_time(status["startTime"])).total_seconds())


def jobset_completed(jobset: JsonDict) -> str | None:
    """The JobSet CRD's ``.status.conditions[?(@.type=="Completed")].status`` column."""
    for condition in (jobset.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Completed":
            return str(condition.get("status"))
    return None


AGE = PrinterColumn("Age", cell=age)

_SEGMENT = re.compile(r"\.([^.\[]+)|\[(-?\d+)(:?)\]")


def jsonpath_value(obj: Any, path: str) -> Any:
    """The subset of JSONPath CRD printer columns use: ``.a.b``, ``[0]``, ``[-1:]``."""
    current = obj
    for match in _SEGMENT.finditer(path.strip().lstrip("{").rstrip("}")):
        key, index, is_slice = match.groups()
        if key is not None:
            current = current.get(key) if isinstance(current, dict) else None
        elif isinstance(current, list):
            start = int(index)
            if is_slice:
                part = current[start:]
                current = part[0] if part else None
            else:
                current = current[start] if -len(current) <= start < len(current) else None
        else:
            current = None
        if current is None:
            return None
    return current


def _columns(info: ResourceInfo) -> list[PrinterColumn]:
    if info.printer_columns:
        return list(info.printer_columns)
    if info.custom:
        return [PrinterColumn("Age", "date", ".metadata.creationTimestamp")]
    return [AGE]


def _cell(column: PrinterColumn, obj: JsonDict) -> Any:
    if column.cell is not None:
        return column.cell(obj)
    value = jsonpath_value(obj, column.json_path)
    if value is None:
        return None
    if column.type == "date" and isinstance(value, str):
        # The CRD table convertor prints dates as ages, as kubectl shows them.
        try:
            return human_duration((dt.datetime.now(dt.UTC) - parse_time(value)).total_seconds())
        except ValueError:
            return value
    if isinstance(value, str | int | float | bool):
        return value
    return str(value)


def partial_metadata(obj: JsonDict) -> JsonDict:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    info: ResourceInfo, objects: list[JsonDict], list_meta: JsonDict, include_object: str
) -> JsonDict:
    columns = _columns(info)
    definitions = [_NAME] + [
        {
            "name": c.name,
            "type": c.type,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }
        for c in columns
    ]
    rows = []
    for obj in objects:
        row: JsonDict = {"cells": [obj["metadata"]["name"], *(_cell(c, obj) for c in columns)]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = partial_metadata(obj)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    }
