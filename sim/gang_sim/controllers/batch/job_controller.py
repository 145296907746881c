"""The simulated batch/v1 Job controller (kube-controller-manager's): Job -> pods, counts, conditions.

Each round it plans every Job (`job_plan.plan_job`) from the pods it controls in the
cache and applies the plans: deletions, then pod creations interleaved across Jobs (every Job's
first pod, then every Job's second ...), then each changed status through ``/status``, and the
events (``SuccessfulCreate`` "Created pod: <name>", ``SuccessfulDelete``,
``BackoffLimitExceeded``, ``Completed``, ``Suspended``/``Resumed``). The pods run on the
simulated kubelets like any others (script runtime: ``sim.airflow-gang.io/*`` annotations).

Jobs created together get their pods together (`creation_batch.CreationBatch`, as the
training-operator's): the Jobs of six TrainJobs arrive a few milliseconds apart, and the batch
makes the interleaving a real controller's parallel workers produce, and the partial-placement
deadlock it leads to without gang scheduling, deterministic here.

Events that wake it: Jobs, and pods a Job controls.
"""

from __future__ import annotations

import logging
from typing import Any

from gang_sim.controllers.batch.job_plan import JobPlan, plan_job
from gang_sim.controllers.client import JsonDict, KubeClient
from gang_sim.controllers.concurrency import in_parallel
from gang_sim.controllers.creation_batch import CreationBatch, rounds
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import JOBS, PODS, Kind, object_key
from gang_sim.controllers.object_controller import WRITE_ERRORS, ObjectController, creation_order
from gang_sim.controllers.ownership import controlled_by, controller_uid

log = logging.getLogger(__name__)

COMPONENT = "job-controller"
PODS_INDEX = "job-controller/pods"


class JobController(ObjectController):
    """kube-controller-manager's Job controller, for the Jobs JobSets make (see the module doc)."""

    component = COMPONENT
    name = "job-controller"
    primary = JOBS
    kinds = (JOBS, PODS)

    def __init__(
        self, client: KubeClient, cache: Cache, *, batch_window: float = 0.25, **options: Any
    ) -> None:
        super().__init__(client, cache, **options)
        self._batch = CreationBatch(batch_window)
        self._round_failed = False
        cache[PODS].add_index(PODS_INDEX, controlled_by(JOBS))

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        return kind == JOBS or controller_uid(obj, JOBS) is not None

    def pods_of(self, job: JsonDict) -> list[JsonDict]:
        return self.cache[PODS].indexed(PODS_INDEX, str(deep_get(job, "metadata", "uid")))

    async def reconcile(self) -> None:
        now = self.clock()
        jobs = sorted(
            (job for job in self.cache.items(JOBS) if not deep_get(job, "metadata", "deletionTimestamp")),
            key=creation_order,
        )
        plans = [(job, plan_job(job, self.pods_of(job), now)) for job in jobs]
        waiting = self._batching(plans)
        self._round_failed = False
        await in_parallel(self._delete_pod(job, pod) for job, plan in plans for pod in plan.delete_pods)
        creations = [
            [(job, pod) for pod in plan.create_pods] for job, plan in plans if _uid(job) not in waiting
        ]
        for row in rounds(creations):
            await in_parallel(self._create_pod(job, pod) for job, pod in row)
        await in_parallel(self._finish(job, plan) for job, plan in plans)
        self.retry_if(self._round_failed)

    def _batching(self, plans: list[tuple[JsonDict, JobPlan]]) -> set[str]:
        """The Jobs whose first pods wait for more Jobs submitted together (see the module doc)."""
        self._batch.keep_only({_uid(job) for job, _ in plans})
        fresh = {_uid(job) for job, plan in plans if plan.create_pods and not self.pods_of(job)}
        jobs = [(_uid(job), bool(deep_get(job, "spec", "suspend"))) for job, _ in plans]
        return self._batch.held(jobs, fresh, self.wakeup.set)

    async def _delete_pod(self, job: JsonDict, name: str) -> None:
        try:
            await self.delete(PODS, object_key(job)[0], name)
        except WRITE_ERRORS as error:
            self._failed("delete pod", job, error)
            return
        self.events.record(job, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")

    async def _create_pod(self, job: JsonDict, pod: JsonDict) -> None:
        try:
            created = await self.create(PODS, pod)
        except WRITE_ERRORS as error:
            self._failed("create pod", job, error)
            return
        if created is not None:
            name = deep_get(created, "metadata", "name")
            self.events.record(job, "Normal", "SuccessfulCreate", f"Created pod: {name}")
            log.info("pod created job=%s/%s pod=%s", *object_key(job), name)

    async def _finish(self, job: JsonDict, plan: JobPlan) -> None:
        try:
            changed = await self.write_status(JOBS, job, plan.status)
        except WRITE_ERRORS as error:
            self._failed("write status", job, error)
            return
        if changed:
            for event_type, reason, message in plan.events:
                self.events.record(job, event_type, reason, message)
                log.info("job %s job=%s/%s: %s", reason, *object_key(job), message)

    def _failed(self, what: str, job: JsonDict, error: BaseException) -> None:
        self._round_failed = True
        log.debug("%s: %s for %s/%s failed: %s", self.name, what, *object_key(job), error)


def _uid(job: JsonDict) -> str:
    return str(deep_get(job, "metadata", "uid", default=""))
