"""The simulated JobSet controller (kubernetes-sigs/jobset): JobSet -> batch Jobs + headless Service.

Each round, for every JobSet (not being deleted, not ``managedBy`` another controller) it reads
the child Jobs it controls from the cache, asks `jobset_plan.plan_jobset` what to do and applies
it: deletions (foreground, so a restarted Job's pods are gone before its successor of the same
name is created), the headless Service, new Jobs, ``spec.suspend`` of active Jobs, then the
status through ``/status`` when it changed, and the events of the conditions it set.

Events that wake it: JobSets, and Jobs and Services a JobSet controls.
"""

from __future__ import annotations

import logging
from typing import Any

from gang_sim.controllers.client import JsonDict, KubeClient
from gang_sim.controllers.concurrency import in_parallel
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import JOBS, JOBSETS, SERVICES, Kind, object_key
from gang_sim.controllers.object_controller import ObjectController
from gang_sim.controllers.ownership import controlled_by, controller_uid
from gang_sim.controllers.trainer.jobset_build import subdomain
from gang_sim.controllers.trainer.jobset_plan import plan_jobset

log = logging.getLogger(__name__)

COMPONENT = "jobset-controller"
MANAGED_BY = "jobset.sigs.k8s.io/jobset-controller"
CHILDREN_INDEX = "jobset-controller/children"


class JobSetController(ObjectController):
    component = COMPONENT
    name = "jobset-controller"
    primary = JOBSETS
    kinds = (JOBSETS, JOBS, SERVICES)

    def __init__(self, client: KubeClient, cache: Cache, **options: Any) -> None:
        super().__init__(client, cache, **options)
        cache[JOBS].add_index(CHILDREN_INDEX, controlled_by(JOBSETS))

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        return kind == JOBSETS or controller_uid(obj, JOBSETS) is not None

    async def sync(self, jobset: JsonDict) -> None:
        if deep_get(jobset, "metadata", "deletionTimestamp"):
            return
        if (deep_get(jobset, "spec", "managedBy") or MANAGED_BY) != MANAGED_BY:
            return
        namespace, name = object_key(jobset)
        uid = str(deep_get(jobset, "metadata", "uid"))
        jobs = self.cache[JOBS].indexed(CHILDREN_INDEX, uid)
        # An existing Service of that name is used as it is, whoever made it (as upstream does).
        service_exists = self.cache.get(SERVICES, namespace, subdomain(jobset)) is not None
        plan = plan_jobset(jobset, jobs, service_exists, self.clock())
        await in_parallel(
            self.delete(JOBS, namespace, job, propagation="Foreground") for job in plan.delete_jobs
        )
        if plan.create_service is not None:
            await self.create(SERVICES, plan.create_service)
        await in_parallel(self._create_job(job) for job in plan.create_jobs)
        await in_parallel(
            self.patch(JOBS, job, {"spec": {"suspend": value}}) for job, value in plan.set_suspend
        )
        if await self.write_status(JOBSETS, jobset, plan.status):
            for event_type, reason, message in plan.events:
                self.events.record(jobset, event_type, reason, message)
                log.info("jobset %s jobset=%s/%s: %s", reason, namespace, name, message)

    async def _create_job(self, job: JsonDict) -> None:
        if await self.create(JOBS, job) is not None:
            log.info("job created job=%s/%s", *object_key(job))
