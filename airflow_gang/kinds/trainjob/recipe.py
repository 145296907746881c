"""A TrainJob's `JobRecipe`, and the gang mode its runtime gives it."""

from __future__ import annotations

from typing import Any

from airflow_gang.exceptions import GangSpecError
from airflow_gang.kinds.recipe import JobRecipe
from airflow_gang.kinds.trainjob.kind import TRAINJOB, runtime_policy_mode
from airflow_gang.kinds.trainjob.spec import TrainJobSpec

JsonDict = dict[str, Any]


def trainjob_recipe(
    spec: TrainJobSpec, gang_scheduling: str, queue: str | None, *, expected_queue: str | None = None
) -> JobRecipe:
    """A TrainJob's recipe; ``gang_scheduling`` is ``trainer`` when its runtime has a Volcano
    ``podGroupPolicy``, else ``disabled`` (`runtime_gang_mode`)."""
    return JobRecipe(
        TRAINJOB,
        gang_scheduling,
        queue,
        lambda name, namespace, labels: spec.build_trainjob(name, namespace, extra_labels=labels),
        expected_queue=expected_queue,
    )


def runtime_gang_mode(runtime: JsonDict) -> str:
    """``trainer`` when the runtime's ``podGroupPolicy`` is Volcano's, ``disabled`` without one.

    :raises GangSpecError: for another policy (``coscheduling``): its PodGroups are not Volcano's.
    """
    mode = runtime_policy_mode(runtime)
    if mode is not None:
        return mode
    policy = (runtime.get("spec") or {}).get("podGroupPolicy") or {}
    name = (runtime.get("metadata") or {}).get("name")
    raise GangSpecError(
        f"runtime={name!r} gang-schedules with {', '.join(sorted(policy))}, not Volcano: this provider waits "
        "for Volcano PodGroups; use a runtime with podGroupPolicy.volcano (e.g. torch-distributed as "
        "docs/guides/real-cluster.md installs it)",
        field="runtime",
    )
