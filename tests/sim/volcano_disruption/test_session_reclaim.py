"""reclaim in one pure session (`run_session`): what Volcano v1.16.0-alpha.1 takes, and from whom.

Two 2-GPU nodes; queue ``team-b`` runs job ``b`` (4 x 1 GPU) on all of them; queue ``team-a``
has an admitted gang ``a`` of 2 x 1 GPU. With both queues of weight 1 and these requests the
proportion plugin deserves each queue 2 GPUs, so ``team-b`` is 2 over its share.
"""

from __future__ import annotations

import copy

from gang_sim.controllers.volcano.conf import SchedulerConf
from gang_sim.controllers.volcano.session import SessionConfig, SessionResult, Snapshot, run_session
from tests.sim.volcano_disruption.snapshots import (
    RECLAIM,
    TIER_1,
    condition,
    conf,
    evicted,
    node,
    phase,
    podgroup,
    pods,
    queue,
    running,
    session,
)

ON_ALL = ["node-1", "node-1", "node-2", "node-2"]
PIPELINED = (
    "Pod ml/{} can possibly be assigned to node-1, once resource is released and minAvailable is satisfied"
)


def reclaim_scene(
    b_min: int, scheduler: SchedulerConf = RECLAIM, *, a_phase: str = "Inqueue", b_namespace: str = "ml"
) -> SessionResult:
    b = podgroup("b", b_min, queue="team-b", phase="Running")
    b["metadata"]["namespace"] = b_namespace
    a = podgroup("a", 2, queue="team-a", phase=a_phase, created="2026-01-01T00:01:00Z")
    return session(scheduler, [b, a], running("b", 4, ON_ALL, namespace=b_namespace) + pods("a", 2))


def test_reclaim_takes_what_gang_spares_and_pipelines_the_gang_of_the_owed_queue() -> None:
    """reclaim.go:180-261@v1.16.0-alpha.1 (other queue, Running only, victims lowest first until
    the pod fits); gang.go:97-125@v1.16.0-alpha.1 (at most ReadyTaskNum - minAvailable per job);
    reclaim.go:163-171@v1.16.0-alpha.1 (committed once the job is pipelined); the preemptor's
    message and nominated node: api/job_info.go:906-911@v1.16.0-alpha.1; the victim's phase:
    framework/session.go:581-632@v1.16.0-alpha.1."""
    result = reclaim_scene(b_min=2)
    assert evicted(result) == [("b-worker-0", "reclaim"), ("b-master-0", "reclaim")]
    # Both on node-1: the first node where a's pods fit once its two pods go.
    assert result.nominated == {("ml", "a-master-0"): "node-1", ("ml", "a-worker-0"): "node-1"}
    assert result.bindings == []  # pipelined, not bound
    for pod in ("a-master-0", "a-worker-0"):
        assert result.pod_unschedulable[("ml", pod)] == PIPELINED.format(pod)
    assert phase(result, "a") == "Inqueue"
    assert condition(result, "a")["message"].startswith(
        "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pipelined, 2 minAvailable"
    )
    # b keeps its minimum (2 Running): still Running, gang ready.
    assert phase(result, "b") == "Running"
    assert condition(result, "b")["type"] == "Scheduled"
    assert result.podgroup_status[("ml", "b")]["running"] == 2


def test_a_full_gang_is_spared_by_gang_but_the_vote_falls_through_to_proportion() -> None:
    """session_plugins.go:225-271@v1.16.0-alpha.1: gang's empty list (gang.go:97-125, a job at
    minAvailable gives none) ends tier 1 with nil (:242-244), so tier 2 decides alone (:265-267):
    proportion.go:288-319@v1.16.0-alpha.1 takes team-b's pods while it is over its deserved share.
    The victim gang, below minMember with pods Running and Unschedulable this session, is
    Unknown (framework/session.go:583-585@v1.16.0-alpha.1; gang.go:262-270 message)."""
    result = reclaim_scene(b_min=4)
    assert evicted(result) == [("b-worker-0", "reclaim"), ("b-master-0", "reclaim")]
    assert phase(result, "b") == "Unknown"
    assert condition(result, "b") == {
        "type": "Unschedulable",
        "status": "True",
        "reason": "NotEnoughResources",
        "message": (
            "2/4 tasks in gang unschedulable: pod group is not ready, 2 Releasing, 2 Running, 4 minAvailable"
        ),
    }
    assert result.podgroup_status[("ml", "b")]["running"] == 2
    assert phase(result, "a") == "Inqueue"


