"""Creating a job's PodGroup and PyTorchJob, once, whatever the API answers.

Submission creates PodGroup then PyTorchJob, then makes the job own the PodGroup; a 409 from a
create whose first attempt's reply was lost adopts the object when its labels are ours. When the
PyTorchJob create fails, the new PodGroup is deleted again only if the job was definitely not
created (`job_not_created`): a job whose create reply was lost may be running, and its PodGroup
must stay. A PodGroup left so is settled by the next look: `ensure_podgroup_owner` links it to
the job if there is one, `sweep_orphan_podgroups` deletes it if there is none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.kinds import PODGROUPS, Kind
from airflow_gang.hooks.retrying import RetryPolicy
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.naming import MANAGED_BY_LABEL, MANAGED_BY_VALUE, TRY_NUMBER_LABEL

JsonDict = dict[str, Any]
log = logging.getLogger(__name__)
# Answers that say the request itself was refused, so no attempt of a (retried) create stored the
# object: an attempt that had stored it would make the next one answer 409, which is adopted.
# 408 and 429 are excluded: they follow earlier attempts whose outcome is unknown.
_REFUSED = frozenset(range(400, 500)) - {408, 429}
# The one read that decides whether a failed create stored the job: quick, also on a kill's path.
_READ_BACK_POLICY = RetryPolicy(attempts=2, initial_delay=0.2, max_delay=0.5, quiet=True)
_READ_BACK_SECONDS = 5.0


def is_ours(obj: JsonDict, identity: dict[str, str]) -> bool:
    """Whether an existing object carries this task instance's identity labels (any try)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    keys = [key for key in identity if key != TRY_NUMBER_LABEL]
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE and all(
        labels.get(k) == identity[k] for k in keys
    )


def submit(
    hook: GangJobHook,
    job: JsonDict,
    podgroup: JsonDict | None,
    namespace: str,
    identity: dict[str, str],
    *,
    job_kind: JobKind = DEFAULT_JOB_KIND,
) -> tuple[JsonDict, bool]:
    """Create PodGroup then PyTorchJob, then make the job own the PodGroup.

    Returns the job and whether it already existed (adopted after a 409). If the job create
    fails, the PodGroup created here is deleted again only when the job was definitely not
    created (`job_not_created`); otherwise, and when only the ownerReference could not be set,
    it stays for the next look (see the module docstring): deleting it could take the PodGroup
    of a job that runs.
    """
    name = job["metadata"]["name"]
    created_podgroup: JsonDict | None = None
    if podgroup is not None:
        stored, created = _create_or_adopt(
            PODGROUPS.kind,
            PODGROUPS.resource,
            create=hook.create_podgroup,
            get=hook.get_podgroup,
            body=podgroup,
            namespace=namespace,
            identity=identity,
        )
        created_podgroup = stored if created else None
    try:
        created_job, submitted = _create_or_adopt(
            job_kind.kind,
            Kind.of(job_kind).resource,
            create=lambda body, namespace: hook.create_job(job_kind, body, namespace),
            get=lambda name, namespace: hook.get_job(job_kind, name, namespace),
            body=job,
            namespace=namespace,
            identity=identity,
        )
    except BaseException as error:
        if created_podgroup is not None:
            # Bounded, also on a kill's path: no waiting through an outage here.
            with hook.riding_out(None):
                not_created = job_not_created(hook, error, name, namespace, identity, job_kind=job_kind)
                if not_created:
                    _roll_back_podgroup(hook, created_podgroup, namespace)
            if not not_created:
                log.warning(
                    "the create of PyTorchJob %s/%s failed without saying whether it was stored (%s): "
                    "its PodGroup stays; the next look links it to the job or deletes it",
                    namespace,
                    name,
                    error,
                )
        raise
    if podgroup is not None:
        _make_job_own_podgroup(hook, name, namespace, created_job)
    return created_job, not submitted


def _make_job_own_podgroup(hook: GangJobHook, name: str, namespace: str, job: JsonDict) -> None:
    """Make the new job its PodGroup's controller; a PodGroup gone already is not an error.

    A training-operator started with ``--gang-scheduler-name=volcano`` deletes the PodGroup of a
    suspended job on its first look (and makes its own when the job is resumed); it may do so
    before this patch. Any other deletion leaves a job whose pods wait for a group that is not
    there: the operator with the flag makes one, and without it the admission timeout ends the
    wait.
    """
    try:
        hook.set_podgroup_owner(name, namespace, job)
    except GangApiError as error:
        if error.status != 404:
            raise
        if ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
            log.info(
                "PodGroup %s/%s of the suspended job is gone: the training-operator (started with "
                "--gang-scheduler-name=volcano) deletes it while the job is suspended and makes its own "
                "on resume",
                namespace,
                name,
            )
        else:
            log.warning(
                "PodGroup %s/%s was deleted before its job could own it; a training-operator started "
                "with --gang-scheduler-name=volcano makes its own, any other leaves the job queued "
                "until its admission_timeout",
                namespace,
                name,
            )


def job_create_refused(error: BaseException) -> bool:
    """Whether a failed PyTorchJob create was refused by the API (a 4xx such as 422, 409, 403):
    then no attempt stored it. No answer, a 5xx, 408 or 429 leave the outcome unknown (the reply
    of an attempt that stored the job may have been lost)."""
    return isinstance(error, GangApiError) and error.status in _REFUSED


def job_not_created(
    hook: GangJobHook,
    error: BaseException,
    name: str,
    namespace: str,
    identity: dict[str, str],
    *,
    job_kind: JobKind = DEFAULT_JOB_KIND,
) -> bool:
    """Whether a PyTorchJob create that raised ``error`` definitely did not create our job.

    True for a refusal (`job_create_refused`), or when one read that succeeds finds no job of
    ours under the name. False when that cannot be read: the outcome is unknown.
    """
    if job_create_refused(error):
        return True
    try:
        with hook.retries(_READ_BACK_POLICY.within(_READ_BACK_SECONDS)):
            found = hook.get_job(job_kind, name, namespace)
    except GangApiError:
        return False
    return found is None or not is_ours(found, identity)


def _roll_back_podgroup(hook: GangJobHook, podgroup: JsonDict, namespace: str) -> None:
    name = podgroup["metadata"]["name"]
    try:
        hook.delete_podgroup(name, namespace, uid=podgroup["metadata"].get("uid"))
    except GangApiError as error:  # the next try's orphan sweep deletes it
        log.warning("could not delete PodGroup %s/%s after a failed submit: %s", namespace, name, error)


def _create_or_adopt(
    kind: str,
    resource: str,
    *,
    create: Callable[[JsonDict, str], JsonDict],
    get: Callable[[str, str], JsonDict | None],
    body: JsonDict,
    namespace: str,
    identity: dict[str, str],
) -> tuple[JsonDict, bool]:
    """Create ``body``; on 409 adopt the existing object if it carries our identity labels.

    Returns the object and whether this call created it.
    """
    name = body["metadata"]["name"]
    try:
        return create(body, namespace), True
    except GangApiError as error:
        if error.status != 409:
            raise
        existing = get(name, namespace)
        if existing is None or not is_ours(existing, identity):
            raise GangApiError(
                f"{kind} {namespace}/{name} already exists and was not created by this task; pass another "
                "job_name or delete it",
                status=409,
                verb="create",
                resource=resource,
                name=name,
                namespace=namespace,
            ) from error
        return existing, False
