"""Volcano's scheduling decisions, session by session, on hand-built cluster snapshots."""

from __future__ import annotations

from gang_sim.controllers.volcano.session import SessionMemo, Snapshot, run_session
from tests.sim.volcano_objects import node, podgroup, pods, queue


def seed_snapshot(jobs: int = 6) -> Snapshot:
    groups = [podgroup(f"job-{i}", 4, created=f"2026-01-01T00:00:0{i}Z") for i in range(jobs)]
    all_pods = [p for i in range(jobs) for p in pods(f"job-{i}", 4)]
    return Snapshot(
        nodes=[node("node-1"), node("node-2")],
        pods=all_pods,
        podgroups=groups,
        queues=[queue("root"), queue("default")],
    )


def test_seed_first_session_admits_and_binds_exactly_one_gang_split_across_nodes() -> None:
    result = run_session(seed_snapshot())
    assert sorted((pod, n) for _, pod, n in result.bindings) == [
        ("job-0-master-0", "node-1"),
        ("job-0-worker-0", "node-1"),
        ("job-0-worker-1", "node-2"),
        ("job-0-worker-2", "node-2"),
    ]
    statuses = result.podgroup_status
    assert statuses[("ml", "job-0")]["phase"] == "Inqueue", "bound this session, Running only next session"
    assert [statuses[("ml", f"job-{i}")]["phase"] for i in range(1, 6)] == ["Pending"] * 5


def test_seed_waiting_gangs_carry_the_real_unschedulable_condition_and_events() -> None:
    result = run_session(seed_snapshot())
    condition = result.podgroup_status[("ml", "job-1")]["conditions"][-1]
    assert condition == {
        "type": "Unschedulable",
        "status": "True",
        "reason": "NotEnoughResources",
        "message": (
            "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
            "Pending: 4 Unschedulable"
        ),
    }
    job1_events = {(e.type, e.reason, e.message) for e in result.events if e.podgroup == ("ml", "job-1")}
    assert (
        "Normal",
        "Unschedulable",
        "resource in cluster is overused: overused nvidia.com/gpu",
    ) in job1_events
    assert (
        "Normal",
        "Unschedulable",
        "queue resource quota insufficient: insufficient nvidia.com/gpu",
    ) in job1_events
    winner = result.podgroup_status[("ml", "job-0")]["conditions"][-1]
    assert winner == {
        "type": "Scheduled",
        "status": "True",
        "reason": "tasks in gang are ready to be scheduled",
        "message": "",
    }
    assert ("ml", "job-1-master-0") in result.pod_unschedulable


def test_a_bound_gang_turns_running_one_session_later_and_completed_when_done() -> None:
    snapshot = seed_snapshot(jobs=1)
    bound = pods("job-0", 4, node_names=["node-1", "node-1", "node-2", "node-2"])
    snapshot = Snapshot(snapshot.nodes, bound, [podgroup("job-0", 4, phase="Inqueue")], snapshot.queues)
    assert run_session(snapshot).podgroup_status[("ml", "job-0")]["phase"] == "Running"
    done = pods("job-0", 4, node_names=["node-1", "node-1", "node-2", "node-2"], phase="Succeeded")
    status = run_session(
        Snapshot(snapshot.nodes, done, [podgroup("job-0", 4, phase="Running")], snapshot.queues)
    )
    assert status.podgroup_status[("ml", "job-0")] | {"conditions": []} == {
        "phase": "Completed",
        "conditions": [],
        "running": 0,
        "succeeded": 4,
        "failed": 0,
    }


def test_without_min_resources_every_gang_enqueues_but_only_one_binds() -> None:
    groups = [
        podgroup(f"job-{i}", 4, created=f"2026-01-01T00:00:0{i}Z", min_resources=False) for i in range(3)
    ]
    snapshot = Snapshot(
        [node("node-1"), node("node-2")],
        [p for i in range(3) for p in pods(f"job-{i}", 4)],
        groups,
        [queue("default")],
    )
    result = run_session(snapshot)
    assert {pod.split("-master")[0].split("-worker")[0] for _, pod, _ in result.bindings} == {"job-0"}
    assert [result.podgroup_status[("ml", f"job-{i}")]["phase"] for i in range(3)] == ["Inqueue"] * 3
    message = result.podgroup_status[("ml", "job-1")]["conditions"][-1]["message"]
    assert message == (
        "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
        "Pending: 4 Unschedulable. Origin reason is job-1-master-0: "
        "0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu."
    )


