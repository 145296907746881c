"""The simulated Kubeflow Trainer v2 controller: TrainJob -> runtime snapshot, PodGroup, JobSet; status.

Modelled on kubeflow/trainer v2.3.0 ``pkg/controller/trainjob_controller.go`` (``Reconcile``,
lines 80-140) and its plugins, including what it does on deletion and on failed writes. For each
TrainJob ``managedBy`` the trainer, every round:

1. nothing looks at ``deletionTimestamp`` (``Reconcile`` never does): a TrainJob marked for
   deletion is reconciled like any other, so a child the garbage collector (or anyone) deletes
   while its TrainJob waits in a foreground deletion is applied again;
2. a ``Failed`` condition is dropped before deciding (``removeFailedCondition``, line 100;
   kept only for ``DeadlineExceeded``, lines 246-252), so a failed TrainJob counts as unfinished
   until its status is recomputed from the JobSet;
3. an unknown runtime kind fails it (``TrainingRuntimeNotSupported``, lines 102-106);
4. while not finished (lines 107-120), the runtime is read from the TrainJob's snapshot
   ConfigMap ``<trainjob>-runtime-snapshot``, made from the live runtime on the first pass
   (``pkg/runtime/core/snapshot.go``; ``trainingruntime.go`` lines 88-106), then the objects are
   applied: with ``podGroupPolicy.volcano`` the PodGroup when it is missing, or its spec again
   while the TrainJob is suspended (``plugins/volcano/volcano.go`` lines 148-158); the JobSet when
   it is missing, or its spec (``suspend``) when either is suspended (``plugins/jobset/jobset.go``
   lines 330-342). Upstream visits its plugins in Go map order (``framework/core/framework.go``
   line 59), so which of the two comes first varies from one start to the next; here the PodGroup
   does. A refused write (a PodGroup whose queue is missing, say) is recorded as a Warning event
   ``TrainJobResourcesCreationFailed`` (line 118), the status is still written, and the round is
   retried with backoff, as controller-runtime requeues a failed reconcile;
5. the status: ``Suspended``, then ``Complete``/``Failed`` and ``jobsStatus`` copied from the JobSet
   (``jobset.go`` lines 438-472; without a JobSet an unfinished TrainJob keeps what step 2 left);
   written only when it changed (lines 130-134).

Trainer never deletes a PodGroup: after a success Volcano leaves it ``Completed``, and it goes
with its TrainJob. Events: none but the failure above (the controller emits no others).
What it leaves out: ``activeDeadlineSeconds``, initializers, coscheduling, MPI/JAX/XGBoost.
"""

from __future__ import annotations

import json
import logging

from gang_sim.controllers.client import ApiError, JsonDict
from gang_sim.controllers.informer import deep_get
from gang_sim.controllers.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBSETS,
    PODGROUPS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    Kind,
    object_key,
)
from gang_sim.controllers.object_controller import ObjectController
from gang_sim.controllers.ownership import controller_uid, is_controlled_by, owner_reference
from gang_sim.controllers.trainer.trainjob_build import build_jobset, build_podgroup, uses_volcano
from gang_sim.controllers.trainer.trainjob_status import is_finished, next_status, without_failed

log = logging.getLogger(__name__)

COMPONENT = "trainjob-controller"
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
RUNTIME_KINDS = {"ClusterTrainingRuntime": CLUSTER_TRAINING_RUNTIMES, "TrainingRuntime": TRAINING_RUNTIMES}
SNAPSHOT_SUFFIX, SNAPSHOT_KEY = "-runtime-snapshot", "runtime"


