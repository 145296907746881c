"""reclaim on a running `SimCluster`, seen as the provider sees it: pods, PodGroups and Events
over HTTP with the official client.

Two nodes of 2 GPUs; queues ``team-a`` and ``team-b`` (weight 1 each). ``b-job`` (4 x 1 GPU in
team-b) runs on all four GPUs; then gang ``a-job`` (2 x 1 GPU in team-a) arrives. The proportion
plugin deserves each queue 2 GPUs, so team-b is 2 GPUs over its share and team-a is owed 2.
The overcommit factor is 2: with Volcano's 1.2 the enqueue gate would keep a-job Pending on a
full cluster, and a Pending PodGroup never reclaims (reclaim.go:73@v1.16.0-alpha.1).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.volcano_disruption.cluster_scene import (
    RECLAIM_CONF,
    Api,
    assert_evicted,
    assert_pipelined,
    condition,
    connect,
    events,
    hold,
    job,
    phase,
    pod_condition,
    pods_of,
    release,
    running,
    submit,
    terminating,
    victims,
    wait_for_event,
)
from tests.waiting import eventually

QUEUES = {"team-a": None, "team-b": None}


def evicted_pods(api: Api) -> list[str]:
    """The uids of the pods with an ``Evict`` event (a recreated pod reuses its victim's name)."""
    listed = api.core.list_namespaced_event("default").items
    return [e.involved_object.uid for e in listed if e.reason == "Evict" and e.involved_object.kind == "Pod"]


@pytest.fixture
def opened() -> Iterator[list[k8s.ApiClient]]:
    clients: list[k8s.ApiClient] = []
    yield clients
    for client in clients:
        client.close()


def reclaim_cluster(scheduler_conf: Any = RECLAIM_CONF) -> SimCluster:
    return SimCluster(
        nodes=2,
        gpus_per_node=2,
        queues=QUEUES,
        overcommit_factor=2.0,
        schedule_period=0.1,
        scheduler_conf=scheduler_conf,
    )


def start_b_then_a(api: Api, *, b_min: int | None) -> list[Any]:
    """b-job running on every GPU and held, then a-job submitted; returns b-job's pods."""
    submit(api, "b-job", job(4, queue="team-b", min_available=b_min))
    b_pods = eventually(lambda: running(api, "b-job", 4), timeout=15, message="b-job running")
    eventually(lambda: phase(api, "b-job") == "Running", timeout=10, message="b-job PodGroup Running")
    hold(api, b_pods)
    submit(api, "a-job", job(2, queue="team-a"))
    return b_pods


def test_reclaim_evicts_what_gang_spares_and_the_owed_gang_is_pipelined_then_bound(
    opened: list[k8s.ApiClient],
) -> None:
    """reclaim.go:180-261@v1.16.0-alpha.1 (other queue, Running pods, reason "reclaim");
    gang.go:97-125@v1.16.0-alpha.1 (b-job, minAvailable 2 of 4, spares 2); the evictor's events
    and conditions, delete with the pod's own grace period: cache/cache.go:270-313, 938-981;
    b-job keeps minMember scheduled: Running (framework/session.go:598-604); a-job pipelined,
    nominated, then bound there by allocate once the victims are gone
    (actions/allocate/allocate.go:795-804@v1.16.0-alpha.1)."""
    with reclaim_cluster() as cluster:
        api = connect(cluster, opened)
        start_b_then_a(api, b_min=2)
        evicted = victims(api, "b-job", 2)
        node = evicted[0].spec.node_name
        assert {v.spec.node_name for v in evicted} == {node}, "both GPUs of one node, for the whole gang"
        for victim in evicted:
            assert_evicted(api, victim, "reclaim")
        wait_for_event(api, "b-job", ("Normal", "Evict", "reclaim"))
        assert_pipelined(api, "a-job", node)
        eventually(lambda: phase(api, "a-job") == "Inqueue", timeout=5)
        waiting = condition(api, "a-job", "Unschedulable")
        assert waiting is not None
        assert waiting["message"].startswith(
            "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pipelined, 2 minAvailable"
        )
        eventually(lambda: phase(api, "b-job") == "Running", timeout=5)
        assert (podgroup_status := condition(api, "b-job", "Scheduled")) is not None, podgroup_status

        # While the victims terminate (held), sessions go on: nothing more is evicted, a-job waits.
        time.sleep(1.0)
        assert len(terminating(api, "b-job")) == 2
        assert not any(p.spec.node_name for p in pods_of(api, "a-job"))

        release(api, "b-job")
        bound = eventually(
            lambda: (nodes := {p.spec.node_name for p in pods_of(api, "a-job")}) == {node} and nodes,
            timeout=15,
            message="a-job bound on the nominated node",
        )
        assert bound == {node}
        eventually(lambda: phase(api, "a-job") == "Running", timeout=10)
        # The operator recreates b-job's two pods; they wait (b-job is not starving) and nobody
        # else is evicted.
        eventually(lambda: len(pods_of(api, "b-job")) == 4, timeout=10)
        time.sleep(1.0)
        assert phase(api, "b-job") == "Running"
        assert not terminating(api, "b-job")
        assert not [p for p in pods_of(api, "b-job") if pod_condition(p, "DisruptionTarget")]
        assert sorted(evicted_pods(api)) == sorted(v.metadata.uid for v in evicted)


def test_a_full_gang_is_reclaimed_through_tier_2_and_turns_unknown(opened: list[k8s.ApiClient]) -> None:
    """session_plugins.go:225-271@v1.16.0-alpha.1: gang gives no pod of b-job (minAvailable ==
    replicas, gang.go:97-125), its empty list ends tier 1 with nil (:242-244) and tier 2's
    proportion (proportion.go:288-319) takes team-b's pods over its deserved share anyway. b-job
    has Running pods and an Unschedulable condition from that session: Unknown
    (framework/session.go:583-585, gang.go:262-270@v1.16.0-alpha.1)."""
    with reclaim_cluster() as cluster:
        api = connect(cluster, opened)
        start_b_then_a(api, b_min=None)
        evicted = victims(api, "b-job", 2)
        for victim in evicted:
            assert_evicted(api, victim, "reclaim")
        assert_pipelined(api, "a-job", evicted[0].spec.node_name)
        eventually(lambda: phase(api, "b-job") == "Unknown", timeout=5, message="b-job Unknown")
        unschedulable = condition(api, "b-job", "Unschedulable")
        assert unschedulable is not None
        assert (unschedulable["status"], unschedulable["reason"], unschedulable["message"]) == (
            "True",
            "NotEnoughResources",
            "2/4 tasks in gang unschedulable: pod group is not ready, 2 Releasing, 2 Running, 4 minAvailable",
        )


ONE_TIER = {
    "actions": "enqueue, allocate, reclaim, backfill",
    "tiers": [
        {"plugins": [{"name": name} for name in ("priority", "gang", "conformance", "proportion")]},
        {"plugins": [{"name": "drf"}, {"name": "predicates"}]},
    ],
}


def test_when_gangs_list_settles_the_vote_a_full_gang_keeps_its_pods(opened: list[k8s.ApiClient]) -> None:
    """session_plugins.go:242-244@v1.16.0-alpha.1: gang's empty list ends the tier that also holds
    proportion, and no later tier has a reclaim vote: no victims; ValidateVictims then fails
    (util/scheduler_helper.go:317-333) and a-job waits, Inqueue and unschedulable."""
    with reclaim_cluster(ONE_TIER) as cluster:
        api = connect(cluster, opened)
        start_b_then_a(api, b_min=None)
        eventually(lambda: condition(api, "a-job", "Unschedulable") is not None, timeout=10)
        time.sleep(1.5)  # fifteen sessions
        assert terminating(api, "b-job") == []
        assert phase(api, "b-job") == "Running"
        assert phase(api, "a-job") == "Inqueue"
        assert not any(p.status.nominated_node_name for p in pods_of(api, "a-job"))
        assert not [e for e in events(api, "b-job") if e[1] == "Evict"]


PROTECTED = "volcano.sh/preemptable"


@pytest.mark.gang_cluster(
    nodes=2,
    gpus_per_node=2,
    queues=QUEUES,
    overcommit_factor=2.0,
    schedule_period=0.1,
    scheduler_conf=RECLAIM_CONF,
)
def test_preemptable_false_keeps_a_pod_and_reclaim_looks_elsewhere(
    gang_cluster: SimCluster, opened: list[k8s.ApiClient]
) -> None:
    """api/pod_info.go:176-202@v1.16.0-alpha.1 (``volcano.sh/preemptable``: annotation, else
    label) checked at reclaim.go:194@v1.16.0-alpha.1: b-job's pods on sim-node-1 are labelled
    "false", so both victims come from sim-node-2 and a-job is nominated there. (The cluster
    comes from the ``gang_cluster`` fixture with ``scheduler_conf`` in its marker.)"""
    api = connect(gang_cluster, opened)
    submit(api, "b-job", job(4, queue="team-b", min_available=2))
    b_pods = eventually(lambda: running(api, "b-job", 4), timeout=15, message="b-job running")
    eventually(lambda: phase(api, "b-job") == "Running", timeout=10)
    protected = sorted(p.metadata.name for p in b_pods if p.spec.node_name == "sim-node-1")
    for name in protected:
        api.core.patch_namespaced_pod(name, "default", {"metadata": {"labels": {PROTECTED: "false"}}})
    hold(api, b_pods)
    submit(api, "a-job", job(2, queue="team-a"))
    evicted = victims(api, "b-job", 2)
    assert {v.spec.node_name for v in evicted} == {"sim-node-2"}
    assert_pipelined(api, "a-job", "sim-node-2")
    for name in protected:
        pod = api.core.read_namespaced_pod(name, "default")
        assert pod.metadata.deletion_timestamp is None
        assert not [c for c in pod.status.conditions or [] if c.type == "DisruptionTarget"]


def test_the_default_configuration_evicts_nothing(opened: list[k8s.ApiClient]) -> None:
    """pkg/scheduler/util.go:38-51@v1.16.0-alpha.1: without a configuration the actions are
    enqueue, allocate, backfill: a-job waits for b-job, whatever queue shares say."""
    with reclaim_cluster(None) as cluster:
        api = connect(cluster, opened)
        start_b_then_a(api, b_min=2)
        eventually(lambda: condition(api, "a-job", "Unschedulable") is not None, timeout=10)
        time.sleep(1.5)  # fifteen sessions
        assert terminating(api, "b-job") == []
        assert phase(api, "b-job") == "Running"
        assert phase(api, "a-job") == "Inqueue"
        assert not any(p.status.nominated_node_name or p.spec.node_name for p in pods_of(api, "a-job"))
        assert not [e for e in events(api, "b-job") if e[1] == "Evict"]
