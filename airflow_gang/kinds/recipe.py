"""`JobRecipe`: what submission needs to know to create one kind of gang job.

Submission (`airflow_gang.jobs.submission`) takes over an earlier try's job or creates a new one
the same way for every kind; what differs is the kind, the gang mode, the queue, and how the
manifests are built, which each kind's ``recipe`` module says (a PyTorchJob's with the
provider's PodGroup in ``provider`` mode; a TrainJob's never with one of ours: Trainer's Volcano
plugin makes it, from the runtime's ``podGroupPolicy``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_gang.kinds.base import JobKind

JsonDict = dict[str, Any]
Build = Callable[[str, str, dict[str, str]], JsonDict]


def _no_podgroup(name: str, namespace: str, labels: dict[str, str]) -> JsonDict | None:
    return None


@dataclass(frozen=True)
class JobRecipe:
    """One kind of job, ready to build.

    :param job_kind: the kind.
    :param gang_scheduling: the gang mode (``provider``, ``training-operator``, ``trainer``,
        ``disabled``); ``provider`` means the recipe builds the PodGroup itself.
    :param queue: the Volcano queue the job asks for (for log lines; None without gangs).
    :param build_job: ``(name, namespace, identity labels) -> manifest``.
    :param build_podgroup: the same for the provider's PodGroup, None when there is none.
    :param expected_queue: the queue the task asked for, which its PodGroup must be in when it
        appears (a controller or webhook may put it elsewhere: the wait then fails at once);
        None checks nothing (the queue was only defaulted, or the PodGroup is the provider's own).
    """

    job_kind: JobKind
    gang_scheduling: str
    queue: str | None
    build_job: Build
    build_podgroup: Callable[[str, str, dict[str, str]], JsonDict | None] = _no_podgroup
    expected_queue: str | None = None


def recipe_of(spec: Any) -> JobRecipe:
    """``spec`` if it is a recipe, else the recipe its ``recipe()`` gives (a `GangJobSpec`'s)."""
    return spec if isinstance(spec, JobRecipe) else spec.recipe()
