"""``@task.pytorchjob``: a Python function run as a gang-scheduled PyTorchJob, one call per replica.

Built on `PyTorchJobOperator` (everything it does applies: validation before any API call, the
PodGroup, the admission wait and timeout, ``retry_policy``, deferral, links, reattach, cleanup),
with Airflow's TaskFlow machinery (`DecoratedOperator`, ``task_decorator_factory``) for the call
syntax, templating, XComArg arguments and ``.partial()``/``.expand()``/``.expand_kwargs()``.

XCom contract: the task's ``return_value`` is the function's return value on global rank 0 (with
``multiple_outputs``, one XCom per key as for ``@task``); the job's result dict
(`PyTorchJobOperator`'s return value: name, queue, timeline, replicas...) is the XCom
`JOB_RESULT_XCOM_KEY`; ``job_name``/``job_namespace`` are pushed as by the operator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory
from airflow.sdk.definitions.context import KNOWN_CONTEXT_KEYS

from airflow_gang.decorators.function_source import FunctionSource
from airflow_gang.decorators.payload import (
    PAYLOAD_ENV,
    call_arguments,
    encode_payload,
    parse_min_python,
    replica_command,
)
from airflow_gang.decorators.replica_output import NoReturnValue, replica_error, return_value
from airflow_gang.exceptions import GangError, GangSpecError, PyTorchJobFailed
from airflow_gang.gang_state import master_pod_name
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

JOB_RESULT_XCOM_KEY = "job_result"
# Lines of the master's log searched for the return value: its marker lines come last, followed
# at most by what other local ranks and the interpreter print on their way out.
RESULT_LOG_LINES = 500
# Set by the decorator itself, so not arguments of @task.pytorchjob.
_NOT_ARGUMENTS = {
    "command": "the command runs the function; name the interpreter with python=",
    "args": "the function's arguments are those of the call",
    "wait_for_completion": "the task returns the function's return value, so it waits for it",
    "wait_for_admission": "the task returns the function's return value, so it waits for it",
}


class FunctionReturnValueMissing(GangError):
    """The job succeeded but its master's log holds no return value of the function."""


class PyTorchJobDecoratedOperator(DecoratedOperator, PyTorchJobOperator):
    """The operator behind ``@task.pytorchjob``: `PyTorchJobOperator` running a function.

    Takes `PyTorchJobOperator`'s arguments except ``command``, ``args``,
    ``wait_for_completion`` and ``wait_for_admission``, and:

    :param python: the interpreter on the replicas (templated; default ``python``). The image
        needs nothing else for the bootstrap; the function needs what it imports.
    :param min_python: oldest Python the function may run on (``"3.11"``); the default is what
        its syntax needs, at least 3.9. An older replica fails at once with a clear message.
    :param backend: ``torch.distributed`` backend (default: ``nccl`` with CUDA, else ``gloo``).
    :param restart_policy: default ``ExitCode``: an exception (exit code 1) fails the job at once,
        a signal (a kill, an eviction, 128-255) restarts the replica.
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
    shallow_copy_attrs: Sequence[str] = ("python_callable",)

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        python: str = "python",
        min_python: str | Sequence[int] | None = None,
        backend: str | None = None,
        restart_policy: str = "ExitCode",
        run_policy: dict[str, Any] | None = None,
        replica_resources: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if replica_resources is not None:
            kwargs["resources"] = replica_resources
        for name, reason in _NOT_ARGUMENTS.items():
            if name in kwargs:
                raise GangSpecError(f"@task.pytorchjob takes no {name}=: {reason}", field=name)
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
        parse_min_python(min_python)
        self.function_source = FunctionSource.of(python_callable)  # at parse time: a DAG import error
        self.python = python
        self.min_python = min_python
        self.backend = backend
        super().__init__(
            python_callable=python_callable, restart_policy=restart_policy, run_policy=run_policy, **kwargs
        )

    def execute(self, context: Context) -> Any:
        self._prepare_replicas(context)
        return self._with_function_failures(super().execute, context)

    def execute_complete(self, context: Context, event: dict[str, Any], **wait: Any) -> Any:
        return self._with_function_failures(super().execute_complete, context, event, **wait)

    def _with_function_failures(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except PyTorchJobFailed as error:
            failure = self._function_failure(error)
            if failure is error:
                raise
            # The original stays attached as the cause: the replica's whole log tail, not only
            # the function's traceback.
            raise failure from error

    def _prepare_replicas(self, context: Context) -> None:
        """Command and payload for every replica; `GangSpecError` before anything is sent."""
        source = self.function_source
        min_python = max(source.min_python, parse_min_python(self.min_python) or source.min_python)
        args, kwargs = call_arguments(
            self.python_callable, self.op_args, self.op_kwargs, context, frozenset(KNOWN_CONTEXT_KEYS)
        )
        env = dict(self.env or {})
        if PAYLOAD_ENV in env:
            raise GangSpecError(f"env name {PAYLOAD_ENV!r} is reserved by @task.pytorchjob", field="env")
        env[PAYLOAD_ENV] = encode_payload(source, args, kwargs, min_python=min_python, backend=self.backend)
        self.env = env
        self.command = replica_command(self.python, min_python)
        self.args = None

    def job_succeeded(self, context: Context, job: dict[str, Any], result: dict[str, Any]) -> Any:
        """Push the job's result as `JOB_RESULT_XCOM_KEY`; return the function's value from the log."""
        context["ti"].xcom_push(key=JOB_RESULT_XCOM_KEY, value=result)
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        log = self.hook.read_pod_log(master_pod_name(name), namespace, tail_lines=RESULT_LOG_LINES)
        try:
            return return_value(log)
        except NoReturnValue:
            raise FunctionReturnValueMissing(
                f"PyTorchJob {namespace}/{name} succeeded, but the last {RESULT_LOG_LINES} lines of its "
                f"master's log hold no return value of {self.function_source.name}(): did the replicas run "
                f"this command (a job_template or pod_template that replaces it; the embedded cluster's "
                "script runtime, which runs none: use runtime='process'), or did something print a lot "
                "after the function returned?",
                name=name,
                namespace=namespace,
            ) from None

    def _function_failure(self, error: PyTorchJobFailed) -> PyTorchJobFailed:
        """The failure with the function's own error and traceback first, when a replica printed one."""
        found = replica_error(error.log_tail or "")
        if found is None:
            return error
        pod = f"{error.name}-{(error.replica or '').lower().replace(' ', '-')}"
        message = (
            f"@task.pytorchjob {self.function_source.name}() failed on replica {error.replica} "
            f"({found.where}, pod {pod}, exit code {error.exit_code}) of PyTorchJob "
            f"{error.namespace}/{error.name}: {found.summary}"
        )
        if found.details:
            message += f"\n{found.details}"
        return PyTorchJobFailed(
            message,
            name=error.name,
            namespace=error.namespace,
            replica=error.replica,
            exit_code=error.exit_code,
            reason=error.reason,
            log_tail=error.log_tail,
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
