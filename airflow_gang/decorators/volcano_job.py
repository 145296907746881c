"""``@task.vcjob``: a Python function run as a gang-scheduled Volcano Job, one call per pod.

The Volcano Job counterpart of ``@task.pytorchjob``. Built on `VolcanoJobOperator` (everything it
does applies: validation before any API call, the queue check, the admission wait and timeout,
``retry_policy``, deferral, links, reattach, cleanup, Volcano's own ``policies`` and
``max_retry``), with Airflow's TaskFlow machinery for the call syntax, templating, XComArg
arguments and ``.partial()``/``.expand()``.

Every pod runs the function; Volcano's ``pytorch`` plugin gives each ``MASTER_ADDR``,
``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK`` (the ``master`` task's pod is rank 0), from which the
bootstrap sets up ``torch.distributed`` when torch is installed. The task's ``return_value`` is
the function's return value on rank 0, read from its pod's log; the job's result dict is the
XCom `JOB_RESULT_XCOM_KEY` (see `airflow_gang.decorators.replica_task`).

A function that raises fails its pod (``restartPolicy: Never``); what follows is the job's
policies' call: with none, Volcano keeps the job running until every pod has ended, then fails
it; with ``{"event": "PodFailed", "action": "RestartJob"}`` it restarts up to ``max_retry``
times. The task then fails with the function's error, its traceback and the task and index it
ran on. Tasks given with ``tasks=`` run the function too, unless they name a command of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory

from airflow_gang.decorators.replica_task import (
    JOB_RESULT_XCOM_KEY,
    RESULT_LOG_LINES,
    FunctionReturnValueMissing,
    ReplicaFunctionOperator,
)
from airflow_gang.kinds.vcjob.operator import VolcanoJobOperator

__all__ = [
    "JOB_RESULT_XCOM_KEY",
    "RESULT_LOG_LINES",
    "FunctionReturnValueMissing",
    "VolcanoJobDecoratedOperator",
    "vcjob_task",
]


class VolcanoJobDecoratedOperator(ReplicaFunctionOperator, VolcanoJobOperator):
    """The operator behind ``@task.vcjob``: `VolcanoJobOperator` running a function on every pod.

    Takes `VolcanoJobOperator`'s arguments (``workers``, ``resources``, ``tasks``, ``queue``,
    ``image``, ``env``, ``policies``, ``max_retry``, ``pod_template``...) except ``command``,
    ``args``, ``wait_for_completion`` and ``wait_for_admission``, plus ``python``, ``min_python``
    and ``backend`` (see `ReplicaFunctionOperator`).
    """

    custom_operator_name = "@task.vcjob"
    template_fields: Sequence[str] = (
        *DecoratedOperator.template_fields,
        *(name for name in VolcanoJobOperator.template_fields if name not in ("command", "args")),
        "python",
    )
    template_fields_renderers = {
        **VolcanoJobOperator.template_fields_renderers,
        **DecoratedOperator.template_fields_renderers,
    }


def vcjob_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.vcjob``: run the decorated function on every pod of a gang-scheduled Volcano Job.

    Takes `VolcanoJobDecoratedOperator`'s arguments and ``multiple_outputs``; returns rank 0's
    return value.
    """
    # Airflow's task mapping would make queue= the executor queue of a mapped task: the Volcano
    # queue goes by another name (executor_queue= sets Airflow's).
    if "queue" in kwargs:
        kwargs["volcano_queue"] = kwargs.pop("queue")
    return task_decorator_factory(
        python_callable=python_callable, decorated_operator_class=VolcanoJobDecoratedOperator, **kwargs
    )
