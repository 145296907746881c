"""preempt in one pure session (`run_session`), and how plugin votes combine across tiers.

Job priority is the value of the PriorityClass a PodGroup names (``priorityClassName``,
cache/cache.go:1540-1546@v1.16.0-alpha.1): ``low`` 100, ``high`` 1000.
"""

from __future__ import annotations

from gang_sim.controllers.volcano.conf import SchedulerConf
from gang_sim.controllers.volcano.model import Group, SessionResult
from gang_sim.controllers.volcano.plugins import Plugins
from gang_sim.controllers.volcano.state import Job, SessionState, Task
from tests.sim.volcano_disruption.snapshots import (
    HELM_PREEMPT,
    PREEMPT,
    condition,
    conf,
    evicted,
    phase,
    podgroup,
    pods,
    running,
    session,
)

CLASSES = [
    {"metadata": {"name": "low"}, "value": 100},
    {"metadata": {"name": "high"}, "value": 1000},
]
ON_ALL = ["node-1", "node-1", "node-2", "node-2"]


def preempt_scene(
    scheduler: SchedulerConf, *, low_min: int = 4, high: str = "high", high_queue: str = "default"
) -> SessionResult:
    low = podgroup("low", low_min, phase="Running", priority_class="low")
    urgent = podgroup(
        "urgent", 2, queue=high_queue, phase="Inqueue", priority_class=high, created="2026-01-01T00:01:00Z"
    )
    return session(
        scheduler,
        [low, urgent],
        running("low", 4, ON_ALL) + pods("urgent", 2),
        queues=("team-a",),
        priority_classes=CLASSES,
    )


def test_a_higher_priority_gang_preempts_a_lower_one_in_its_queue() -> None:
    """preempt.go:162-237@v1.16.0-alpha.1 (same queue, another job, Bound/Running, committed once
    pipelined); priority.go:111-149@v1.16.0-alpha.1 (strictly lower job priority); with the Helm
    chart's tiers (gang and drf enablePreemptable: false) tier 1 is priority x conformance, and a
    full gang loses pods below its minimum: Unknown (framework/session.go:583-585@v1.16.0-alpha.1).
    Eviction stops once the queue is Allocatable for the pod and it fits FutureIdle (preempt.go:398)."""
    result = preempt_scene(HELM_PREEMPT)
    assert evicted(result) == [("low-worker-0", "preempt"), ("low-master-0", "preempt")]
    assert result.nominated == {("ml", "urgent-master-0"): "node-1", ("ml", "urgent-worker-0"): "node-1"}
    assert phase(result, "low") == "Unknown"
    assert condition(result, "low")["message"] == (
        "2/4 tasks in gang unschedulable: pod group is not ready, 2 Releasing, 2 Running, 4 minAvailable"
    )
    assert phase(result, "urgent") == "Inqueue"
    assert result.bindings == []


def test_equal_priority_takes_nothing() -> None:
    """priority.go:127-135@v1.16.0-alpha.1: a job of equal priority is no victim; tier 2 has no
    enabled preemptable vote in the Helm tiers, so the vote is nil (session_plugins.go:274-321)."""
    assert preempt_scene(HELM_PREEMPT, high="low").evictions == []


def test_preempt_never_takes_from_another_queue() -> None:
    """preempt.go:215@v1.16.0-alpha.1: ``job.Queue == preemptorJob.Queue`` for victims of
    another job (reclaim is the action that takes across queues)."""
    assert preempt_scene(HELM_PREEMPT, high_queue="team-a").evictions == []


