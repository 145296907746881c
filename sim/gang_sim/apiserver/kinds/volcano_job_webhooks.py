"""Volcano's admission webhooks for its own ``Job`` (``batch.volcano.sh/v1alpha1``, ``vcjob``).

As volcano-sh/volcano v1.16.0-alpha.1 (commit a4b775ad) runs them in vc-webhook-manager:

- ``mutatejob.volcano.sh`` (CREATE only; ``pkg/webhooks/admission/jobs/mutate/mutate_job.go``
  lines 115-143 ``createPatch``): ``queue: default`` when empty (145-151), ``schedulerName:
  volcano`` (153-159), ``maxRetry: 3`` when 0 (161-167), per task (186-233) the name
  ``default<index>`` when empty, ``dnsPolicy: ClusterFirstWithHostNet`` for a hostNetwork
  template without one, ``minAvailable`` = replicas when unset, ``maxRetry: 3`` when 0; then
  the job's ``minAvailable`` = the sum of the tasks' ``minAvailable`` when 0 (169-184), and the
  ``svc`` plugin added when ``tensorflow``, ``mpi``, ``pytorch`` or ``ray`` is used (``ssh`` too
  for ``mpi``; 235-267).
- ``validatejob.volcano.sh`` (CREATE and UPDATE; ``validate/admit_job.go``): on CREATE
  ``validateJobCreate`` (120-237) collects its messages into one text — no tasks; per task
  ``minAvailable`` above ``replicas``, a duplicated name, invalid policies (``validate/util.go``
  62-123), the first pod's name as a qualified name; the job's name; ``minAvailable`` above the
  total replicas; the job's policies; unknown plugins; the queue missing, not ``Open``, ``root``
  or not a leaf; a ``dependsOn`` cycle. On UPDATE ``validateJobUpdate`` (239-304). Denials are
  400 without a reason: the webhook answers ``Allowed: false`` with a bare message (118).

What is left out: the pod template validation (``validateTaskTemplate``, kube-apiserver's
``ValidatePodTemplate``), partition policies, network topology and volumes; the lists of valid
events and actions in a policy message come in a fixed order where Go's map order varies.
Replicas below 0 and the like never reach the webhook: the CRD schema refuses them (422).
"""

from __future__ import annotations

import re
from typing import Any

from gang_sim.apiserver.errors import WebhookDenied
from gang_sim.apiserver.registry import ClusterView, Operation

JsonDict = dict[str, Any]

