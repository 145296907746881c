"""The simulated Kubeflow Trainer v2 controller: TrainJob -> JobSet (+ Volcano PodGroup), status.

For each TrainJob (``managedBy`` the trainer, not being deleted), every round:

1. resolve ``spec.runtimeRef`` (kind ``ClusterTrainingRuntime`` unless it says
   ``TrainingRuntime``, group ``trainer.kubeflow.org``); an unknown kind fails the TrainJob
   (``TrainingRuntimeNotSupported``), a missing runtime leaves it as is with a Warning event
   ``TrainJobResourcesCreationFailed`` until the runtime appears (the API server's webhook
   refuses such TrainJobs at creation, so this only happens when the runtime was deleted);
2. while the TrainJob has not finished: with ``podGroupPolicy.volcano``, create its PodGroup
   (once; never updated, as upstream) before anything else, so no pod reaches Volcano without
   its gang; then create the JobSet (`trainjob_build.build_jobset`), or, when it exists, bring
   its ``spec.suspend`` in line with the TrainJob's. A suspended TrainJob has no PodGroup (it
   would hold the queue's capacity for pods that do not run);
3. once finished, the PodGroup is deleted (upstream's Volcano plugin does the same);
4. write the status (`trainjob_status.next_status`) through ``/status`` when it changed.

What it deliberately leaves out: ``activeDeadlineSeconds``, initializers (dataset/model jobs),
the coscheduling plugin, runtime finalizers, MPI/JAX/XGBoost policies, and re-applying a
changed runtime to an existing JobSet.

Events that wake it: TrainJobs; JobSets and PodGroups controlled by a TrainJob; runtimes.
"""

from __future__ import annotations

import logging

from gang_sim.controllers.client import JsonDict
from gang_sim.controllers.informer import deep_get
from gang_sim.controllers.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    JOBSETS,
    PODGROUPS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    Kind,
    object_key,
)
from gang_sim.controllers.object_controller import ObjectController
from gang_sim.controllers.ownership import controller_uid, is_controlled_by
from gang_sim.controllers.trainjob_build import build_jobset, build_podgroup, uses_volcano
from gang_sim.controllers.trainjob_status import is_finished, next_status

log = logging.getLogger(__name__)

COMPONENT = "trainjob-controller"
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
RUNTIME_KINDS = {"ClusterTrainingRuntime": CLUSTER_TRAINING_RUNTIMES, "TrainingRuntime": TRAINING_RUNTIMES}


class Trainer(ObjectController):
    """Kubeflow Trainer v2's TrainJob controller with the JobSet, torch and Volcano plugins."""

    component = COMPONENT
    name = "trainer"
    primary = TRAINJOBS
    kinds = (TRAINJOBS, JOBSETS, PODGROUPS, CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES)

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        if kind in (JOBSETS, PODGROUPS):
            return controller_uid(obj, TRAINJOBS) is not None
        return True

    def runtime_of(self, trainjob: JsonDict) -> tuple[str, Kind | None, JsonDict | None]:
        """``(Kind.group, runtime kind, runtime)`` of ``spec.runtimeRef``: the kind is None when
        the trainer does not support it, the runtime None when it does not exist (or either)."""
        ref = deep_get(trainjob, "spec", "runtimeRef", default=None) or {}
        kind_name = str(ref.get("kind") or CLUSTER_TRAINING_RUNTIMES.kind)
        group = str(ref.get("apiGroup") or TRAINJOBS.group)
        kind = RUNTIME_KINDS.get(kind_name) if group == TRAINJOBS.group else None
        if kind is None:
            return f"{kind_name}.{group}", None, None
        namespace = object_key(trainjob)[0] if kind.namespaced else ""
        return f"{kind_name}.{group}", kind, self.cache.get(kind, namespace, str(ref.get("name") or ""))

    async def sync(self, trainjob: JsonDict) -> None:
        if deep_get(trainjob, "metadata", "deletionTimestamp"):
            return
        if (deep_get(trainjob, "spec", "managedBy") or MANAGED_BY) != MANAGED_BY:
            return  # another controller (MultiKueue) runs it
        namespace, name = object_key(trainjob)
        group_kind, kind, runtime = self.runtime_of(trainjob)
        jobset = self.cache.get(JOBSETS, namespace, name)
        if jobset is not None and not is_controlled_by(jobset, trainjob, TRAINJOBS):
            jobset = None  # someone else's JobSet of that name: neither used nor touched
        if kind is not None and runtime is None:
            ref = deep_get(trainjob, "spec", "runtimeRef", "name")
            message = (
                f"TrainJob resources reconciliation failed: {kind.kind} specified in TrainJob is not "
                f'found: {kind.plural}.{kind.group} "{ref}" not found'
            )
            self.events.record(trainjob, "Warning", "TrainJobResourcesCreationFailed", message)
        elif runtime is not None:
            jobset = await self._sync_children(trainjob, runtime, jobset)
        status = next_status(
            trainjob, jobset, unsupported_runtime=group_kind if kind is None else None, now=self.clock()
        )
        if await self.write_status(TRAINJOBS, trainjob, status):
            log.info(
                "trainjob status trainjob=%s/%s conditions=%s",
                namespace,
                name,
                [(c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []],
            )

    async def _sync_children(
        self, trainjob: JsonDict, runtime: JsonDict, jobset: JsonDict | None
    ) -> JsonDict | None:
        """PodGroup and JobSet as the TrainJob's state asks; returns the JobSet as now cached."""
        namespace, name = object_key(trainjob)
        suspended = bool(deep_get(trainjob, "spec", "suspend"))
        finished = is_finished(trainjob)
        if uses_volcano(runtime):
            podgroup = self.cache.get(PODGROUPS, namespace, name)
            owned = podgroup is not None and is_controlled_by(podgroup, trainjob, TRAINJOBS)
            if (finished or suspended) and owned:
                await self.delete(PODGROUPS, namespace, name)
                log.info("podgroup deleted trainjob=%s/%s", namespace, name)
            elif podgroup is None and not finished and not suspended:
                desired = build_jobset(trainjob, runtime)
                if await self.create(PODGROUPS, build_podgroup(trainjob, runtime, desired)) is not None:
                    log.info("podgroup created trainjob=%s/%s", namespace, name)
        if finished:
            return jobset
        if jobset is None:
            created = await self.create(JOBSETS, build_jobset(trainjob, runtime))
            if created is not None:
                log.info("jobset created trainjob=%s/%s", namespace, name)
            return created
        if bool(deep_get(jobset, "spec", "suspend")) != suspended:
            await self.patch(JOBSETS, jobset, {"spec": {"suspend": suspended}})
            log.info("jobset %s trainjob=%s/%s", "suspended" if suspended else "resumed", namespace, name)
            return self.cache.get(JOBSETS, namespace, name)
        return jobset
