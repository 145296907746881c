"""Finding, adopting and submitting the job of a task instance: one job per try, none twice.

Every object the operator creates carries its task instance's identity labels (dag, task, run,
map index, try), so a try finds what earlier tries left, whatever happened to them:

- a **live** job (not finished, not being deleted) is reattached: a retry after a worker crash
  or an API outage waits on for the same uid instead of submitting a second job;
- a **Succeeded** job that no try has delivered yet is adopted (``reuse_succeeded_job``): a
  retry after a crash that happened after the training ended returns its result, it does not
  train the model again. A Failed one is never adopted;
- a **PodGroup no job owns** (a crash between creating the PodGroup and the PyTorchJob, or a
  cleanup cut short) holds queue capacity in Volcano: it is deleted before submitting;
- a job of a try **before the task's last clear** is never taken over: a person cleared the task
  to run it again. Such a job is normally gone already (the cleared try's ``on_kill``), but a
  clear that lands while the try hands over to the triggerer, or while the triggerer is down,
  runs none of our code; the next try deletes it then. Airflow counts the tries since the last
  clear from ``max_tries``: a clear sets ``max_tries = try_number + retries``, so the first try
  after it is ``max_tries - retries + 1`` (`first_try_since_clear`, as the Task SDK's own
  reschedule lookup does).

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
from typing import Any, NamedTuple

from airflow_gang.exceptions import GangApiError
from airflow_gang.gang_state import last_true_condition, owned_by
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.retrying import RetryPolicy
from airflow_gang.jobs.cleanup import delete_gang
from airflow_gang.naming import MANAGED_BY_LABEL, MANAGED_BY_VALUE, TRY_NUMBER_LABEL, identity_selector
from airflow_gang.spec import GangJobSpec

JsonDict = dict[str, Any]
log = logging.getLogger(__name__)
# Answers that say the request itself was refused, so no attempt of a (retried) create stored the
# object: an attempt that had stored it would make the next one answer 409, which is adopted.
# 408 and 429 are excluded: they follow earlier attempts whose outcome is unknown.
_REFUSED = frozenset(range(400, 500)) - {408, 429}
# The one read that decides whether a failed create stored the job: quick, also on a kill's path.
_READ_BACK_POLICY = RetryPolicy(attempts=2, initial_delay=0.2, max_delay=0.5, quiet=True)
_READ_BACK_SECONDS = 5.0


class Target(NamedTuple):
    """The job this try would submit: its name, namespace and identity labels."""

    name: str
    namespace: str
    identity: dict[str, str]


class Attached(NamedTuple):
    """A job of an earlier try this try takes over, and how."""

    job: JsonDict
    finished: bool  # a Succeeded job adopted for its result, not a live one waited for
    from_try: str


def try_of(job: JsonDict) -> str:
    return str(((job.get("metadata") or {}).get("labels") or {}).get(TRY_NUMBER_LABEL, "?"))


def first_try_since_clear(max_tries: int, retries: int) -> int:
    """The first try number after the task instance's last clear (1 if it was never cleared)."""
    return max(1, max_tries - retries + 1)


def _try_number(obj: JsonDict) -> int | None:
    text = try_of(obj)
    return int(text) if text.isdigit() else None