def test_overcommit_admits_one_extra_gang_across_queues_that_then_cannot_bind() -> None:
    # 3+2 GPUs; a 4-GPU job runs in "default" (placed 3+1); a 2x1-GPU job in "team-b" is admitted
    # because 5 x 1.2 - 4 = 2, but only one GPU is free (docs/architecture.md#volcano-messages).
    nodes = [node("node-a", gpus=3), node("node-b", gpus=2)]
    running = pods("big", 4, node_names=["node-a", "node-a", "node-a", "node-b"], phase="Running")
    small = pods("small", 2)
    groups = [
        podgroup("big", 4, phase="Running"),
        podgroup("small", 2, queue="team-b", created="2026-01-01T00:00:05Z"),
    ]
    result = run_session(Snapshot(nodes, running + small, groups, [queue("default"), queue("team-b")]))
    assert result.bindings == []
    status = result.podgroup_status[("ml", "small")]
    assert status["phase"] == "Inqueue"
    assert status["conditions"][-1]["message"] == (
        "1/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; "
        "Pending: 1 Schedulable, 1 Unschedulable. Origin reason is small-worker-0: "
        "0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu."
    )


def test_queue_capability_limits_admission_within_the_queue() -> None:
    groups = [podgroup(f"job-{i}", 2, queue="research", created=f"2026-01-01T00:00:0{i}Z") for i in range(2)]
    snapshot = Snapshot(
        [node("node-1", gpus=4)],
        [p for i in range(2) for p in pods(f"job-{i}", 2)],
        groups,
        [queue("default"), queue("research", capability={"nvidia.com/gpu": "2"})],
    )
    result = run_session(snapshot)
    assert [result.podgroup_status[("ml", f"job-{i}")]["phase"] for i in range(2)] == ["Inqueue", "Pending"]
    reasons = {e.message for e in result.events if e.podgroup == ("ml", "job-1") and e.type == "Normal"}
    assert reasons == {"queue resource quota insufficient: insufficient nvidia.com/gpu"}
    assert result.queue_status["research"]["allocated"] == {}
    assert result.queue_status["research"]["inqueue"] == 1


def test_a_closed_queue_admits_nothing() -> None:
    snapshot = Snapshot(
        [node("node-1")],
        pods("job-0", 1),
        [podgroup("job-0", 1, queue="frozen")],
        [queue("frozen", state="Closed")],
    )
    result = run_session(snapshot)
    assert result.bindings == []
    assert result.podgroup_status[("ml", "job-0")]["phase"] == "Pending"
    assert any("queue frozen is Closed" in e.message for e in result.events)


def test_higher_priority_gang_is_admitted_first_even_if_younger() -> None:
    groups = [
        podgroup("old-low", 4, created="2026-01-01T00:00:00Z"),
        podgroup("young-high", 4, created="2026-01-01T00:00:09Z", priority_class="high"),
    ]
    snapshot = Snapshot(
        [node("node-1"), node("node-2")],
        pods("old-low", 4) + pods("young-high", 4),
        groups,
        [queue("default")],
        priority_classes=[{"metadata": {"name": "high"}, "value": 1000}],
    )
    result = run_session(snapshot)
    assert {pod.rsplit("-", 2)[0] for _, pod, _ in result.bindings} == {"young-high"}


def test_queue_status_counts_and_allocation_follow_the_groups() -> None:
    nodes = [node("node-1"), node("node-2")]
    running = pods("job-0", 4, node_names=["node-1", "node-1", "node-2", "node-2"], phase="Running")
    groups = [podgroup("job-0", 4, phase="Running"), podgroup("job-1", 4, created="2026-01-01T00:00:09Z")]
    result = run_session(Snapshot(nodes, running + pods("job-1", 4), groups, [queue("default")]))
    assert result.queue_status["default"] == {
        "state": "Open",
        "allocated": {"nvidia.com/gpu": "4"},
        "pending": 1,
        "inqueue": 0,
        "running": 1,
        "unknown": 0,
        "completed": 0,
    }


def test_the_pod_that_fits_in_an_unbindable_gang_says_where_it_could_go() -> None:
    nodes = [node("node-a", gpus=3), node("node-b", gpus=2)]
    running = pods("big", 4, node_names=["node-a", "node-a", "node-a", "node-b"], phase="Running")
    groups = [podgroup("big", 4, phase="Running"), podgroup("small", 2, queue="team-b")]
    result = run_session(
        Snapshot(nodes, running + pods("small", 2), groups, [queue("default"), queue("team-b")])
    )
    assert result.pod_unschedulable[("ml", "small-master-0")] == (
        "Pod ml/small-master-0 can possibly be assigned to node-b, once minAvailable is satisfied"
    )
    assert result.pod_unschedulable[("ml", "small-worker-0")].startswith("1/2 tasks in gang unschedulable")


def test_a_completed_gang_stays_scheduled_and_reserves_nothing() -> None:
    nodes = [node("node-1"), node("node-2")]
    done = pods("job-0", 4, node_names=["node-1", "node-1", "node-2", "node-2"], phase="Succeeded")
    groups = [podgroup("job-0", 4, phase="Completed"), podgroup("job-1", 4, created="2026-01-01T00:00:09Z")]
    result = run_session(Snapshot(nodes, done + pods("job-1", 4), groups, [queue("default")]))
    completed = result.podgroup_status[("ml", "job-0")]
    assert completed["phase"] == "Completed"
    assert completed["conditions"][-1]["type"] == "Scheduled"
    assert result.podgroup_status[("ml", "job-1")]["phase"] == "Inqueue", (
        "the finished gang holds no capacity"
    )
    assert len(result.bindings) == 4