def test_with_the_compiled_in_tiers_gang_spares_the_full_gang_but_drf_in_tier_2_does_not() -> None:
    """session_plugins.go:274-321@v1.16.0-alpha.1: tier 1 is priority x gang x conformance; gang
    gives no pod of a job at minAvailable (gang.go:97-125), its empty list ends tier 1 with nil
    (:292-294), and tier 2's drf decides alone (:315-317): drf.go:222-263@v1.16.0-alpha.1 takes a
    pod while the preemptor's dominant share with it is <= the victim job's without it
    (1/4 <= 3/4, then 2/4 <= 2/4)."""
    result = preempt_scene(PREEMPT)
    assert evicted(result) == [("low-worker-0", "preempt"), ("low-master-0", "preempt")]
    # drf's vote off as well: gang's empty list is then the last word and nothing moves.
    no_drf = conf(
        "enqueue, allocate, preempt",
        "- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n"
        "- plugins: [{name: drf, enablePreemptable: false}, {name: proportion}]\n",
    )
    assert preempt_scene(no_drf).evictions == []
    # An elastic job (minAvailable 2 of 4) gives its two extra pods under gang's vote in tier 1.
    elastic = evicted(preempt_scene(PREEMPT, low_min=2))
    assert [name for name, _ in elastic] == ["low-worker-0", "low-master-0"]


def test_a_gang_that_loses_every_pod_goes_back_to_pending() -> None:
    """framework/session.go:606-610@v1.16.0-alpha.1: no pod scheduled and not Inqueue: Pending;
    and Running pods but no Unschedulable condition is needed for Unknown (:583-585) — here none
    is Running any more (Releasing, api/helpers.go:41-53)."""
    low = podgroup("low", 2, phase="Running", priority_class="low")
    urgent = podgroup("urgent", 2, phase="Inqueue", priority_class="high", created="2026-01-01T00:01:00Z")
    result = session(
        HELM_PREEMPT,
        [low, urgent],
        running("low", 2, ["node-1", "node-1"]) + pods("urgent", 2),
        nodes=1,
        queues=(),
        priority_classes=CLASSES,
    )
    assert sorted(evicted(result)) == [("low-master-0", "preempt"), ("low-worker-0", "preempt")]
    assert phase(result, "low") == "Pending"
    assert result.podgroup_status[("ml", "low")]["running"] == 0


def test_a_nominated_preemptor_does_not_preempt_again() -> None:
    """preempt.go:440-477@v1.16.0-alpha.1 (``taskEligibleToPreempt``): a pod whose nominated node
    passes the predicates may not preempt; allocate pipelines it onto that node's FutureIdle
    instead (allocate.go:795-804@v1.16.0-alpha.1)."""
    low = podgroup("low", 4, phase="Running", priority_class="low")
    urgent = podgroup("urgent", 2, phase="Inqueue", priority_class="high", created="2026-01-01T00:01:00Z")
    urgent_pods = pods("urgent", 2)
    for pod in urgent_pods:
        pod["status"]["nominatedNodeName"] = "node-2"  # no pod of low is terminating there
    result = session(
        HELM_PREEMPT,
        [low, urgent],
        running("low", 4, ON_ALL) + urgent_pods,
        queues=(),
        priority_classes=CLASSES,
    )
    assert result.evictions == []


def test_a_pod_with_preemption_policy_never_takes_nothing() -> None:
    """preempt.go:441-443@v1.16.0-alpha.1: ``preemptionPolicy: Never`` is not eligible."""
    low = podgroup("low", 4, phase="Running", priority_class="low")
    urgent = podgroup("urgent", 2, phase="Inqueue", priority_class="high", created="2026-01-01T00:01:00Z")
    urgent_pods = pods("urgent", 2)
    for pod in urgent_pods:
        pod["spec"]["preemptionPolicy"] = "Never"
    result = session(
        HELM_PREEMPT, [low, urgent], running("low", 4, ON_ALL) + urgent_pods, priority_classes=CLASSES
    )
    assert result.evictions == []


