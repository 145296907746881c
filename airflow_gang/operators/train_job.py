"""`TrainJobOperator`: submit a Kubeflow Trainer v2 TrainJob gang-scheduled by Volcano, wait for it.

The flow and its guarantees are `GangJobOperator`'s, shared with `PyTorchJobOperator`: validated
before any API call, reattach or submit by identity labels, admission observed on the PodGroup,
admission timeout → delete → `GangAdmissionTimeout`, deferrable on the triggerer's shared watch
cache, outages ridden out, ``on_kill``, the orphan reaper, rank 0's log in the task log.

What is TrainJob's own (DOMAIN.md §6), checked in `TrainJobOperator.prepare` before submitting:

- Kubeflow Trainer v2 must be served, and the named runtime must exist;
- the runtime decides the gang: with ``podGroupPolicy.volcano`` Trainer's Volcano plugin makes
  the PodGroup (named after the TrainJob, ``minMember`` = every node), so the gang mode is
  ``trainer`` and Volcano and the queue are checked like a PyTorchJob's; without a
  podGroupPolicy it is ``disabled`` (the task warns: such jobs deadlock a shared pool, and their
  admission timeout says so); a ``coscheduling`` policy is refused (this provider follows
  Volcano's PodGroups);
- the queue is where Trainer reads it (`airflow_gang.trainjob_spec`): ``queue=`` (or a user's
  runtime patch naming one), else the annotation ``scheduling.volcano.sh/queue-name`` on the
  runtime's JobSet template (``spec.template.metadata.annotations``; not the runtime's own
  metadata), else ``default``. It must exist and be Open, and goes into the operator's runtime
  patch. A queue the task asked for (given or the runtime's) is checked again when the PodGroup
  appears: in another queue (a webhook such as Volcano's namespace default moved it, or a Trainer
  older than v2.3 ignored the patch) the task fails at once with `GangQueueMismatch`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow_gang.exceptions import GangSpecError
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.job_kinds import TRAINJOB, JobKind
from airflow_gang.jobs import observation
from airflow_gang.jobs.recipe import JobRecipe, trainjob_recipe
from airflow_gang.operators.gang_job import GangJobOperator
from airflow_gang.operators.trainjob_arguments import TrainJobArguments
from airflow_gang.trainjob_spec import TrainJobSpec, runtime_policy_mode, runtime_queue

JsonDict = dict[str, Any]
__all__ = ["TrainJobOperator", "runtime_gang_mode"]
NO_GANG_WARNING = (
    "runtime %r has no podGroupPolicy: TrainJob %s/%s is NOT gang-scheduled. Its nodes' pods are placed one "
    "by one, and several such jobs on a shared pool can each hold part of it and wait for ever; use a "
    "runtime with podGroupPolicy.volcano (the admission timeout ends this wait otherwise)"
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
        "deploy/README.md installs it)",
        field="runtime",
    )


class TrainJobOperator(GangJobOperator, TrainJobArguments):
    """Run a Kubeflow Trainer v2 TrainJob gang-scheduled by Volcano and wait for it.

    The job's arguments (``runtime``, ``num_nodes``, ``resources_per_node``, ``image``,
    ``command``, ``queue``, ``admission_timeout``, ``job_name``...) are documented on
    `TrainJobArguments`; how to wait (``wait_for_completion``, ``deferrable``,
    ``delete_on_finish``, ``get_logs``, ``api_unavailable_timeout``...) on `GangWaitArguments`,
    as for `PyTorchJobOperator`. All are validated before anything is sent to the cluster.

    The result's ``replicas`` is ``{"Node": num_nodes}``; a failure raises `TrainJobFailed` (a
    `PyTorchJobFailed`) naming the failing node's rank, its exit code and its log tail.
    """

    job_kind: ClassVar[JobKind] = TRAINJOB
    ui_color = "#e4f0ff"

    def build_spec(self) -> TrainJobSpec:
        spec: TrainJobSpec = super().build_spec()
        return spec

    def prepare(self, hook: GangJobHook, spec: Any, namespace: str) -> JobRecipe:
        hook.check_api(job_kind=TRAINJOB)
        runtime = hook.get_training_runtime(spec.runtime, spec.runtime_kind, namespace)
        if runtime is None:
            where = "cluster" if spec.runtime_kind == "ClusterTrainingRuntime" else f"namespace {namespace!r}"
            raise GangSpecError(
                f"runtime={spec.runtime!r}: no {spec.runtime_kind} of that name in the {where}; pass an "
                f"existing one (kubectl get {spec.runtime_kind.lower()}s) or install Trainer's runtimes",
                field="runtime",
            )
        gang = runtime_gang_mode(runtime)
        if gang == "disabled":
            self.log.warning(NO_GANG_WARNING, spec.runtime, namespace, self.job_name or "<derived>")
            return trainjob_recipe(spec, gang, None)
        hook.check_api(require_volcano=True, job_kind=TRAINJOB)
        asked = spec.asked_queue or runtime_queue(runtime)
        queue = asked or "default"
        observation.check_queue(hook, queue)
        # The queue goes into the operator's runtime patch, where Trainer reads it, and so the
        # TrainJob names it for its result and the Gang jobs page. Only a queue asked for (given
        # or the runtime's) is checked on the PodGroup: a defaulted one may be moved on purpose
        # by Volcano's webhook to the namespace's queue.
        return trainjob_recipe(spec.model_copy(update={"queue": queue}), gang, queue, expected_queue=asked)
