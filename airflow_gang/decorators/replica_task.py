"""`ReplicaFunctionOperator`: what ``@task.pytorchjob`` and ``@task.trainjob`` share.

A TaskFlow function run on every replica (node) of a gang job: its source and JSON arguments
travel in the pod's environment (`payload`), the bootstrap (`replica_bootstrap`) runs it on each
replica, and rank 0's return value comes back through rank 0's log (`replica_output`). The job
itself is the concrete operator's (`PyTorchJobOperator`, `TrainJobOperator`): this class sits
between Airflow's `DecoratedOperator` and it, in
``class XDecoratedOperator(ReplicaFunctionOperator, XOperator)``.

XCom contract: the task's ``return_value`` is the function's return value on global rank 0 (with
``multiple_outputs``, one XCom per key as for ``@task``); the job's result dict (the operator's
return value: name, queue, timeline, replicas...) is the XCom `JOB_RESULT_XCOM_KEY`;
``job_name``/``job_namespace`` are pushed as by the operator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.decorator import DecoratedOperator
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
from airflow_gang.jobs.outcome import leader_pod
from airflow_gang.operators.gang_job import GangJobOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

JOB_RESULT_XCOM_KEY = "job_result"
# Lines of rank 0's log searched for the return value: its marker lines come last, followed at
# most by what other local ranks and the interpreter print on their way out.
RESULT_LOG_LINES = 500
# Set by the decorator itself, so not arguments of the decorators.
NOT_ARGUMENTS = {
    "command": "the command runs the function; name the interpreter with python=",
    "args": "the function's arguments are those of the call",
    "wait_for_completion": "the task returns the function's return value, so it waits for it",
    "wait_for_admission": "the task returns the function's return value, so it waits for it",
}
_FAILED_POD = re.compile(r"\(pod ([^)\s]+)\)")


class FunctionReturnValueMissing(GangError):
    """The job succeeded but its rank 0's log holds no return value of the function."""


class ReplicaFunctionOperator(DecoratedOperator, GangJobOperator):
    """A gang job operator running a Python function on every replica (see the module docstring).

    :param python: the interpreter on the replicas (templated; default ``python``). The image
        needs nothing else for the bootstrap; the function needs what it imports.
    :param min_python: oldest Python the function may run on (``"3.11"``); the default is what
        its syntax needs, at least 3.9. An older replica fails at once with a clear message.
    :param backend: ``torch.distributed`` backend (default: ``nccl`` with CUDA, else ``gloo``).
    """

    custom_operator_name: str
    shallow_copy_attrs: Sequence[str] = ("python_callable",)
    # The job arguments the decorator sets (the concrete operator's arguments base holds them).
    env: dict[str, Any] | None
    command: list[str] | None
    args: list[str] | None

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        python: str = "python",
        min_python: str | Sequence[int] | None = None,
        backend: str | None = None,
        **kwargs: Any,
    ) -> None:
        for name, reason in NOT_ARGUMENTS.items():
            if name in kwargs:
                raise GangSpecError(f"{self.custom_operator_name} takes no {name}=: {reason}", field=name)
        parse_min_python(min_python)
        self.function_source = FunctionSource.of(python_callable, self.custom_operator_name)  # at parse time
        self.python = python
        self.min_python = min_python
        self.backend = backend
        super().__init__(python_callable=python_callable, **kwargs)

    def execute(self, context: Context) -> Any:
        return self._with_function_failures(super().execute, context)

    def spec_for(self, context: Context) -> Any:
        """The function's command and payload on every replica, for each job this task submits
        (also the new one a resumed task submits after its cleared try deleted the job)."""
        self._prepare_replicas(context)
        return super().spec_for(context)

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
        source, decorator = self.function_source, self.custom_operator_name
        min_python = max(source.min_python, parse_min_python(self.min_python) or source.min_python)
        args, kwargs = call_arguments(
            self.python_callable,
            self.op_args,
            self.op_kwargs,
            context,
            frozenset(KNOWN_CONTEXT_KEYS),
            decorator=decorator,
        )
        env = dict(self.env or {})
        if PAYLOAD_ENV in env:
            raise GangSpecError(f"env name {PAYLOAD_ENV!r} is reserved by {decorator}", field="env")
        env[PAYLOAD_ENV] = encode_payload(
            source, args, kwargs, min_python=min_python, backend=self.backend, decorator=decorator
        )
        self.env = env
        self.command = replica_command(self.python, min_python, decorator)
        self.args = None

    def job_succeeded(self, context: Context, job: dict[str, Any], result: dict[str, Any]) -> Any:
        """Push the job's result as `JOB_RESULT_XCOM_KEY`; return the function's value from rank 0's log."""
        context["ti"].xcom_push(key=JOB_RESULT_XCOM_KEY, value=result)
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        kind = self.job_kind
        pod = leader_pod(self.hook, kind, name, namespace)
        log = (
            ""
            if pod is None
            else self.hook.read_pod_log(pod, namespace, container=kind.container, tail_lines=RESULT_LOG_LINES)
        )
        try:
            return return_value(log)
        except NoReturnValue:
            where = f"the last {RESULT_LOG_LINES} lines of its {kind.leader_title}'s log hold"
            if pod is None:
                where = "its rank-0 pod is gone, so its log holds"
            raise FunctionReturnValueMissing(
                f"{kind.kind} {namespace}/{name} succeeded, but {where} no return value of "
                f"{self.function_source.name}(): did the replicas run this command (a job_template, "
                "pod_template or runtime that replaces it; the embedded cluster's script runtime, which "
                "runs none: use runtime='process'), or did something print a lot after the function "
                "returned?",
                name=name,
                namespace=namespace,
            ) from None

    def _function_failure(self, error: PyTorchJobFailed) -> PyTorchJobFailed:
        """The failure with the function's own error and traceback first, when a replica printed one."""
        found = replica_error(error.log_tail or "")
        if found is None:
            return error
        pod = _FAILED_POD.search(str(error))
        on = self.job_kind.replica_phrase(str(error.replica))
        at = ", ".join(
            part
            for part in (found.where, f"pod {pod.group(1)}" if pod else "", f"exit code {error.exit_code}")
            if part
        )
        message = (
            f"{self.custom_operator_name} {self.function_source.name}() failed on {on} ({at}) of "
            f"{self.job_kind.kind} {error.namespace}/{error.name}: {found.summary}"
        )
        if found.details:
            message += f"\n{found.details}"
        return type(error)(
            message,
            name=error.name,
            namespace=error.namespace,
            replica=error.replica,
            exit_code=error.exit_code,
            reason=error.reason,
            log_tail=error.log_tail,
        )
