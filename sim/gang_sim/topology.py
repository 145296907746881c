"""What a simulated cluster looks like (`Topology`) and the controllers that make it work.

Shared by `SimCluster`, by ``airflow-gang sim controllers`` (attach mode) and by the child
process that hosts the controllers of a large cluster (`gang_sim.controller_process`),
which rebuilds them from a pickled `Topology`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gang_sim.controllers.batch.job_controller import JobController
from gang_sim.controllers.core.disruption import DisruptionController
from gang_sim.controllers.core.kube_scheduler import KubeScheduler
from gang_sim.controllers.core.node_lifecycle import DEFAULT_GRACE_PERIOD, NodeLifecycleController
from gang_sim.controllers.core.pod_gc import PodGC
from gang_sim.controllers.core.taint_eviction import TaintEvictionController
from gang_sim.controllers.kubelet.kubelet import Kubelet
from gang_sim.controllers.manager import ControllerFactory
from gang_sim.controllers.trainer.jobset_controller import JobSetController
from gang_sim.controllers.trainer.trainjob_controller import Trainer
from gang_sim.controllers.training_operator.pytorchjob_controller import TrainingOperator
from gang_sim.controllers.volcano.scheduler import Volcano
from gang_sim.controllers.volcano_jobs.controller import VolcanoJobController

Runtime = Literal["script", "process"]
# "trainer", "jobset" and "job-controller" run Kubeflow Trainer v2 TrainJobs: the trainer makes
# a JobSet, the JobSet controller its batch Jobs, the Job controller (kube-controller-manager's
# part) their pods. "node-lifecycle", "taint-eviction", "pod-gc" and "disruption" are
# kube-controller-manager's parts that disrupt pods: a silent node goes Unknown and tainted, its
# pods are deleted, pods of a deleted Node are force-deleted, PodDisruptionBudgets are kept.
# "volcano-jobs" is vc-controller-manager's job controller: Volcano's own batch.volcano.sh Jobs.
CONTROLLER_NAMES = (
    "volcano",
    "volcano-jobs",
    "kube-scheduler",
    "training-operator",
    "trainer",
    "jobset",
    "job-controller",
    "node-lifecycle",
    "taint-eviction",
    "pod-gc",
    "disruption",
    "kubelet",
)


@dataclass(frozen=True)
class Topology:
    """What the simulated cluster looks like and how its controllers behave."""

    nodes: int = 2
    gpus_per_node: int = 2
    cpus_per_node: int | str = 16
    memory_per_node: str = "64Gi"
    queues: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    overcommit_factor: float = 1.2
    training_operator_gang: str | None = None
    runtime: Runtime = "script"
    schedule_period: float = 1.0
    workdir: str | None = None
    node_address: str = "127.0.0.1"
    # kube-controller-manager's --node-monitor-grace-period (40 s, 50 s from v1.32): how long a
    # node may stay silent before it is Unknown; kubelets renew their Lease every quarter of it.
    node_monitor_grace_period: float = DEFAULT_GRACE_PERIOD
    # volcano-scheduler.conf as plain data (`volcano.conf.SchedulerConf.to_mapping`); None: Volcano's
    # compiled-in default (enqueue, allocate, backfill: no preempt, no reclaim).
    scheduler_conf: Mapping[str, Any] | None = None

    def lease_renew_interval(self) -> float:
        """As a real kubelet renews every 10 s of a 40 s grace period."""
        return self.node_monitor_grace_period / 4

    def node_names(self) -> list[str]:
        return [f"sim-node-{index + 1}" for index in range(self.nodes)]

    def node_capacity(self) -> dict[str, str]:
        return {
            "cpu": str(self.cpus_per_node),
            "memory": self.memory_per_node,
            "nvidia.com/gpu": str(self.gpus_per_node),
            "pods": "110",
        }


def controller_factories(
    topology: Topology, only: Iterable[str] = CONTROLLER_NAMES
) -> list[ControllerFactory]:
    """The controllers to run for ``topology``; ``only`` picks a subset (attach mode)."""
    chosen = set(only)
    unknown = chosen - set(CONTROLLER_NAMES)
    if unknown:
        raise ValueError(
            f"unknown controller(s) {sorted(unknown)}; choose from {', '.join(CONTROLLER_NAMES)}"
        )
    # Fast simulated clusters reconcile more often; the scheduler keeps Volcano's own period.
    reactive = min(0.5, max(0.05, topology.schedule_period / 2))
    factories: list[ControllerFactory] = []
    if "volcano" in chosen:
        factories.append(
            lambda client, cache: Volcano(
                client,
                cache,
                schedule_period=topology.schedule_period,
                overcommit_factor=topology.overcommit_factor,
                queues={name: dict(cap) if cap else None for name, cap in topology.queues.items()},
                scheduler_conf=topology.scheduler_conf,
            )
        )
    if "volcano-jobs" in chosen:
        factories.append(lambda client, cache: VolcanoJobController(client, cache, period=reactive))
    if "kube-scheduler" in chosen:
        factories.append(lambda client, cache: KubeScheduler(client, cache, period=reactive))
    if "training-operator" in chosen:
        factories.append(
            lambda client, cache: TrainingOperator(
                client, cache, gang_scheduler_name=topology.training_operator_gang, period=reactive
            )
        )
    if "trainer" in chosen:
        factories.append(lambda client, cache: Trainer(client, cache, period=reactive))
    if "jobset" in chosen:
        factories.append(lambda client, cache: JobSetController(client, cache, period=reactive))
    if "job-controller" in chosen:
        factories.append(lambda client, cache: JobController(client, cache, period=reactive))
    if "node-lifecycle" in chosen:
        grace = topology.node_monitor_grace_period
        factories.append(
            lambda client, cache: NodeLifecycleController(client, cache, node_monitor_grace_period=grace)
        )
    if "taint-eviction" in chosen:
        factories.append(TaintEvictionController)
    if "pod-gc" in chosen:
        factories.append(PodGC)
    if "disruption" in chosen:
        factories.append(DisruptionController)
    if "kubelet" in chosen:
        for node_name in topology.node_names():
            factories.append(_kubelet_factory(topology, node_name, reactive))
    return factories


def _kubelet_factory(topology: Topology, node_name: str, period: float) -> ControllerFactory:
    return lambda client, cache: Kubelet(
        client,
        cache,
        node_name=node_name,
        capacity=topology.node_capacity(),
        runtime=topology.runtime,
        period=period,
        workdir=topology.workdir,
        address=topology.node_address,
        lease_renew_interval=topology.lease_renew_interval(),
    )


def controller_names(value: str | Sequence[str]) -> list[str]:
    """Parse ``--only volcano,kube-scheduler`` (accepting ``_`` for ``-``)."""
    names = value.split(",") if isinstance(value, str) else list(value)
    return [name.strip().replace("_", "-") for name in names if name.strip()]