MUTATE_WEBHOOK = "mutatejob.volcano.sh"
VALIDATE_WEBHOOK = "validatejob.volcano.sh"
DEFAULT_QUEUE = "default"
DEFAULT_SCHEDULER = "volcano"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_SPEC = "default"
# pkg/controllers/job/plugins/factory.go lines 33-41.
KNOWN_PLUGINS = ("ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "hcclrank", "ray")
SVC_DEPENDENTS = ("tensorflow", "mpi", "pytorch", "ray")
# validate/util.go lines 30-60: the events and actions a policy may name.
VALID_EVENTS = (
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
)
VALID_ACTIONS = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def _tasks(job: JsonDict) -> list[JsonDict]:
    return [t for t in (job.get("spec") or {}).get("tasks") or [] if isinstance(t, dict)]


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def default_vcjob(op: Operation, job: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    """``mutatejob.volcano.sh``: see the module docstring (``createPatch``, lines 115-143)."""
    if op != "CREATE":
        return
    spec = job.setdefault("spec", {})
    if not spec.get("queue"):
        spec["queue"] = DEFAULT_QUEUE
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER
    if not spec.get("maxRetry"):
        spec["maxRetry"] = DEFAULT_MAX_RETRY
    for index, task in enumerate(_tasks(job)):
        if not task.get("name"):
            task["name"] = f"{DEFAULT_TASK_SPEC}{index}"
        pod_spec = (task.get("template") or {}).get("spec") or {}
        if pod_spec.get("hostNetwork") and not pod_spec.get("dnsPolicy"):
            pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
        if not isinstance(task.get("minAvailable"), int):
            task["minAvailable"] = _int(task.get("replicas"))
        if not task.get("maxRetry"):
            task["maxRetry"] = DEFAULT_MAX_RETRY
    if not spec.get("minAvailable"):
        spec["minAvailable"] = sum(_int(t.get("minAvailable")) for t in _tasks(job))
    plugins = spec.get("plugins")
    if isinstance(plugins, dict):
        if any(name in plugins for name in SVC_DEPENDENTS):
            plugins.setdefault("svc", [])
        if "mpi" in plugins:
            plugins.setdefault("ssh", [])


def qualified_name_errors(value: str) -> list[str]:
    """apimachinery's ``IsQualifiedName`` for a name without a prefix."""
    errors: list[str] = []
    if not value:
        return ["name part must be non-empty", _QUALIFIED_NAME_MESSAGE]
    if len(value) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(value):
        errors.append(_QUALIFIED_NAME_MESSAGE)
    return errors


def _go_list(items: list[str] | tuple[str, ...]) -> str:
    return "[" + " ".join(items) + "]"


def _events(policy: JsonDict) -> list[str]:
    """``getEventList``: ``events`` then ``event``, duplicates dropped (util.go lines 125-144)."""
    listed = [str(e) for e in policy.get("events") or []]
    if policy.get("event"):
        listed.append(str(policy["event"]))
    return list(dict.fromkeys(listed))


def policy_errors(policies: list[Any], path: str) -> list[str]:
    """``validatePolicies`` (util.go lines 62-123): the errors, each as multierror lists it."""
    errors: list[str] = []
    seen_events: set[str] = set()
    seen_codes: set[int] = set()
    for policy in [p for p in policies if isinstance(p, dict)]:
        has_event = bool(policy.get("event") or policy.get("events"))
        code = policy.get("exitCode")
        code = code if isinstance(code, int) else None
        if has_event and code is not None:
            errors.append("must not specify event and exitCode simultaneously")
            break
        if not has_event and code is None:
            errors.append("either event and exitCode should be specified")
            break
        if has_event:
            stop = False
            for event in _events(policy):
                action = str(policy.get("action") or "")
                if event not in VALID_EVENTS:
                    errors.append(f'{path}: Invalid value: "{event}": invalid policy event')
                    stop = True
                elif action not in VALID_ACTIONS:
                    errors.append(f'{path}: Invalid value: "{action}": invalid policy action')
                    stop = True
                elif event in seen_events:
                    errors.append(f"duplicate event {event}  across different policy")
                    stop = True
                else:
                    seen_events.add(event)
                if stop:
                    break
            if stop:
                break
        elif code is not None:
            if code == 0:
                errors.append("0 is not a valid error code")
                break
            if code in seen_codes:
                errors.append(f"duplicate exitCode {code}")
                break
            seen_codes.add(code)
    if "*" in seen_events and len(seen_events) > 1:
        errors.append("if there's * here, no other policy should be here")
    return errors


def _multierror(errors: list[str]) -> str:
    """hashicorp/go-multierror's ``ListFormatFunc``."""
    if len(errors) == 1:
        return f"1 error occurred:\n\t* {errors[0]}\n\n"
    points = "\n\t".join(f"* {error}" for error in errors)
    return f"{len(errors)} errors occurred:\n\t{points}\n\n"


def _policies_message(policies: list[Any], path: str) -> str:
    errors = policy_errors(policies, path)
    if not errors:
        return ""
    return (
        _multierror(errors)
        + f" valid events are {_go_list(VALID_EVENTS)}, valid actions are {_go_list(VALID_ACTIONS)};"
    )


def _has_cycle(tasks: list[JsonDict]) -> bool:
    names = [str(t.get("name")) for t in tasks]
    depends = {str(t.get("name")): list(((t.get("dependsOn") or {}).get("name")) or []) for t in tasks}
    done: set[str] = set()
    visiting: set[str] = set()

    def visit(name: str) -> bool:
        if name in done:
            return False
        if name in visiting:
            return True
        visiting.add(name)
        cyclic = any(visit(dep) for dep in depends.get(name, []) if dep in depends)
        visiting.discard(name)
        done.add(name)
        return cyclic

    return any(visit(name) for name in names)


def create_message(job: JsonDict, view: ClusterView) -> str:
    """``validateJobCreate`` (admit_job.go lines 120-237): the denial text, "" when admitted."""
    tasks = _tasks(job)
    spec = job.get("spec") or {}
    name = str((job.get("metadata") or {}).get("name") or "")
    if not tasks:
        return "No task specified in job spec"
    parts: list[str] = []
    plugins = spec.get("plugins") or {}
    if "mpi" in plugins:
        master = "master"
        for argument in plugins.get("mpi") or []:
            if str(argument).startswith("--master="):
                master = str(argument).partition("=")[2]
        if master not in [t.get("name") for t in tasks]:
            return "The specified mpi master task was not found"
    seen: set[str] = set()
    total = 0
    for index, task in enumerate(tasks):
        task_name = str(task.get("name") or "")
        replicas = _int(task.get("replicas"))
        if isinstance(task.get("minAvailable"), int) and task["minAvailable"] > replicas:
            parts.append(f" 'minAvailable' is greater than 'replicas' in task: {task_name}, job: {name};")
        total += replicas
        if task_name in seen:
            parts.append(f" duplicated task name {task_name};")
            break
        seen.add(task_name)
        parts.append(_policies_message(task.get("policies") or [], "spec.tasks.policies"))
        pod_name = f"{name}-{task_name}-{index}"  # the task's index, as the webhook spells it
        errors = qualified_name_errors(pod_name)
        if errors:
            parts.append(f"create pod with name {pod_name} validate failed {_go_list(errors)};")
    errors = qualified_name_errors(name)
    if errors:
        parts.append(f"create job with name {name} validate failed {_go_list(errors)}")
    if total < _int(spec.get("minAvailable")):
        parts.append(" job 'minAvailable' should not be greater than total replicas in tasks;")
    parts.append(_policies_message(spec.get("policies") or [], "spec.policies"))
    for plugin in plugins:
        if plugin not in KNOWN_PLUGINS:
            parts.append(f" unable to find job plugin: {plugin};")
    parts.append(_queue_message(str(spec.get("queue") or ""), view))
    if any((t.get("dependsOn") or {}).get("name") for t in tasks) and _has_cycle(tasks):
        parts.append(" job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);")
    return "".join(parts)


def _queue_message(queue_name: str, view: ClusterView) -> str:
    queue = view.lookup("scheduling.volcano.sh", "queues", "", queue_name)
    if queue is None:
        return f' unable to find job queue: queue.scheduling.volcano.sh "{queue_name}" not found;'
    parts = []
    state = str((queue.get("status") or {}).get("state") or "")
    if state != "Open":
        parts.append(
            f" can only submit job to queue with state `Open`, queue `{queue_name}` status is `{state}`;"
        )
    if queue_name == "root":
        parts.append(" can not submit job to root queue;")
    else:
        queues = view.objects("scheduling.volcano.sh", "queues")
        children = [q for q in queues if (q.get("spec") or {}).get("parent") == queue_name]
        if children:
            parts.append(
                f" can only submit job to leaf queue, queue `{queue_name}` has {len(children)} child queues;"
            )
    return "".join(parts)


def update_message(old: JsonDict, new: JsonDict) -> str:
    """``validateJobUpdate`` (admit_job.go lines 239-304): the first error, "" when admitted."""
    total = 0
    for task in _tasks(new):
        task_name = task.get("name")
        replicas = _int(task.get("replicas"))
        if replicas < 0:
            return f"'replicas' must be >= 0 in task: {task_name}"
        low = task.get("minAvailable")
        if isinstance(low, int):
            if low < 0:
                return f"'minAvailable' must be >= 0 in task: {task_name}"
            if low > replicas:
                return f"'minAvailable' must be <= 'replicas' in task: {task_name}"
        total += replicas
    new_spec, old_spec = dict(new.get("spec") or {}), dict(old.get("spec") or {})
    if _int(new_spec.get("minAvailable")) > total:
        return "job 'minAvailable' must not be greater than total replicas"
    if _int(new_spec.get("minAvailable")) < 0:
        return "job 'minAvailable' must be >= 0"
    if len(_tasks(new)) != len(_tasks(old)):
        return "job updates may not add or remove tasks"
    # Only minAvailable, priorityClassName and the tasks' replicas/minAvailable may change.
    for key in ("minAvailable", "priorityClassName"):
        new_spec.pop(key, None)
        old_spec.pop(key, None)
    new_spec["tasks"] = [_without(t, "replicas", "minAvailable") for t in _tasks(new)]
    old_spec["tasks"] = [_without(t, "replicas", "minAvailable") for t in _tasks(old)]
    if new_spec != old_spec:
        return (
            "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` "
            "and `PriorityClassName`"
        )
    return ""


def _without(task: JsonDict, *keys: str) -> JsonDict:
    return {key: value for key, value in task.items() if key not in keys}


def admit_vcjob(op: Operation, job: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    """``validatejob.volcano.sh`` (``AdmitJobs``, admit_job.go lines 86-118)."""
    if op == "CREATE":
        message = create_message(job, view)
    elif old is not None:
        message = update_message(old, job)
    else:
        return
    if message.strip():
        raise WebhookDenied(VALIDATE_WEBHOOK, message.strip())
