"""What the shared watch cache keeps of each object: the parts a trigger's look reads, no more.

An informer's transform (client-go's ``SetTransform``): the triggerer is one Python process, and
its garbage collector's full passes walk every container object it holds. A thousand jobs' pod
templates, pod specs and managed fields kept whole are tens of thousands of dicts and lists more
for each such pass (issue 33: the passes held the triggerer's event loop 0.2 to 1 s), and most of
the cache's memory (the triggerer grew 98 MB at 1,000 jobs with whole objects, 76 MB without).

What a look reads (`airflow_gang.model.gang_state.gang_status`, the timeline, the failure memory,
the queue check, `watch_cache.followed`): every object's ``metadata`` (name, uid, labels,
ownerReferences, resourceVersion, timestamps) and ``status``; a PodGroup whole (it is small);
a job's ``spec`` without its pod templates (replica counts, run policy, trainer, runtime
patches); a pod's ``spec.nodeName`` alone. A reader of anything else must read the object
with a GET (as the deletion and the worker's waits do), or be added here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_gang.kinds import JobKind

if TYPE_CHECKING:
    from airflow_gang.hooks.kinds import WatchKind

JsonDict = dict[str, Any]


def projected(kind: WatchKind, obj: JsonDict, job_kind: JobKind) -> JsonDict:
    """``obj`` as the cache keeps it (modified in place and returned: the decoded event is ours)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    if kind == "pod":
        node = (obj.get("spec") or {}).get("nodeName")
        obj["spec"] = {"nodeName": node} if node else {}
    elif kind == job_kind.watch_name:
        _drop_templates(obj.get("spec") or {}, job_kind)
    return obj


def _drop_templates(spec: JsonDict, job_kind: JobKind) -> None:
    """A job's replica specs without their pod templates (the bulk of a PyTorchJob)."""
    replicas = spec.get(job_kind.replica_specs_field)
    if not isinstance(replicas, dict):
        return
    for replica in replicas.values():
        if isinstance(replica, dict):
            replica.pop("template", None)
