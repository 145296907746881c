"""preempt on a running `SimCluster`, by priority inside one queue, over HTTP with the official client.

PriorityClasses ``gang-low`` (100) and ``gang-high`` (1000) name the PodGroups' job priority
(``priorityClassName``, cache/cache.go:1540-1546@v1.16.0-alpha.1). The configuration is the Helm
chart's (gang and drf ``enablePreemptable: false``) with preempt added.

Three nodes of 2 GPUs: ``low`` (4 GPUs) in queue ``default``, ``other`` (2 GPUs) in queue
``team-b``. The preemptor must first pass enqueue — preempt skips a Pending PodGroup
(preempt.go:113@v1.16.0-alpha.1) — and proportion admits a gang only while its queue's
allocation plus the gang fits the cluster (proportion.go:404-438): with ``default`` alone holding
every GPU, ``high`` would stay Pending and nothing would be preempted. The overcommit factor is
2 for the same reason (6 x 1.2 - 6 GPUs in use < 2).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.volcano_disruption.cluster_scene import (
    assert_evicted,
    assert_pipelined,
    condition,
    connect,
    hold,
    job,
    phase,
    pods_of,
    release,
    running,
    submit,
    terminating,
    victims,
    wait_for_event,
)
from tests.waiting import eventually

HELM_WITH_PREEMPT = """\
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


@pytest.fixture
def opened() -> Iterator[list[k8s.ApiClient]]:
    clients: list[k8s.ApiClient] = []
    yield clients
    for client in clients:
        client.close()


def test_a_higher_priority_gang_preempts_a_lower_one_in_the_same_queue(opened: list[k8s.ApiClient]) -> None:
    """preempt.go:162-237@v1.16.0-alpha.1 (victims: Bound/Running pods of another job of the same
    queue; the job's evictions committed once it is pipelined); priority.go:111-149 (strictly
    lower job priority); tier 1 is priority x conformance with gang's vote off, so the full gang
    ``low`` loses two pods and is Unknown (framework/session.go:583-585@v1.16.0-alpha.1); the
    evictor's marks with reason "preempt" (cache/cache.go:270-313, :979); ``high`` pipelined and
    nominated (api/job_info.go:906-911), then bound there once the victims are gone
    (actions/allocate/allocate.go:795-804@v1.16.0-alpha.1)."""
    with SimCluster(
        nodes=3,
        gpus_per_node=2,
        queues={"team-b": None},
        overcommit_factor=2.0,
        schedule_period=0.1,
        scheduler_conf=HELM_WITH_PREEMPT,
    ) as cluster:
        api = connect(cluster, opened)
        for name, value in (("gang-low", 100), ("gang-high", 1000)):
            api.scheduling.create_priority_class(
                k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=value)
            )
        submit(api, "low", job(4, priority_class="gang-low"))
        low_pods = eventually(lambda: running(api, "low", 4), timeout=15, message="low running")
        eventually(lambda: phase(api, "low") == "Running", timeout=10)
        submit(api, "other", job(2, queue="team-b", priority_class="gang-low"))
        eventually(lambda: running(api, "other", 2), timeout=15, message="other running")
        hold(api, low_pods)
        submit(api, "high", job(2, priority_class="gang-high"))

        evicted = victims(api, "low", 2)
        node = evicted[0].spec.node_name
        assert {v.spec.node_name for v in evicted} == {node}
        for victim in evicted:
            assert_evicted(api, victim, "preempt")
        wait_for_event(api, "low", ("Normal", "Evict", "preempt"))
        assert_pipelined(api, "high", node)
        eventually(lambda: phase(api, "low") == "Unknown", timeout=5, message="low Unknown")
        unschedulable = condition(api, "low", "Unschedulable")
        assert unschedulable is not None
        assert unschedulable["message"] == (
            "2/4 tasks in gang unschedulable: pod group is not ready, 2 Releasing, 2 Running, 4 minAvailable"
        )
        assert phase(api, "high") == "Inqueue"
        time.sleep(1.0)  # ten sessions while the victims are held: nothing more goes
        assert len(terminating(api, "low")) == 2
        assert not terminating(api, "other")  # another queue: preempt never takes from it

        release(api, "low")
        eventually(
            lambda: {p.spec.node_name for p in pods_of(api, "high")} == {node},
            timeout=15,
            message="high bound on its nominated node",
        )
        eventually(lambda: phase(api, "high") == "Running", timeout=10)
        # low's recreated pods wait behind the higher priority gang; low takes nothing back.
        time.sleep(1.0)
        assert not terminating(api, "high")
        assert phase(api, "low") == "Unknown"
