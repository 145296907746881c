"""`PyTorchJobOperator`: submit a gang-scheduled Kubeflow PyTorchJob, wait for admission, then for training.

The flow and its guarantees are `GangJobOperator`'s (DESIGN.md §3); the job arguments are
`GangJobArguments`'. What is PyTorchJob's own: the training-operator's API must be served (and
Volcano's unless ``gang_scheduling="disabled"``), the Volcano queue must exist and be Open, and
in ``provider`` mode the provider creates the PodGroup itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.job_kinds import PYTORCHJOB, JobKind
from airflow_gang.jobs import observation
from airflow_gang.jobs.outcome import ON_FINISH_ACTIONS
from airflow_gang.jobs.recipe import JobRecipe, pytorchjob_recipe
from airflow_gang.operators.gang_job import GangJobOperator
from airflow_gang.operators.job_arguments import GangJobArguments
from airflow_gang.operators.state_store import STATE_STORE_JOB_KEY, STATE_STORE_PROGRESS_KEY
from airflow_gang.spec import GangJobSpec

__all__ = ["ON_FINISH_ACTIONS", "STATE_STORE_JOB_KEY", "STATE_STORE_PROGRESS_KEY", "PyTorchJobOperator"]


class PyTorchJobOperator(GangJobOperator, GangJobArguments):
    """Run a Kubeflow PyTorchJob gang-scheduled by Volcano and wait for it.

    The job's own arguments (``image``, ``workers``, ``resources``, ``queue``,
    ``gang_scheduling``, ``admission_timeout``, ``job_name``, ``namespace``,
    ``kubernetes_conn_id``, templates...) are documented on `GangJobArguments`; how to wait
    (``wait_for_completion``, ``deferrable``, ``delete_on_finish``, ``get_logs``,
    ``api_unavailable_timeout``...) on `GangJobOperator`. All are validated before anything is
    sent to the cluster.
    """

    job_kind: ClassVar[JobKind] = PYTORCHJOB

    def build_spec(self) -> GangJobSpec:
        spec: GangJobSpec = super().build_spec()
        return spec

    def prepare(self, hook: GangJobHook, spec: Any, namespace: str) -> JobRecipe:
        recipe = pytorchjob_recipe(spec)
        gang = recipe.gang_scheduling
        hook.check_api(require_volcano=gang != "disabled")
        if gang != "disabled":
            observation.check_queue(hook, spec.effective_queue)
        return recipe

    @property
    def gang_mode(self) -> str | None:
        return self._gang or self.gang_scheduling
