"""``@task.pytorchjob``: a Python function run as a gang-scheduled PyTorchJob, one call per replica.

Built on `PyTorchJobOperator` (everything it does applies: validation before any API call, the
PodGroup, the admission wait and timeout, ``retry_policy``, deferral, links, reattach, cleanup),
with Airflow's TaskFlow machinery (`DecoratedOperator`, ``task_decorator_factory``) for the call
syntax, templating, XComArg arguments and ``.partial()``/``.expand()``/``.expand_kwargs()``.

What it shares with ``@task.trainjob`` (the payload, rank 0's return value from its log, the
function's failures, the XCom contract) is `airflow_gang.decorators.replica_task`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory

from airflow_gang.decorators.replica_task import (
    JOB_RESULT_XCOM_KEY,
    RESULT_LOG_LINES,
    FunctionReturnValueMissing,
    ReplicaFunctionOperator,
)
from airflow_gang.exceptions import GangSpecError
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

__all__ = [
    "JOB_RESULT_XCOM_KEY",
    "RESULT_LOG_LINES",
    "FunctionReturnValueMissing",
    "PyTorchJobDecoratedOperator",
    "pytorchjob_task",
]


class PyTorchJobDecoratedOperator(ReplicaFunctionOperator, PyTorchJobOperator):
    """The operator behind ``@task.pytorchjob``: `PyTorchJobOperator` running a function.

    Takes `PyTorchJobOperator`'s arguments except ``command``, ``args``,
    ``wait_for_completion`` and ``wait_for_admission``, ``python``, ``min_python`` and
    ``backend`` (see `ReplicaFunctionOperator`), and:

    :param restart_policy: default ``ExitCode``: an exception (exit code 1) fails the job at once,
        a signal (a kill, an eviction, 128-255) restarts the replica.
    :param replica_resources: the same as ``resources`` (the name the operator stores it under).
    :param run_policy: default ``{"clean_pod_policy": "Running"}``: replicas still running when
        the job ends (waiting for a peer that raised) are stopped. ``All`` is refused: it would
        delete the master's log, which holds the return value.
    """

    custom_operator_name = "@task.pytorchjob"
    template_fields: Sequence[str] = (
        *DecoratedOperator.template_fields,
        *(name for name in PyTorchJobOperator.template_fields if name not in ("command", "args")),
        "python",
    )
    template_fields_renderers = {
        **PyTorchJobOperator.template_fields_renderers,
        **DecoratedOperator.template_fields_renderers,
    }

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        restart_policy: str = "ExitCode",
        run_policy: dict[str, Any] | None = None,
        replica_resources: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if replica_resources is not None:
            kwargs["resources"] = replica_resources
        run_policy = {"clean_pod_policy": "Running"} if run_policy is None else run_policy
        if isinstance(run_policy, Mapping) and "All" in (
            run_policy.get("clean_pod_policy"),
            run_policy.get("cleanPodPolicy"),
        ):
            raise GangSpecError(
                "run_policy clean_pod_policy='All' is refused by @task.pytorchjob: it deletes the master's "
                "pod, and with it the log that carries the function's return value; use 'Running'",
                field="run_policy",
            )
        super().__init__(
            python_callable=python_callable, restart_policy=restart_policy, run_policy=run_policy, **kwargs
        )


def pytorchjob_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.pytorchjob``: run the decorated function on every replica of a gang-scheduled PyTorchJob.

    Takes `PyTorchJobDecoratedOperator`'s arguments (those of `PyTorchJobOperator`, plus
    ``python``, ``min_python``, ``backend``) and ``multiple_outputs``.
    """
    # Airflow's task mapping would make resources= the executor's Resources and queue= the executor
    # queue of a mapped task: the replicas' resources and the Volcano queue go by other names.
    for given, stored in (("resources", "replica_resources"), ("queue", "volcano_queue")):
        if given in kwargs:
            kwargs[stored] = kwargs.pop(given)
    return task_decorator_factory(
        python_callable=python_callable, decorated_operator_class=PyTorchJobDecoratedOperator, **kwargs
    )
