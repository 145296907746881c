"""One way for a test to put a gang job on the cluster as the operator submits it: `submit`.

A PyTorchJob (`GangJobSpec`): its PodGroup first when the spec gangs with one, then the job, then
optionally the PodGroup's ownerReference; a TrainJob (`TrainJobSpec`) or a Volcano Job
(`VolcanoJobSpec`): the job alone (the cluster's Trainer or Volcano job controller makes the
rest). `gang_spec` is the usual PyTorchJob gang of these tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.job_kinds import TRAINJOB
from airflow_gang.kinds import VCJOB
from airflow_gang.kinds.vcjob.spec import VolcanoJobSpec
from airflow_gang.spec import GangJobSpec
from airflow_gang.trainjob_spec import TrainJobSpec

JsonDict = dict[str, Any]
IMAGE = "ghcr.io/acme/train:1"


@dataclass(frozen=True)
class Submitted:
    name: str
    uid: str


def gang_spec(seconds: float = 60, *, workers: int = 1, gpus: int = 1, **options: Any) -> GangJobSpec:
    """A gang of a master and ``workers`` workers, ``gpus`` GPUs each, whose replicas run for
    ``seconds`` on the embedded cluster (its kubelet reads the duration annotation); ``options``
    are any other `GangJobSpec` fields."""
    return GangJobSpec(
        image=IMAGE,
        workers=workers,
        resources={"nvidia.com/gpu": gpus},
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(seconds)}}},
        **options,
    )


def submit(
    name: str,
    spec: GangJobSpec | TrainJobSpec | VolcanoJobSpec,
    *,
    hook: GangJobHook | None = None,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    own_podgroup: bool = False,
) -> JsonDict:
    """Create the job ``spec`` describes, named ``name``, and return it as stored (with its uid).

    :param hook: the hook that creates it; by default the ``kubernetes_default`` connection's.
    :param labels: more labels on the job (and its PodGroup).
    :param own_podgroup: make the PyTorchJob own its PodGroup afterwards, as the operator does,
        so deleting the job garbage-collects the group.
    """
    hook = hook or GangJobHook(conn_id="kubernetes_default")
    if isinstance(spec, TrainJobSpec):
        return hook.create_job(TRAINJOB, spec.build_trainjob(name, namespace, extra_labels=labels), namespace)
    if isinstance(spec, VolcanoJobSpec):
        return hook.create_job(VCJOB, spec.build_vcjob(name, namespace, labels), namespace)
    podgroup = spec.build_podgroup(name, namespace, labels=labels)
    if podgroup is not None:
        hook.create_podgroup(podgroup, namespace)
    job = hook.create_pytorchjob(spec.build_pytorchjob(name, namespace, labels=labels), namespace)
    if own_podgroup:
        hook.set_podgroup_owner(name, namespace, job)
    return job