def _plugins_with(votes: dict[str, list[str]], tiers: str) -> tuple[Plugins, list[Task]]:
    """A session's Plugins whose reclaim votes are replaced by fixed answers (pod names)."""
    state = SessionState(
        nodes=[],
        pods=[],
        groups=[],
        phases={},
        queues=[],
        idle={},
        placements={},
        conf=conf("enqueue, allocate, reclaim", tiers),
    )
    plugins = Plugins(state)
    group = Group(podgroup("low", 1), ("ml", "low"), "default", 1, None, 0, "Running", [])
    job = Job(group, "Running")
    tasks = [SessionState._task(job, pod) for pod in running("low", 4, ON_ALL)]
    by_name = {task.key[1]: task for task in tasks}
    for name, chosen in votes.items():
        plugins._reclaimable[name] = lambda _t, _c, chosen=chosen: [by_name[n] for n in chosen]
    return plugins, tasks


def test_votes_intersect_within_a_tier_and_an_empty_answer_passes_the_decision_on() -> None:
    """session_plugins.go:225-271@v1.16.0-alpha.1 walked step by step: lists intersect within a
    tier (:246-262); an empty list sets nil and ends the tier (:242-244), the next tier deciding
    (:265-267, :270); an intersection with nothing in common is nil too, so the tier's next plugin
    starts again from its own list; the first tier with victims wins."""
    tiers = "- plugins: [{name: gang}, {name: conformance}, {name: proportion}]\n- plugins: [{name: tdm}]\n"
    m0, w0, w1 = "low-master-0", "low-worker-0", "low-worker-1"
    cases = [
        ({"gang": [m0, w0], "conformance": [w0], "proportion": [w0, w1]}, [w0]),
        ({"gang": [], "conformance": [w0], "proportion": [w1]}, []),
        ({"gang": [m0], "conformance": [w0], "proportion": [w1]}, [w1]),
    ]
    for votes, expected in cases:
        plugins, tasks = _plugins_with(votes, tiers)
        assert [t.key[1] for t in plugins.reclaimable(tasks[0], tasks)] == expected, votes
    # An empty tier 1 hands over to tier 2: here proportion alone.
    plugins, tasks = _plugins_with(
        {"gang": [], "conformance": ["low-worker-0"], "proportion": ["low-worker-1", "low-worker-2"]},
        "- plugins: [{name: gang}, {name: conformance}]\n- plugins: [{name: proportion}]\n",
    )
    assert [t.key[1] for t in plugins.reclaimable(tasks[0], tasks)] == ["low-worker-1", "low-worker-2"]
    # enableReclaimable: false removes a plugin's vote; it does not veto.
    plugins, tasks = _plugins_with(
        {"gang": [], "proportion": ["low-worker-1"]},
        "- plugins: [{name: gang, enableReclaimable: false}, {name: proportion}]\n",
    )
    assert [t.key[1] for t in plugins.reclaimable(tasks[0], tasks)] == ["low-worker-1"]


def test_inside_one_job_a_pod_of_higher_task_priority_takes_a_running_one() -> None:
    """preempt.go:239-295@v1.16.0-alpha.1: each pending pod of a starving job may take Running or
    Bound pods of its own job, committed pod by pod with no pipelined check; priority.go:136-143
    compares task priority (``volcano.sh/task-priority`` over ``spec.priority``,
    api/job_info.go:243-251@v1.16.0-alpha.1), strictly lower."""
    job = podgroup("j", 3, phase="Running")
    members = running("j", 2, ["node-1", "node-1"]) + pods("j", 3)[2:]
    members[2]["metadata"]["annotations"]["volcano.sh/task-priority"] = "10"
    result = session(HELM_PREEMPT, [job], members, nodes=1, queues=())
    assert evicted(result) == [("j-worker-0", "preempt")]
    assert result.nominated == {("ml", "j-worker-1"): "node-1"}
    # Equal task priorities: nothing to take.
    members[2]["metadata"]["annotations"].pop("volcano.sh/task-priority")
    assert session(HELM_PREEMPT, [job], members, nodes=1, queues=()).evictions == []
