"""A PyTorchJob's `JobRecipe`: its manifests from `GangJobSpec`, with the provider's PodGroup in
``provider`` mode."""

from __future__ import annotations

from typing import Any

from airflow_gang.kinds.pytorchjob.kind import PYTORCHJOB
from airflow_gang.kinds.recipe import JobRecipe


def pytorchjob_recipe(spec: Any) -> JobRecipe:
    """The recipe of a `GangJobSpec` (typed loosely: the spec imports this module for its
    ``recipe()``)."""
    gang = spec.gang_scheduling.value
    return JobRecipe(
        PYTORCHJOB,
        gang,
        spec.effective_queue if gang != "disabled" else None,
        lambda name, namespace, labels: spec.build_pytorchjob(name, namespace, labels=labels),
        lambda name, namespace, labels: spec.build_podgroup(name, namespace, labels=labels),
    )
