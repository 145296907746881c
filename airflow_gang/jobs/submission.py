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

Creating the objects, and what a failed create leaves behind, is `airflow_gang.jobs.creation`.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs.cleanup import delete_gang
from airflow_gang.jobs.creation import is_ours, job_create_refused, submit
from airflow_gang.jobs.recipe import JobRecipe, recipe_of
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind, job_kind_describing, job_kind_of_object
from airflow_gang.kinds.pytorchjob.spec import GangJobSpec
from airflow_gang.model.gang_state import finished_state, owned_by
from airflow_gang.model.naming import TRY_NUMBER_LABEL, identity_selector

JsonDict = dict[str, Any]
log = logging.getLogger(__name__)


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


def outcome(job: JsonDict, job_kind: JobKind = DEFAULT_JOB_KIND) -> str | None:
    """``Succeeded``/``Failed`` once the job has ended, else None."""
    return finished_state(job, job_kind)


def is_live(job: JsonDict, job_kind: JobKind = DEFAULT_JOB_KIND) -> bool:
    """A job worth reattaching to: not finished and not being deleted."""
    return outcome(job, job_kind) is None and not job["metadata"].get("deletionTimestamp")


def find_job_to_attach(
    found: list[JsonDict],
    namespace: str,
    *,
    stored: JsonDict | None,
    reuse_succeeded: bool,
    first_try: int = 1,
    job_kind: JobKind = DEFAULT_JOB_KIND,
) -> Attached | None:
    """The earlier try's job this try should take over, if any (see the module docstring).

    :param found: the task instance's jobs (every try), as listed by their identity labels.
    :param stored: the task state store's ``pytorchjob`` entry (name, namespace, uid, and
        ``delivered`` once a try returned that job's result: a cleared task then trains anew).
    :param first_try: `first_try_since_clear`; jobs of earlier tries are not taken over.
    """
    jobs = [job for job in found if (_try_number(job) or first_try) >= first_try]
    live = [job for job in jobs if is_live(job, job_kind)]
    if len(live) > 1:
        names = ", ".join(sorted(job["metadata"]["name"] for job in live))
        raise GangApiError(
            f"found {len(live)} live {job_kind.kind}s of this task instance ({names}); delete the stale ones",
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
        if outcome(job, job_kind) == "Succeeded"
        and not job["metadata"].get("deletionTimestamp")
        and job["metadata"].get("uid") != delivered
    ]
    if not succeeded:
        return None
    newest = max(succeeded, key=lambda job: str(job["metadata"].get("creationTimestamp") or ""))
    return Attached(newest, True, try_of(newest))


def take_over_or_submit(
    hook: GangJobHook,
    spec: GangJobSpec | JobRecipe,
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

    :param spec: a PyTorchJob's `GangJobSpec`, or the `JobRecipe` of any kind.
    """
    name, namespace, identity = target
    recipe = recipe_of(spec)
    gang, job_kind = recipe.gang_scheduling, recipe.job_kind
    found = hook.list_jobs(job_kind, namespace, identity_selector(identity))
    retire_cleared_jobs(hook, found, namespace, first_try, logger, gang_scheduling=gang, job_kind=job_kind)
    attached = find_job_to_attach(
        found,
        namespace,
        stored=stored,
        reuse_succeeded=reuse_succeeded,
        first_try=first_try,
        job_kind=job_kind,
    )
    if attached is not None:
        job = attached.job
        logger.info(
            "%s %s/%s from try %s (uid %s)",
            "adopted finished job" if attached.finished else f"reattaching to live {job_kind.kind}",
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
    job_manifest = recipe.build_job(name, namespace, identity)
    podgroup_manifest = recipe.build_podgroup(name, namespace, identity)
    job, adopted = submit(hook, job_manifest, podgroup_manifest, namespace, identity, job_kind=job_kind)
    logger.info(
        "%s %s %s/%s (uid %s) %s",
        "adopted" if adopted else "submitted",
        job_kind.kind,
        namespace,
        job["metadata"]["name"],
        job["metadata"]["uid"],
        f"in queue {recipe.queue}" if recipe.queue else "without gang scheduling",
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
    job_kind: JobKind = DEFAULT_JOB_KIND,
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
        if number is None or number >= first_try or not is_live(job, job_kind):
            continue
        metadata = job["metadata"]
        logger.warning(
            "%s %s/%s of try %s is still live, but the task was cleared after that try: deleting it "
            "(the cleared try could not)",
            job_kind.kind,
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
            job_kind=job_kind,
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
        owner_kind = job_kind_describing(reference)
        if owner_kind is None:
            return True  # someone else's arrangement: not ours to judge
        owner = hook.get_job(owner_kind, reference.get("name", ""), metadata["namespace"])
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
    job_kind = job_kind_of_object(job)
    podgroup_name = job_kind.podgroup_name(name, job["metadata"].get("uid"))
    podgroup = hook.get_podgroup(podgroup_name, namespace)
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


__all__ = [
    "Attached",
    "Target",
    "first_try_since_clear",
    "is_live",
    "is_ours",
    "job_create_refused",
    "outcome",
    "submit",
    "take_over_or_submit",
]