class Trainer(ObjectController):
    """Kubeflow Trainer v2's TrainJob controller with the JobSet, torch and Volcano plugins."""

    component = COMPONENT
    name = "trainer"
    primary = TRAINJOBS
    kinds = (TRAINJOBS, JOBSETS, PODGROUPS, CONFIGMAPS, CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES)

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        if kind in (JOBSETS, PODGROUPS):
            return controller_uid(obj, TRAINJOBS) is not None
        return kind is not CONFIGMAPS  # read through the cache, but no watch wakes the reconciler

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
        if (deep_get(trainjob, "spec", "managedBy") or MANAGED_BY) != MANAGED_BY:
            return  # another controller (MultiKueue) runs it
        namespace, name = object_key(trainjob)
        deciding = without_failed(trainjob)
        group_kind, kind, live_runtime = self.runtime_of(trainjob)
        jobset = self.cache.get(JOBSETS, namespace, name)
        if jobset is not None and not is_controlled_by(jobset, trainjob, TRAINJOBS):
            jobset = None  # someone else's JobSet of that name: neither used nor touched
        refused: ApiError | None = None
        if kind is not None and not is_finished(deciding):
            runtime = self._snapshot(trainjob) or live_runtime
            if runtime is None:
                ref = deep_get(trainjob, "spec", "runtimeRef", "name")
                message = (
                    f"TrainJob resources reconciliation failed: {kind.kind} specified in TrainJob is not "
                    f'found: {kind.plural}.{kind.group} "{ref}" not found'
                )
                self.events.record(trainjob, "Warning", "TrainJobResourcesCreationFailed", message)
            else:
                try:
                    await self._snapshot_once(trainjob, runtime)
                    jobset = await self._apply_children(deciding, runtime, jobset)
                except ApiError as error:
                    refused = error
                    message = f"TrainJob resources reconciliation failed: {error}"[:950]
                    self.events.record(trainjob, "Warning", "TrainJobResourcesCreationFailed", message)
        status = next_status(
            deciding, jobset, unsupported_runtime=group_kind if kind is None else None, now=self.clock()
        )
        if await self.write_status(TRAINJOBS, trainjob, status):
            log.info(
                "trainjob status trainjob=%s/%s conditions=%s",
                namespace,
                name,
                [(c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []],
            )
        if refused is not None:
            raise refused  # the round is retried with backoff, as a failed reconcile is requeued

    def _snapshot(self, trainjob: JsonDict) -> JsonDict | None:
        """The runtime as this TrainJob's snapshot ConfigMap holds it (None: no valid snapshot)."""
        namespace, name = object_key(trainjob)
        snapshot = self.cache.get(CONFIGMAPS, namespace, name + SNAPSHOT_SUFFIX)
        if snapshot is None or not is_controlled_by(snapshot, trainjob, TRAINJOBS):
            return None
        try:
            runtime = json.loads(str((snapshot.get("data") or {}).get(SNAPSHOT_KEY) or ""))
        except ValueError:
            return None
        return runtime if isinstance(runtime, dict) else None

    async def _snapshot_once(self, trainjob: JsonDict, runtime: JsonDict) -> None:
        namespace, name = object_key(trainjob)
        if self.cache.get(CONFIGMAPS, namespace, name + SNAPSHOT_SUFFIX) is not None:
            return
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name + SNAPSHOT_SUFFIX,
                "namespace": namespace,
                "ownerReferences": [owner_reference(trainjob, TRAINJOBS)],
            },
            # Upstream writes YAML; JSON is YAML too.
            "data": {SNAPSHOT_KEY: json.dumps(runtime, indent=2, sort_keys=True)},
        }
        await self.create(CONFIGMAPS, body)

    async def _apply_children(
        self, trainjob: JsonDict, runtime: JsonDict, jobset: JsonDict | None
    ) -> JsonDict | None:
        """The PodGroup and JobSet as Trainer's plugins apply them; returns the JobSet as cached."""
        namespace, name = object_key(trainjob)
        suspended = bool(deep_get(trainjob, "spec", "suspend"))
        if uses_volcano(runtime):
            podgroup = self.cache.get(PODGROUPS, namespace, name)
            desired = build_podgroup(trainjob, runtime, build_jobset(trainjob, runtime))
            if podgroup is None:
                if await self.create(PODGROUPS, desired) is not None:
                    log.info("podgroup created trainjob=%s/%s", namespace, name)
            elif (
                suspended
                and is_controlled_by(podgroup, trainjob, TRAINJOBS)
                and podgroup.get("spec") != {**(podgroup.get("spec") or {}), **desired["spec"]}
            ):
                await self.patch(PODGROUPS, podgroup, {"spec": desired["spec"]})
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
