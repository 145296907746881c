"""A running gang's disruptions, read from its pods look after look (`airflow_gang.jobs.disruption`).

The marks are the ones the cluster writes before a pod goes (docs/disruptions.md): Volcano's
evictor (``Ready=False`` reason ``Evict`` "Pod is evicted, because of preempt|reclaim" and
``DisruptionTarget`` reason ``PreemptionByScheduler``, volcano ``pkg/scheduler/cache/cache.go``
270-313 at v1.16.0-alpha.1), the Eviction API (``EvictionByEvictionAPI``), the taint eviction
controller and pod GC after a node is lost (``DeletionByTaintManager``, ``DeletionByPodGC``),
and the kubelet's own eviction (phase ``Failed``, reason ``Evicted``, ``TerminationByKubelet``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from airflow_gang.exceptions import GangSpecError
from airflow_gang.jobs.disruption import Disruption, DisruptionTracker, check_max_disruptions
from airflow_gang.jobs.pod_losses import DisruptionReason, live_disruption, pod_loss
from airflow_gang.model.gang_state import GangSnapshot
from airflow_gang.reports.disruption_report import step_lines

JsonDict = dict[str, Any]
T0 = dt.datetime(2026, 12, 5, 6, 0, tzinfo=dt.UTC)


def job(workers: int = 3, min_available: int | None = None, *, succeeded: bool = False) -> JsonDict:
    conditions = [{"type": "Running", "status": "True"}]
    if succeeded:
        conditions.append({"type": "Succeeded", "status": "True"})
    return {
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "ml", "uid": "job-1"},
        "spec": {
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}},
            "runPolicy": {
                "schedulingPolicy": {"queue": "research", "minAvailable": min_available or workers + 1}
            },
        },
        "status": {"conditions": conditions},
    }


def podgroup(phase: str = "Running", min_member: int = 4) -> JsonDict:
    return {"spec": {"minMember": min_member, "queue": "research"}, "status": {"phase": phase}}


def pod(
    index: int, *, uid: str | None = None, node: str | None = "node-1", phase: str = "Running", **extra: Any
) -> JsonDict:
    name = "train-master-0" if index == 0 else f"train-worker-{index - 1}"
    metadata: JsonDict = {"name": name, "uid": uid or f"uid-{index}"}
    status: JsonDict = {"phase": phase}
    if "deleting" in extra:
        metadata["deletionTimestamp"] = extra.pop("deleting")
    status.update(extra)
    return {"metadata": metadata, "spec": {"nodeName": node} if node else {}, "status": status}


def volcano_evicted(index: int, why: str) -> JsonDict:
    message = f"Pod is evicted, because of {why}"
    conditions = [
        {"type": "Ready", "status": "False", "reason": "Evict", "message": message},
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "volcano: preempting to accommodate a higher priority pod",
            "lastTransitionTime": "2026-12-05T06:00:05Z",
        },
    ]
    return pod(index, deleting="2026-12-05T06:00:35Z", conditions=conditions)


def look(
    tracker: DisruptionTracker,
    pods: list[JsonDict],
    *,
    pg: str = "Running",
    now: dt.datetime = T0,
    **job_args: Any,
):  # type: ignore[no-untyped-def]
    seen = GangSnapshot.of(
        job(**job_args), podgroup(pg, min_member=job_args.get("min_available") or 4), pods, "provider"
    )
    return tracker.look(seen, admitted=True, now=now)


def running(n: int = 4) -> list[JsonDict]:
    return [pod(i) for i in range(n)]


def test_volcano_reclaim_is_told_apart_from_preempt_by_its_evict_condition() -> None:
    reclaimed, preempted = pod_loss(volcano_evicted(1, "reclaim")), pod_loss(volcano_evicted(1, "preempt"))
    assert reclaimed is not None
    assert reclaimed.reason is DisruptionReason.RECLAIMED
    assert reclaimed.detail == "Pod is evicted, because of reclaim"
    assert reclaimed.at == "2026-12-05T06:00:05+00:00"
    assert preempted is not None
    assert preempted.reason is DisruptionReason.PREEMPTED


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("EvictionByEvictionAPI", DisruptionReason.EVICTED),
        ("DeletionByTaintManager", DisruptionReason.NODE_LOST),
        ("DeletionByPodGC", DisruptionReason.NODE_LOST),
        ("PreemptionByScheduler", DisruptionReason.PREEMPTED),
        ("TerminationByKubelet", DisruptionReason.EVICTED),
    ],
)
def test_disruption_target_reasons(reason: str, expected: DisruptionReason) -> None:
    condition = {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": "m"}
    loss = pod_loss(pod(1, conditions=[condition]))
    assert loss is not None
    assert loss.reason is expected


def test_kubelet_eviction_without_a_condition_is_an_eviction_with_the_kubelets_words() -> None:
    evicted = pod(1, phase="Failed", reason="Evicted", message="The node was low on resource: memory.")
    loss = pod_loss(evicted)
    assert loss is not None
    assert loss.reason is DisruptionReason.EVICTED
    assert loss.detail == "The node was low on resource: memory."
    assert pod_loss(pod(1, phase="Failed", reason="Error")) is None


def test_a_node_lost_episode_groups_its_pods_requeues_the_full_gang_and_ends_at_readmission() -> None:
    tracker = DisruptionTracker("wait", 3, readmission_timeout=60)
    assert look(tracker, running()).started is None
    taint = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "DeletionByTaintManager",
        "message": "Taint manager: deleting due to NoExecute taint",
        "lastTransitionTime": "2026-12-05T06:00:10Z",
    }
    first = [pod(0), pod(1), pod(2, node="node-2", deleting="x", conditions=[taint]), pod(3, node="node-2")]
    step = look(tracker, first, pg="Unknown", now=T0 + dt.timedelta(seconds=11))
    assert step.started is not None
    assert step.started.reason is DisruptionReason.NODE_LOST
    assert step.started.started_at == "2026-12-05T06:00:10+00:00"  # the cluster's moment, not ours
    assert step.requeued is step.started  # 3 of minMember 4: back in the queue
    assert step.deadline == dt.datetime(2026, 12, 5, 6, 1, 10, tzinfo=dt.UTC)
    assert step.give_up is None
    # The node's second pod goes a moment later: the same episode, no second row.
    second = [pod(0), pod(1), pod(2, node="node-2", deleting="x", conditions=[taint])]
    step = look(tracker, second, pg="Unknown", now=T0 + dt.timedelta(seconds=12))
    assert step.started is None
    assert len(tracker.episodes) == 1
    assert tracker.episodes[0].pods == ["train-worker-1", "train-worker-2"]
    assert tracker.episodes[0].nodes == ["node-2"]
    # Replacements bound on node-1, nothing terminating: re-admitted, the episode ends.
    back = [pod(0), pod(1), pod(2, uid="new-2"), pod(3, uid="new-3")]
    step = look(tracker, back, now=T0 + dt.timedelta(seconds=30))
    assert step.ended is not None
    assert step.ended.readmitted_at == (T0 + dt.timedelta(seconds=30)).isoformat()
    assert tracker.current is None
    assert tracker.deadline is None
    assert [line[1] for line in step_lines(step, "ml/train", 4, 4)] == [
        "gang re-admitted job=ml/train at 2026-12-05T06:00:30+00:00 after disruption #1"
    ]


def test_wait_gives_up_when_the_requeued_gang_is_not_readmitted_in_time() -> None:
    tracker = DisruptionTracker("wait", 3, readmission_timeout=60)
    look(tracker, running())
    step = look(tracker, [pod(0), pod(1), pod(2)], pg="Unknown", now=T0)
    assert step.started is not None
    assert step.started.reason is DisruptionReason.DELETED
    assert (
        look(tracker, [pod(0), pod(1), pod(2)], pg="Unknown", now=T0 + dt.timedelta(seconds=59)).give_up
        is None
    )
    late = look(tracker, [pod(0), pod(1), pod(2)], pg="Unknown", now=T0 + dt.timedelta(seconds=60))
    assert late.give_up is not None
    assert late.give_up.kind == "readmission_timeout"
    assert late.give_up.end_state == "admission_timeout"
    assert "not re-admitted within 60s of its disruption (pods deleted)" in late.give_up.message


def test_retry_gives_the_job_up_at_the_first_disruption() -> None:
    tracker = DisruptionTracker("retry", 3, readmission_timeout=60)
    look(tracker, running())
    step = look(tracker, [pod(0), pod(1), pod(2), volcano_evicted(3, "preempt")])
    assert step.give_up is not None
    assert step.give_up.kind == "disrupted"
    assert step.give_up.message == "disrupted (preempted) with on_disruption='retry'"


def test_max_disruptions_caps_the_episodes_of_one_try() -> None:
    tracker = DisruptionTracker("wait", 1, readmission_timeout=None)
    look(tracker, running())
    for attempt in range(2):
        lost = look(tracker, [pod(0), pod(1), pod(2)], pg="Unknown", now=T0 + dt.timedelta(minutes=attempt))
        assert lost.started is not None
        back = [pod(0), pod(1), pod(2), pod(3, uid=f"again-{attempt}")]
        if lost.give_up is None:
            assert look(tracker, back, now=T0 + dt.timedelta(minutes=attempt, seconds=5)).ended is not None
    assert lost.give_up is not None
    assert "disrupted 2 times in this try, more than max_disruptions=1" in lost.give_up.message


def test_an_elastic_gang_that_keeps_min_available_is_disrupted_but_not_requeued() -> None:
    tracker = DisruptionTracker("wait", 3, readmission_timeout=60)
    look(tracker, running(), min_available=2)
    step = look(
        tracker,
        [pod(0), pod(1), volcano_evicted(2, "reclaim"), volcano_evicted(3, "reclaim")],
        min_available=2,
    )
    assert step.started is not None
    assert step.started.reason is DisruptionReason.RECLAIMED
    assert step.requeued is None
    assert step.deadline is None
    gone = look(tracker, [pod(0), pod(1), pod(2, uid="n2", node=None, phase="Pending")], min_available=2)
    assert gone.ended is not None
    assert gone.ended.readmitted_at is None
    assert tracker.episodes[0].pods == ["train-worker-1", "train-worker-2"]


def test_a_pod_that_failed_on_its_own_and_is_replaced_is_the_restart_policy_not_a_disruption() -> None:
    tracker = DisruptionTracker("retry", 3)
    look(tracker, running())
    crashed = pod(2, phase="Failed", containerStatuses=[{"state": {"terminated": {"exitCode": 1}}}])
    assert look(tracker, [pod(0), pod(1), crashed, pod(3)]).started is None
    assert look(tracker, [pod(0), pod(1), pod(3)]).started is None  # deleted by its controller to restart it
    assert tracker.episodes == []


def test_pods_going_after_a_replica_succeeded_are_the_jobs_own_cleanup() -> None:
    tracker = DisruptionTracker("retry", 3)
    look(tracker, running())
    assert look(tracker, [pod(0, phase="Succeeded"), pod(1, deleting="x")]).started is None
    assert look(tracker, [pod(0, phase="Succeeded")], succeeded=True).started is None
    assert tracker.episodes == []


def test_a_sensor_only_reports() -> None:
    tracker = DisruptionTracker(None, None, None)
    look(tracker, running())
    step = look(tracker, [pod(0), pod(1), pod(2)], pg="Unknown", now=T0 + dt.timedelta(hours=5))
    assert step.started is not None
    assert step.give_up is None
    assert step.deadline is None


def test_an_episode_round_trips_through_json_and_reads_well() -> None:
    episode = Disruption(
        2, DisruptionReason.NODE_LOST, "Taint manager: deleting", "t", "q", ["a", "b"], ["n2"]
    )
    assert Disruption.from_json(episode.to_json()) == episode
    assert episode.describe(4) == "node lost: 2 of 4 pods (a, b on n2): Taint manager: deleting"


@pytest.mark.parametrize("value", [-1, 1.5, "3", True])
def test_max_disruptions_is_checked_before_anything_is_sent(value: object) -> None:
    with pytest.raises(GangSpecError, match="max_disruptions=") as raised:
        check_max_disruptions(value)
    assert raised.value.field == "max_disruptions"


def test_the_page_sees_a_disruption_from_the_objects_alone() -> None:
    """No memory of earlier looks: marked pods now, or a running gang below its minMember."""
    marked = GangSnapshot.of(
        job(), podgroup("Unknown"), [pod(0), pod(1), pod(2), volcano_evicted(3, "reclaim")], "provider"
    )
    seen = live_disruption(marked)
    assert seen is not None
    assert seen["reason"] == "reclaimed"
    assert seen["pods"] == ["train-worker-2"]
    assert seen["since"] == "2026-12-05T06:00:05+00:00"
    assert seen["requeued"] is True
    replaced = [pod(0), pod(1), pod(2), pod(3, uid="new", node=None, phase="Pending")]
    below = live_disruption(GangSnapshot.of(job(), podgroup("Unknown"), replaced, "provider"))
    assert below is not None
    assert below["reason"] is None
    assert below["detail"] == "the gang holds 3 of its minMember 4 pods"
    assert live_disruption(GangSnapshot.of(job(), podgroup("Running"), running(), "provider")) is None
    done = GangSnapshot.of(
        job(succeeded=True), podgroup("Running"), [volcano_evicted(1, "preempt")], "provider"
    )
    assert live_disruption(done) is None


def test_a_marked_loss_counts_even_while_other_replicas_have_finished() -> None:
    """Script replicas (and uneven ranks) finish apart: a mark still tells a disruption, and a
    replica that succeeded still counts towards minMember, as Volcano's ReadyTaskNum counts it."""
    tracker = DisruptionTracker("wait", 3, readmission_timeout=60)
    look(tracker, running())
    taken = [pod(0), pod(1, phase="Succeeded"), pod(2), volcano_evicted(3, "preempt")]
    step = look(tracker, taken)
    assert step.started is not None
    assert step.started.reason is DisruptionReason.PREEMPTED
    back = look(tracker, [pod(0), pod(1, phase="Succeeded"), pod(2), pod(3, uid="again")])
    assert back.ended is not None
    assert back.ended.readmitted_at is not None


def test_a_pod_taken_before_the_first_look_counts_by_its_mark_once() -> None:
    """A trigger starts a few seconds after the task deferred: an eviction in between is still
    seen while the evicted pod is Terminating, and counted once however many looks see it."""
    tracker = DisruptionTracker("wait", 3, readmission_timeout=60)
    taken = [pod(0), pod(1), pod(2), volcano_evicted(3, "reclaim")]
    first = look(tracker, taken, pg="Unknown")
    assert first.started is not None
    assert first.started.pods == ["train-worker-2"]
    again = look(tracker, taken, pg="Unknown")
    assert again.started is None
    assert tracker.episodes[0].pods == ["train-worker-2"]