def test_the_pods_of_a_waiting_gang_get_failed_scheduling_with_the_fit_error() -> None:
    result = run_session(seed_snapshot())
    failed = {
        e.pod: (e.type, e.reason, e.message) for e in result.pod_events if e.pod[1].startswith("job-1-")
    }
    fit_error = "pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable"
    assert failed == {
        ("ml", name): ("Warning", "FailedScheduling", fit_error)
        for name in ("job-1-master-0", "job-1-worker-0", "job-1-worker-1", "job-1-worker-2")
    }
    assert not [e for e in result.pod_events if e.pod[1].startswith("job-0-")], "job-0 is bound"


def test_the_binding_session_warns_that_the_ready_gang_is_binding() -> None:
    result = run_session(seed_snapshot())
    winner = {(e.type, e.reason, e.message) for e in result.events if e.podgroup == ("ml", "job-0")}
    assert winner == {
        ("Normal", "Scheduled", "pod group is ready"),
        (
            "Warning",
            "Unschedulable",
            "0/4 tasks in gang unschedulable: pod group is ready, 4 Binding, 4 minAvailable",
        ),
    }


def test_a_gang_whose_pods_are_still_being_created_is_left_out_of_the_session() -> None:
    """vc gang JobValid: fewer pods than minMember -> no enqueue, no bind, no condition, no event."""
    cluster = seed_snapshot(jobs=0)
    waiting = podgroup("partial", 2, phase="Inqueue")
    waiting["status"]["conditions"] = [{"type": "Scheduled", "status": "True", "reason": "earlier"}]
    snapshot = Snapshot(
        cluster.nodes,
        pods("partial", 1) + pods("pending", 1),
        [waiting, podgroup("pending", 2)],
        cluster.queues,
    )
    result = run_session(snapshot)
    assert result.bindings == []
    assert result.podgroup_status[("ml", "partial")]["phase"] == "Inqueue"
    assert result.podgroup_status[("ml", "partial")]["conditions"] == waiting["status"]["conditions"]
    assert result.podgroup_status[("ml", "pending")]["phase"] == "Pending", "not enqueued either"
    assert result.events == []
    assert result.pod_events == []
    assert result.pod_unschedulable == {}
    # The missing pod arrives: the next session binds the whole gang.
    snapshot = Snapshot(cluster.nodes, pods("partial", 2), [waiting], cluster.queues)
    assert len(run_session(snapshot).bindings) == 2


def test_a_memo_reuses_unchanged_gangs_and_decides_a_changed_one_anew() -> None:
    """SessionMemo: same PodGroup and pod objects, same admission -> same status, no repeated
    pod conditions or events; a replaced pod object makes its gang count as changed."""
    snapshot = seed_snapshot(jobs=3)
    memo = SessionMemo()
    first = run_session(snapshot, memo=memo)
    assert first.unchanged == set()
    assert ("ml", "job-1-master-0") in first.pod_unschedulable
    waiting_events = [e for e in first.events if e.podgroup == ("ml", "job-1")]
    assert [e.reason for e in waiting_events] == ["Unschedulable"] * len(waiting_events)
    assert waiting_events

    # The same cluster state (no binding happened): every gang is decided as before.
    unbound = Snapshot(snapshot.nodes, snapshot.pods, snapshot.podgroups, snapshot.queues)
    again = run_session(unbound, memo=memo)
    assert again.unchanged == {("ml", "job-0"), ("ml", "job-1"), ("ml", "job-2")}
    assert again.bindings == first.bindings, "placements are decided every session all the same"
    assert again.podgroup_status[("ml", "job-1")] == first.podgroup_status[("ml", "job-1")]
    restated = {(e.type, e.reason) for e in again.events if e.podgroup in again.unchanged}
    assert restated <= {("Normal", "Unschedulable")}, "only the enqueue gate's rejections are restated"
    assert not [k for k in again.pod_unschedulable if k[1].startswith(("job-1", "job-2"))]
    assert not [e for e in again.pod_events if e.pod[1].startswith(("job-1", "job-2"))]

    # A pod of job-2 changes (a new object, as the informer stores it): job-2 is decided anew.
    pods_now = [dict(p) if p["metadata"]["name"] == "job-2-worker-0" else p for p in snapshot.pods]
    changed = run_session(Snapshot(snapshot.nodes, pods_now, snapshot.podgroups, snapshot.queues), memo=memo)
    assert ("ml", "job-2") not in changed.unchanged
    assert ("ml", "job-1") in changed.unchanged
    assert ("ml", "job-2-worker-0") in changed.pod_unschedulable
