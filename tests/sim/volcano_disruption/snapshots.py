"""Hand-built cluster snapshots and scheduler configurations for the preempt/reclaim tests."""

from __future__ import annotations

from typing import Any

from gang_sim.controllers.volcano.conf import SchedulerConf, load_scheduler_conf
from gang_sim.controllers.volcano.session import SessionConfig, SessionResult, Snapshot, run_session
from tests.sim.volcano_objects import node, podgroup, pods, queue

JsonDict = dict[str, Any]

TIER_1 = "- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n"
TIER_2 = (
    "- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},"
    " {name: nodeorder}]\n"
)


def conf(actions: str, tiers: str = TIER_1 + TIER_2) -> SchedulerConf:
    """A volcano-scheduler.conf with the compiled-in tiers unless others are given."""
    return load_scheduler_conf(f'actions: "{actions}"\ntiers:\n{tiers}')


RECLAIM = conf("enqueue, allocate, reclaim, backfill")
PREEMPT = conf("enqueue, allocate, preempt, backfill")
# The Helm chart's tiers (installer/helm/chart/volcano/config/volcano-scheduler.conf:1-15) with preempt.
HELM_PREEMPT = conf(
    "enqueue, allocate, preempt, backfill",
    "- plugins: [{name: priority}, {name: gang, enablePreemptable: false}, {name: conformance}]\n"
    "- plugins: [{name: overcommit}, {name: drf, enablePreemptable: false}, {name: predicates},"
    " {name: proportion}, {name: nodeorder}, {name: binpack}]\n",
)


def running(group: str, count: int, nodes: list[str], *, namespace: str = "ml") -> list[JsonDict]:
    made = pods(group, count, node_names=nodes, phase="Running")
    for pod in made:
        pod["metadata"]["namespace"] = namespace
    return made


def session(
    scheduler: SchedulerConf,
    podgroups: list[JsonDict],
    all_pods: list[JsonDict],
    *,
    nodes: int = 2,
    queues: tuple[str, ...] = ("team-a", "team-b"),
    priority_classes: list[JsonDict] | None = None,
) -> SessionResult:
    snapshot = Snapshot(
        nodes=[node(f"node-{i + 1}") for i in range(nodes)],
        pods=all_pods,
        podgroups=podgroups,
        queues=[queue("root"), queue("default"), *(queue(name) for name in queues)],
        priority_classes=priority_classes or [],
    )
    return run_session(snapshot, SessionConfig(scheduler=scheduler))


def evicted(result: SessionResult) -> list[tuple[str, str]]:
    """(pod name, reason) of every eviction."""
    return [(e.pod[1], e.reason) for e in result.evictions]


def phase(result: SessionResult, group: str) -> str:
    return str(result.podgroup_status[("ml", group)]["phase"])


def condition(result: SessionResult, group: str) -> JsonDict:
    conditions: list[JsonDict] = result.podgroup_status[("ml", group)]["conditions"]
    return conditions[-1]


__all__ = ["node", "podgroup", "pods", "queue"]