def test_when_gang_shares_a_tier_with_proportion_its_empty_list_settles_the_vote() -> None:
    """session_plugins.go:242-244@v1.16.0-alpha.1: an empty list ends its tier with nil, and with
    no later tier voting (proportion sits in the same tier) there are no victims; without victims
    ValidateVictims fails (util/scheduler_helper.go:317-333@v1.16.0-alpha.1) and nothing moves."""
    one_tier = conf(
        "enqueue, allocate, reclaim, backfill",
        "- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: proportion}]\n",
    )
    result = reclaim_scene(b_min=4, scheduler=one_tier)
    assert result.evictions == []
    assert result.nominated == {}
    assert phase(result, "b") == "Running"
    unready = "2/2 tasks in gang unschedulable: pod group is not ready"
    assert condition(result, "a")["message"].startswith(unready)
    # The same with proportion in tier 2 but its reclaim vote switched off (enableReclaimable).
    no_vote = conf(
        "enqueue, allocate, reclaim",
        TIER_1 + "- plugins: [{name: drf}, {name: proportion, enableReclaimable: false}]\n",
    )
    assert reclaim_scene(b_min=4, scheduler=no_vote).evictions == []


def test_conformance_protects_kube_system_only_while_its_tier_decides() -> None:
    """conformance.go:47-66@v1.16.0-alpha.1 drops kube-system pods; its empty list ends tier 1
    (session_plugins.go:242-244@v1.16.0-alpha.1) and tier 2's proportion then takes them
    (:265-267; issue #5896). With proportion's reclaim vote off, they stay."""
    result = reclaim_scene(b_min=2, b_namespace="kube-system")
    assert [reason for _, reason in evicted(result)] == ["reclaim", "reclaim"]
    no_vote = conf(
        "enqueue, allocate, reclaim",
        TIER_1 + "- plugins: [{name: drf}, {name: proportion, enableReclaimable: false}]\n",
    )
    assert reclaim_scene(b_min=2, scheduler=no_vote, b_namespace="kube-system").evictions == []


def test_reclaim_never_takes_from_the_preemptors_own_queue() -> None:
    """reclaim.go:198-206@v1.16.0-alpha.1: only tasks of jobs in another, reclaimable queue."""
    b = podgroup("b", 2, queue="team-b", phase="Running")
    a = podgroup("a", 2, queue="team-b", phase="Inqueue", created="2026-01-01T00:01:00Z")
    result = session(RECLAIM, [b, a], running("b", 4, ON_ALL) + pods("a", 2))
    assert result.evictions == []


def test_a_queue_marked_not_reclaimable_keeps_its_pods() -> None:
    """reclaim.go:198-206@v1.16.0-alpha.1 and api/queue_info.go:80-94@v1.16.0-alpha.1:
    ``spec.reclaimable: false`` takes a queue's pods out of the candidates."""
    b = podgroup("b", 2, queue="team-b", phase="Running")
    a = podgroup("a", 2, queue="team-a", phase="Inqueue", created="2026-01-01T00:01:00Z")
    closed = queue("team-b")
    closed["spec"]["reclaimable"] = False
    snapshot = Snapshot(
        nodes=[node("node-1"), node("node-2")],
        pods=running("b", 4, ON_ALL) + pods("a", 2),
        podgroups=[b, a],
        queues=[queue("default"), queue("team-a"), closed],
    )
    assert run_session(snapshot, SessionConfig(scheduler=RECLAIM)).evictions == []


def test_bound_pods_are_not_reclaimed() -> None:
    """reclaim.go:194@v1.16.0-alpha.1: only Running pods are reclaimees (preempt also takes
    Bound ones: api/helpers.go:70-77@v1.16.0-alpha.1)."""
    b = podgroup("b", 2, queue="team-b", phase="Running")
    a = podgroup("a", 2, queue="team-a", phase="Inqueue", created="2026-01-01T00:01:00Z")
    bound = pods("b", 4, node_names=ON_ALL, phase="Pending")
    assert session(RECLAIM, [b, a], bound + pods("a", 2)).evictions == []


def test_a_pending_podgroup_cannot_reclaim() -> None:
    """reclaim.go:73@v1.16.0-alpha.1 skips ``job.IsPending()`` (api/job_info.go:1263-1267): a gang
    the enqueue gate rejects (here overcommit: 4 x 1.2 - 4 in use < 2) never takes anything."""
    result = reclaim_scene(b_min=2, a_phase="")
    assert result.evictions == []
    assert phase(result, "a") == "Pending"


