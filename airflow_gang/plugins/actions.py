"""What a person may do to a job from the page: delete it, suspend it, resume it.

- ``delete``: the job and its PodGroup, exactly as the task's ``on_kill`` deletes them
  (`airflow_gang.jobs.cleanup.delete_gang`, uid-guarded): the task waiting for it then fails
  with `GangJobLost`, or, if it has retries left, trains again with a new job.
- ``suspend`` / ``resume``: a PyTorchJob's ``spec.runPolicy.suspend`` (training-operator >= 1.7),
  a TrainJob's ``spec.suspend`` (`GangJobHook.set_job_suspended`): a suspended job keeps its
  place in Airflow but holds no pods; resuming it lets it queue again.

Only jobs an Airflow task submitted can be changed here, and only by a user whom Airflow's
auth manager lets change that DAG's task instances (what clearing or marking the task needs).
Every action is written to Airflow's audit log (the ``log`` table the UI's "Audit Log" shows).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from airflow_gang.jobs import cleanup
from airflow_gang.plugins.cluster_reader import JobRecord
from airflow_gang.plugins.errors import PageError
from airflow_gang.plugins.identity import TaskIdentity

log = logging.getLogger(__name__)
JsonDict = dict[str, Any]
ACTIONS = ("delete", "suspend", "resume")
AUDIT_EVENT_PREFIX = "gang_job_"
# Header the page sends with every action: a form on another site cannot set it, so a
# cross-site request riding on the Airflow session cookie is refused.
CSRF_HEADER = "X-Requested-By"


def check_allowed(action: str, record: JobRecord, summary: JsonDict) -> None:
    """Refuse an action that makes no sense for the job as it is now (409), before any write."""
    if action not in ACTIONS:
        raise PageError(404, "not_found", f"unknown action {action!r}: choose from {', '.join(ACTIONS)}")
    suspended = bool(summary.get("suspended"))
    finished = summary["state"] in ("succeeded", "failed")
    name = f"{record.kind} {record.namespace}/{record.name}"
    if action in ("suspend", "resume") and summary.get("suspendable") is False:
        raise PageError(
            409,
            "conflict",
            f"{name} cannot be suspended or resumed from this page: delete it, or run it again",
        )
    if action == "suspend" and (finished or suspended):
        raise PageError(409, "conflict", f"{name} is {'suspended' if suspended else 'finished'} already")
    if action == "resume" and not suspended:
        raise PageError(409, "conflict", f"{name} is not suspended, so there is nothing to resume")


def perform(action: str, record: JobRecord, summary: JsonDict, hook: Any, user: str) -> str:
    """Carry ``action`` out on the cluster; a sentence saying what was done."""
    name, namespace = record.name, record.namespace
    what = f"{record.kind} {namespace}/{name}"
    if action == "delete":
        confirmed = cleanup.delete_gang(
            hook,
            name,
            namespace,
            record.job["metadata"].get("uid"),
            gang_scheduling=summary.get("gang_scheduling"),
            timeout=cleanup.kill_budget_seconds(),
            reason=f"deleted from the Gang jobs page by {user}",
            logger=log,
            job_kind=record.job_kind,
        )
        if not confirmed:
            return f"deletion of {what} requested; not yet confirmed gone"
        return f"{what} and its PodGroup were deleted"
    hook.set_job_suspended(record.job_kind, name, namespace, action == "suspend")
    return f"{what} was {'suspended' if action == 'suspend' else 'resumed'}"


def audit(action: str, identity: TaskIdentity, record: JobRecord, user: str, outcome: str) -> None:
    """One row in Airflow's audit log, on the task instance the job belongs to."""
    try:
        from airflow.models.log import Log
        from airflow.utils.session import create_session

        extra = {
            "kind": record.kind,
            "namespace": record.namespace,
            "name": record.name,
            "uid": record.job["metadata"].get("uid"),
        }
        with create_session() as session:
            session.add(
                Log(
                    event=f"{AUDIT_EVENT_PREFIX}{action}",
                    owner=user,
                    owner_display_name=user,
                    extra=json.dumps({**extra, "outcome": outcome}),
                    dag_id=identity.dag_id,
                    task_id=identity.task_id,
                    run_id=identity.run_id,
                    map_index=identity.map_index,
                    try_number=identity.try_number,
                )
            )
    except Exception as error:  # the action happened; say in the server log what was not recorded
        log.error("gang UI: could not write the audit log entry for %s of %s: %s", action, record.name, error)