def is_ours(obj: JsonDict, identity: dict[str, str]) -> bool:
    """Whether an existing object carries this task instance's identity labels (any try)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    keys = [key for key in identity if key != TRY_NUMBER_LABEL]
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE and all(
        labels.get(k) == identity[k] for k in keys
    )


def outcome(job: JsonDict) -> str | None:
    """``Succeeded``/``Failed`` once the job has ended, else None."""
    condition = last_true_condition(job) or {}
    kind = condition.get("type")
    return kind if kind in ("Succeeded", "Failed") else None


def is_live(job: JsonDict) -> bool:
    """A job worth reattaching to: not finished and not being deleted."""
    return outcome(job) is None and not job["metadata"].get("deletionTimestamp")


def find_job_to_attach(
    found: list[JsonDict],
    namespace: str,
    *,
    stored: JsonDict | None,
    reuse_succeeded: bool,
    first_try: int = 1,
) -> Attached | None:
    """The earlier try's job this try should take over, if any (see the module docstring).

    :param found: the task instance's jobs (every try), as listed by their identity labels.
    :param stored: the task state store's ``pytorchjob`` entry (name, namespace, uid, and
        ``delivered`` once a try returned that job's result: a cleared task then trains anew).
    :param first_try: `first_try_since_clear`; jobs of earlier tries are not taken over.
    """
    jobs = [job for job in found if (_try_number(job) or first_try) >= first_try]
    live = [job for job in jobs if is_live(job)]
    if len(live) > 1:
        names = ", ".join(sorted(job["metadata"]["name"] for job in live))
        raise GangApiError(
            f"found {len(live)} live PyTorchJobs of this task instance ({names}); delete the stale ones",
            namespace=namespace,
        )
    if live:
        return Attached(live[0], False, try_of(live[0]))
    if not reuse_succeeded:
        return None
    delivered = (stored or {}).get("uid") if (stored or {}).get("delivered") else None
    succeeded = [
        job
        for job in jobs
        if outcome(job) == "Succeeded"
        and not job["metadata"].get("deletionTimestamp")
        and job["metadata"].get("uid") != delivered
    ]
    if not succeeded:
        return None
    newest = max(succeeded, key=lambda job: str(job["metadata"].get("creationTimestamp") or ""))
    return Attached(newest, True, try_of(newest))


def take_over_or_submit(
    hook: GangJobHook,
    spec: GangJobSpec,
    target: Target,
    *,
    stored: JsonDict | None,
    reuse_succeeded: bool,
    first_try: int = 1,
    logger: logging.Logger | Any = log,
) -> tuple[JsonDict, Attached | None]:
    """The job this try waits for: an earlier try's (see `find_job_to_attach`) or a new one.

    Returns the job and, when it was taken over, how. Live jobs of tries before ``first_try``
    (`first_try_since_clear`) are deleted first: their task was cleared.
    """
    name, namespace, identity = target
    gang = spec.gang_scheduling.value
    found = hook.find_pytorchjobs(namespace, identity_selector(identity))
    retire_cleared_jobs(hook, found, namespace, first_try, logger, gang_scheduling=gang)
    attached = find_job_to_attach(
        found, namespace, stored=stored, reuse_succeeded=reuse_succeeded, first_try=first_try
    )
    if attached is not None:
        job = attached.job
        logger.info(
            "%s %s/%s from try %s (uid %s)",
            "adopted finished job" if attached.finished else "reattaching to live PyTorchJob",
            namespace,
            job["metadata"]["name"],
            attached.from_try,
            job["metadata"]["uid"],
        )
        if gang == "provider":
            ensure_podgroup_owner(hook, job, logger)
        return job, attached
    if gang == "provider":
        sweep_orphan_podgroups(hook, namespace, identity, logger)
    job_manifest = spec.build_pytorchjob(name, namespace, labels=identity)
    podgroup_manifest = spec.build_podgroup(name, namespace, labels=identity)
    job, adopted = submit(hook, job_manifest, podgroup_manifest, namespace, identity)
    logger.info(
        "%s PyTorchJob %s/%s (uid %s) in queue %s",
        "adopted" if adopted else "submitted",
        namespace,
        job["metadata"]["name"],
        job["metadata"]["uid"],
        spec.effective_queue,
    )
    return job, None


def retire_cleared_jobs(
    hook: GangJobHook,
    found: list[JsonDict],
    namespace: str,
    first_try: int,
    logger: logging.Logger | Any = log,
    *,
    gang_scheduling: str | None = None,
) -> list[str]:
    """Delete the live ones of ``found`` (the task instance's jobs) whose try came before
    ``first_try``: a person cleared the task since.

    Returns their names. The deletes are confirmed (bounded), so their GPUs are back in the queue
    before this try's gang asks for them.
    """
    if first_try <= 1:
        return []
    retired = []
    for job in found:
        number = _try_number(job)
        if number is None or number >= first_try or not is_live(job):
            continue
        metadata = job["metadata"]
        logger.warning(
            "PyTorchJob %s/%s of try %s is still live, but the task was cleared after that try: deleting it "
            "(the cleared try could not)",
            namespace,
            metadata["name"],
            number,
        )
        delete_gang(
            hook,
            metadata["name"],
            namespace,
            metadata.get("uid"),
            gang_scheduling=gang_scheduling,
            reason="task cleared",
            logger=logger,
        )
        retired.append(metadata["name"])
    return retired


def sweep_orphan_podgroups(
    hook: GangJobHook, namespace: str, identity: dict[str, str], logger: logging.Logger | Any = log
) -> list[str]:
    """Delete this task instance's PodGroups (any try) that no existing job owns; their names."""
    swept = []
    for podgroup in hook.list_podgroups(namespace, identity_selector(identity)):
        metadata = podgroup["metadata"]
        if metadata.get("deletionTimestamp") or _has_live_owner(hook, podgroup):
            continue
        logger.warning(
            "deleting PodGroup %s/%s of try %s: no job owns it, and it holds queue capacity",
            namespace,
            metadata["name"],
            try_of(podgroup),
        )
        try:
            hook.delete_podgroup(metadata["name"], namespace, uid=metadata.get("uid"))
        except GangApiError as error:
            if error.status != 409:  # 409: replaced meanwhile, so not the orphan we saw
                raise
        swept.append(metadata["name"])
    return swept


def _has_live_owner(hook: GangJobHook, podgroup: JsonDict) -> bool:
    metadata = podgroup["metadata"]
    for reference in metadata.get("ownerReferences") or []:
        if reference.get("kind") != "PyTorchJob":
            return True  # someone else's arrangement: not ours to judge
        owner = hook.get_pytorchjob(reference.get("name", ""), metadata["namespace"])
        if owner is not None and owner["metadata"].get("uid") == reference.get("uid"):
            return True
    # No owner yet: the job of the same name may exist (a crash before set_podgroup_owner).
    job = hook.get_pytorchjob(metadata["name"], metadata["namespace"])
    return job is not None and not metadata.get("ownerReferences")


def ensure_podgroup_owner(hook: GangJobHook, job: JsonDict, logger: logging.Logger | Any = log) -> None:
    """Make an adopted job its PodGroup's controller if a crash left the group without an owner,
    or an earlier version of the provider owned it with ``controller: false`` (which a
    gang-enabled training-operator never wakes the job for: `kinds.owner_reference_patch`)."""
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    podgroup = hook.get_podgroup(name, namespace)
    if podgroup is None:
        return
    uid = job["metadata"].get("uid")
    references = podgroup["metadata"].get("ownerReferences") or []
    if any(reference.get("uid") == uid and reference.get("controller") for reference in references):
        return
    if not owned_by(podgroup, uid) and references:
        return  # another owner: leave it
    logger.info(
        "PodGroup %s/%s %s: the adopted job is now its controller",
        namespace,
        name,
        "was owned without a controller reference" if references else "had no owner",
    )
    hook.set_podgroup_owner(name, namespace, job)


def submit(
    hook: GangJobHook, job: JsonDict, podgroup: JsonDict | None, namespace: str, identity: dict[str, str]
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
            "PodGroup",
            "podgroups.scheduling.volcano.sh",
            create=hook.create_podgroup,
            get=hook.get_podgroup,
            body=podgroup,
            namespace=namespace,
            identity=identity,
        )
        created_podgroup = stored if created else None
    try:
        created_job, submitted = _create_or_adopt(
            "PyTorchJob",
            "pytorchjobs.kubeflow.org",
            create=hook.create_pytorchjob,
            get=hook.get_pytorchjob,
            body=job,
            namespace=namespace,
            identity=identity,
        )
    except BaseException as error:
        if created_podgroup is not None:
            # Bounded, also on a kill's path: no waiting through an outage here.
            with hook.riding_out(None):
                not_created = job_not_created(hook, error, name, namespace, identity)
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
    hook: GangJobHook, error: BaseException, name: str, namespace: str, identity: dict[str, str]
) -> bool:
    """Whether a PyTorchJob create that raised ``error`` definitely did not create our job.

    True for a refusal (`job_create_refused`), or when one read that succeeds finds no job of
    ours under the name. False when that cannot be read: the outcome is unknown.
    """
    if job_create_refused(error):
        return True
    try:
        with hook.retries(_READ_BACK_POLICY.within(_READ_BACK_SECONDS)):
            found = hook.get_pytorchjob(name, namespace)
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
