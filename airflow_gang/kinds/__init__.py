"""The kinds of gang job the provider runs, each in its own package, and their registry.

- `airflow_gang.kinds.base`: `JobKind`, the one interface through which the rest of the provider
  reads a kind (facts, and what its objects say);
- `airflow_gang.kinds.pytorchjob`: Kubeflow's PyTorchJob (the training-operator);
- `airflow_gang.kinds.trainjob`: Kubeflow Trainer v2's TrainJob;
- `airflow_gang.kinds.vcjob`: Volcano's own Job (``VolcanoJob`` here: its ``kind`` is ``Job``).

Each kind's package holds its `JobKind` (``kind``), its validated spec (``spec``), the recipe that
builds its manifests and checks the cluster before submitting (``recipe``), and its operator
(``operator``). Importing this package imports only the pure ``kind`` modules.
"""

from __future__ import annotations

from typing import Any

from airflow_gang.kinds.base import ChildResource, JobKind
from airflow_gang.kinds.pytorchjob.kind import PYTORCHJOB
from airflow_gang.kinds.trainjob.kind import TRAINJOB
from airflow_gang.kinds.vcjob.kind import VCJOB

__all__ = [
    "ANY_JOB_KIND",
    "DEFAULT_JOB_KIND",
    "JOB_KINDS",
    "PYTORCHJOB",
    "TRAINJOB",
    "VCJOB",
    "ChildResource",
    "JobKind",
    "job_kind_describing",
    "job_kind_named",
    "job_kind_of_object",
    "job_kind_watched_as",
]

JOB_KINDS: dict[str, JobKind] = {job_kind.kind: job_kind for job_kind in (PYTORCHJOB, TRAINJOB, VCJOB)}
# The kind of a job whose record, event or state-store entry names none: provider versions
# before TrainJob support wrote only PyTorchJobs.
DEFAULT_JOB_KIND: JobKind = PYTORCHJOB
# "PyTorchJob, TrainJob or VolcanoJob": a job of any kind, in messages and API descriptions.
ANY_JOB_KIND = " or ".join([", ".join(list(JOB_KINDS)[:-1]), list(JOB_KINDS)[-1]])
JsonDict = dict[str, Any]


def job_kind_named(name: str | None) -> JobKind:
    """The `JobKind` of a ``kind`` (``PyTorchJob``, ``TrainJob``, ``VolcanoJob``; None:
    `DEFAULT_JOB_KIND`)."""
    if name is None:
        return DEFAULT_JOB_KIND
    try:
        return JOB_KINDS[name]
    except KeyError:
        raise ValueError(f"job kind {name!r}: use one of {', '.join(JOB_KINDS)}") from None


def job_kind_watched_as(watch_name: str) -> JobKind | None:
    """The `JobKind` whose `JobKind.watch_name` is ``watch_name`` (``pytorchjob``), else None."""
    return next((job_kind for job_kind in JOB_KINDS.values() if job_kind.watch_name == watch_name), None)


def job_kind_describing(obj: JsonDict) -> JobKind | None:
    """The `JobKind` of a job object or an ownerReference, by its ``apiVersion`` and ``kind``
    (Volcano's ``Job`` is told from batch/v1's by its group); an object naming only the
    provider's name for a kind (a record) by that; else None (not a kind of ours)."""
    for job_kind in JOB_KINDS.values():
        if job_kind.describes(obj):
            return job_kind
    return JOB_KINDS.get(str(obj.get("kind")))


def job_kind_of_object(obj: JsonDict) -> JobKind:
    """`job_kind_describing`, else `DEFAULT_JOB_KIND` (objects written before there were kinds)."""
    return job_kind_describing(obj) or DEFAULT_JOB_KIND
