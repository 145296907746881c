"""``@task.trainjob``: a Python function run as a gang-scheduled Kubeflow TrainJob, one call per node.

The TrainJob counterpart of ``@task.pytorchjob``. Built on `TrainJobOperator` (everything it does
applies: validation before any API call, the runtime and queue checks, the admission wait and
timeout, ``retry_policy``, deferral, links, reattach, cleanup), with Airflow's TaskFlow machinery
for the call syntax, templating, XComArg arguments and ``.partial()``/``.expand()``.

Every node runs the function (``num_proc_per_node`` > 1: that many local processes per node);
Trainer's torch runtime gives the nodes torchrun's ``PET_*`` variables, from which the bootstrap
sets up ``torch.distributed`` when torch is installed. The task's ``return_value`` is the
function's return value on global rank 0, read from rank 0's pod log (its pod is found among the
TrainJob's pods: its name is not derivable); the TrainJob's result dict is the XCom
`JOB_RESULT_XCOM_KEY` (see `airflow_gang.decorators.replica_task`, shared with
``@task.pytorchjob``).

A function that raises fails the task with its error, its traceback and the node (rank) it ran
on, once the TrainJob has failed. When that is the runtime's: Trainer's ``torch-distributed``
leaves Kubernetes' Job defaults (``restartPolicy: OnFailure``, ``backoffLimit: 6``), so the node
is restarted, with a growing back-off, six times first, and a TrainJob cannot patch those fields.
To fail at the first exception, name a runtime of your own whose node Job sets
``backoffLimit: 0`` and whose pod sets ``restartPolicy: Never`` (``runtime=``).
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
from airflow_gang.operators.train_job import TrainJobOperator

__all__ = [
    "JOB_RESULT_XCOM_KEY",
    "RESULT_LOG_LINES",
    "FunctionReturnValueMissing",
    "TrainJobDecoratedOperator",
    "trainjob_task",
]


class TrainJobDecoratedOperator(ReplicaFunctionOperator, TrainJobOperator):
    """The operator behind ``@task.trainjob``: `TrainJobOperator` running a function on every node.

    Takes `TrainJobOperator`'s arguments (``num_nodes``, ``resources_per_node``,
    ``num_proc_per_node``, ``runtime``, ``queue``, ``image``, ``env``, ``pod_template``...)
    except ``command``, ``args``, ``wait_for_completion`` and ``wait_for_admission``, plus
    ``python``, ``min_python`` and ``backend`` (see `ReplicaFunctionOperator`). Without
    ``image`` the nodes run the runtime's image (``torch-distributed``'s holds PyTorch).
    """

    custom_operator_name = "@task.trainjob"
    template_fields: Sequence[str] = (
        *DecoratedOperator.template_fields,
        *(name for name in TrainJobOperator.template_fields if name not in ("command", "args")),
        "python",
    )
    template_fields_renderers = {
        **TrainJobOperator.template_fields_renderers,
        **DecoratedOperator.template_fields_renderers,
    }


def trainjob_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.trainjob``: run the decorated function on every node of a gang-scheduled TrainJob.

    Takes `TrainJobDecoratedOperator`'s arguments and ``multiple_outputs``; returns rank 0's
    return value.
    """
    # Airflow's task mapping would make queue= the executor queue of a mapped task: the Volcano
    # queue goes by another name (executor_queue= sets Airflow's).
    if "queue" in kwargs:
        kwargs["volcano_queue"] = kwargs.pop("queue")
    return task_decorator_factory(
        python_callable=python_callable, decorated_operator_class=TrainJobDecoratedOperator, **kwargs
    )