def test_evictions_are_discarded_when_the_gang_cannot_be_pipelined() -> None:
    """reclaim.go:163-171@v1.16.0-alpha.1: a job's Statement is committed only if it is then
    pipelined. Gang ``a`` of 4 could get 2 GPUs (b spares 2 over its minimum, and team-a's
    deserved 2 stops Preemptive at the third pod, proportion.go:335-388@v1.16.0-alpha.1): not
    pipelined, so the two evictions made for it are undone."""
    b = podgroup("b", 2, queue="team-b", phase="Running")
    a = podgroup("a", 4, queue="team-a", phase="Inqueue", created="2026-01-01T00:01:00Z")
    result = session(RECLAIM, [b, a], running("b", 4, ON_ALL) + pods("a", 4))
    assert result.evictions == []
    assert result.nominated == {}
    assert phase(result, "b") == "Running"
    assert phase(result, "a") == "Inqueue"


def test_preemptable_false_on_a_pod_keeps_it_and_the_others_go() -> None:
    """api/pod_info.go:176-202@v1.16.0-alpha.1 (annotation, else label; absent: true; not a bool:
    false) checked at reclaim.go:194@v1.16.0-alpha.1."""
    b = podgroup("b", 2, queue="team-b", phase="Running")
    a = podgroup("a", 2, queue="team-a", phase="Inqueue", created="2026-01-01T00:01:00Z")
    b_pods = running("b", 4, ON_ALL)
    b_pods[0]["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    b_pods[1]["metadata"]["labels"] = {"volcano.sh/preemptable": "not-a-bool"}
    result = session(RECLAIM, [b, a], b_pods + pods("a", 2))
    assert evicted(result) == [("b-worker-2", "reclaim"), ("b-worker-1", "reclaim")]
    assert set(result.nominated.values()) == {"node-2"}


def test_the_preemptor_is_bound_on_its_nominated_node_once_the_victims_are_gone() -> None:
    """Next sessions: terminating victims are Releasing and still hold node-1
    (api/helpers.go:41-53@v1.16.0-alpha.1), so allocate pipelines the gang onto node-1's
    FutureIdle, nominated node first (actions/allocate/allocate.go:795-804, 882-985@v1.16.0-alpha.1),
    evicting nothing more; once they are gone it binds there."""
    first = reclaim_scene(b_min=2)
    b = podgroup("b", 2, queue="team-b", phase="Running")
    a = podgroup("a", 2, queue="team-a", phase="Inqueue", created="2026-01-01T00:01:00Z")
    b_pods = running("b", 4, ON_ALL)
    for pod in b_pods[:2]:  # the two victims, terminating
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:02:00Z"
    a_pods = pods("a", 2)
    for pod in a_pods:
        pod["status"]["nominatedNodeName"] = first.nominated[("ml", pod["metadata"]["name"])]
    waiting = session(RECLAIM, [b, a], b_pods + a_pods)
    assert waiting.evictions == []
    assert waiting.bindings == []
    assert waiting.pod_unschedulable[("ml", "a-master-0")] == PIPELINED.format("a-master-0")
    assert condition(waiting, "a")["message"] == (
        "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pipelined, 2 minAvailable"
    )
    assert phase(waiting, "b") == "Running"
    assert waiting.podgroup_status[("ml", "b")]["running"] == 2

    gone = session(RECLAIM, [copy.deepcopy(b), a], b_pods[2:] + a_pods)
    assert gone.evictions == []
    assert sorted(gone.bindings) == [("ml", "a-master-0", "node-1"), ("ml", "a-worker-0", "node-1")]


def test_the_default_configuration_evicts_nothing() -> None:
    """pkg/scheduler/util.go:38-51@v1.16.0-alpha.1: the compiled-in actions are enqueue,
    allocate, backfill: no preempt, no reclaim."""
    b = podgroup("b", 2, queue="team-b", phase="Running")
    a = podgroup("a", 2, queue="team-a", phase="Inqueue", created="2026-01-01T00:01:00Z")
    snapshot = Snapshot(
        nodes=[node("node-1"), node("node-2")],
        pods=running("b", 4, ON_ALL) + pods("a", 2),
        podgroups=[b, a],
        queues=[queue("default"), queue("team-a"), queue("team-b")],
    )
    result = run_session(snapshot)
    assert result.evictions == []
    assert result.nominated == {}
    assert phase(result, "a") == "Inqueue"
