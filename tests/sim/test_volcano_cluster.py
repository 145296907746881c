"""End-to-end tests of the simulated Volcano scheduler on a running `SimCluster`.

Everything goes through the official ``kubernetes`` client over HTTP, the way a user (or the
provider) sees the cluster: PodGroup ``status`` (phase, conditions), Events on the PodGroup,
Queue ``status``, and the nodes pods are bound to. The facts asserted are those of
``docs/architecture.md#domain-facts`` (what a real vc-scheduler does): queue capability, closed
queues, overcommit admission of a group that then cannot bind, priority order within a queue,
and binding one session before the phase says ``Running``.

Jobs are PyTorchJobs built by `GangJobSpec` in "provider" mode: we create the PodGroup, the
training-operator creates the pods with ``schedulerName: volcano`` right away, Volcano gates
them. The script runtime makes each replica last ``sim.airflow-gang.io/duration`` seconds.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster
from tests.sim.seed import job_state
from tests.waiting import eventually

NAMESPACE = "default"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
PYTORCH = ("kubeflow.org", "v1")
GPU = "nvidia.com/gpu"
JOB_LABEL = "training.kubeflow.org/job-name"
OVERUSED = "resource in cluster is overused: overused nvidia.com/gpu"
QUOTA = "queue resource quota insufficient: insufficient nvidia.com/gpu"


# --------------------------------------------------------------------------------------------
# Helpers: manifests, reads, and the facts we assert on
# --------------------------------------------------------------------------------------------


@dataclass
class Api:
    """The official clients for one running cluster."""

    core: k8s.CoreV1Api
    custom: k8s.CustomObjectsApi
    scheduling: k8s.SchedulingV1Api


@pytest.fixture
def api_factory() -> Iterator[Any]:
    """Open clients for a cluster and close them at teardown."""
    opened: list[k8s.ApiClient] = []

    def connect(cluster: SimCluster) -> Api:
        client = cluster.api_client()
        opened.append(client)
        return Api(k8s.CoreV1Api(client), k8s.CustomObjectsApi(client), k8s.SchedulingV1Api(client))

    yield connect
    for client in opened:
        client.close()


def gang(
    gpus: int, *, queue: str = "default", duration: float = 0.3, priority_class: str | None = None
) -> GangJobSpec:
    """A Master + (gpus - 1) Workers job, 1 GPU per replica: a gang of ``gpus`` pods."""
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=gpus - 1,
        resources={GPU: 1},
        queue=queue,
        priority_class=priority_class,
        gang_scheduling="provider",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(duration)}}},
    )


def submit(api: Api, name: str, spec: GangJobSpec) -> None:
    """What the provider does: the PodGroup first, then the PyTorchJob."""
    podgroup = spec.build_podgroup(name, NAMESPACE)
    assert podgroup is not None
    api.custom.create_namespaced_custom_object(*VOLCANO, NAMESPACE, "podgroups", podgroup)
    api.custom.create_namespaced_custom_object(
        *PYTORCH, NAMESPACE, "pytorchjobs", spec.build_pytorchjob(name, NAMESPACE)
    )


def podgroup(api: Api, name: str) -> dict[str, Any]:
    result: dict[str, Any] = api.custom.get_namespaced_custom_object(*VOLCANO, NAMESPACE, "podgroups", name)
    return result


def phase(api: Api, name: str) -> str | None:
    return (podgroup(api, name).get("status") or {}).get("phase")


def condition(api: Api, name: str, kind: str) -> dict[str, Any] | None:
    conditions = (podgroup(api, name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def wait_for_condition(api: Api, name: str, kind: str, timeout: float = 10.0) -> dict[str, Any]:
    def probe() -> dict[str, Any]:
        return condition(api, name, kind) or {}

    return eventually(probe, timeout=timeout, message=f"condition {kind} on {name}")


def events(api: Api, name: str) -> set[tuple[str, str, str]]:
    """(type, reason, message) of every Event about the object called ``name``."""
    listed = api.core.list_namespaced_event(NAMESPACE, field_selector=f"involvedObject.name={name}")
    return {(e.type, e.reason, e.message) for e in listed.items}


def wait_for_event(
    api: Api, name: str, event: tuple[str, str, str], timeout: float = 10.0
) -> set[tuple[str, str, str]]:
    """All events about ``name`` once ``event`` is among them (they are posted after status writes)."""

    def probe() -> set[tuple[str, str, str]]:
        seen = events(api, name)
        return seen if event in seen else set()

    return eventually(probe, timeout=timeout, message=f"event {event} on {name}")


def bindings(api: Api, job: str) -> dict[str, str | None]:
    """Pod name -> node name (None while unbound) for the pods of ``job``."""
    pods = api.core.list_namespaced_pod(NAMESPACE, label_selector=f"{JOB_LABEL}={job}").items
    return {pod.metadata.name: pod.spec.node_name for pod in pods}


def all_bound(api: Api, job: str, replicas: int) -> dict[str, str]:
    """The job's bindings once all ``replicas`` pods have a node, else an empty dict."""
    bound = bindings(api, job)
    if len(bound) != replicas or not all(bound.values()):
        return {}
    return {pod: str(node) for pod, node in bound.items()}


def pod_scheduled(api: Api, pod: str) -> Any:
    """The pod's PodScheduled condition (None until the scheduler has written one)."""
    conditions = api.core.read_namespaced_pod(pod, NAMESPACE).status.conditions or []
    return next((c for c in conditions if c.type == "PodScheduled"), None)


def wait_for_pod_scheduled(api: Api, pod: str, message: str | None = None, timeout: float = 5.0) -> Any:
    """The pod's PodScheduled condition once written (with ``message``, when given)."""

    def probe() -> Any:
        found = pod_scheduled(api, pod)
        return found if found is not None and message in (None, found.message) else None

    return eventually(
        probe, timeout=timeout, message=f"PodScheduled on {pod}, last {pod_scheduled(api, pod)}"
    )


def queue_status(api: Api, name: str) -> dict[str, Any]:
    queue = api.custom.get_cluster_custom_object(*VOLCANO, "queues", name)
    return dict(queue.get("status") or {})


def set_queue_state(api: Api, name: str, state: str) -> None:
    api.custom.patch_cluster_custom_object_status(
        *VOLCANO,
        "queues",
        name,
        {"status": {"state": state}},
        _content_type="application/merge-patch+json",
    )


def succeeded(api: Api, *jobs: str) -> bool:
    return all(job_state(api.custom, job, NAMESPACE) == "Succeeded" for job in jobs)


def queue_counts(**counts: int) -> dict[str, int]:
    base = {"pending": 0, "inqueue": 0, "running": 0, "unknown": 0, "completed": 0}
    return {**base, **counts}


def counts_of(status: dict[str, Any]) -> dict[str, int]:
    return {key: int(status.get(key, 0)) for key in queue_counts()}


def gang_message(unschedulable: int, tasks: int, histogram: str, pending: str, origin: str = "") -> str:
    """vc ``gang.go`` + ``job_info.go FitError``: the Unschedulable condition/event text."""
    text = (
        f"{unschedulable}/{tasks} tasks in gang unschedulable: pod group is not ready, {histogram}"
        f"; Pending: {pending}"
    )
    return f"{text}. Origin reason is {origin}" if origin else text


# --------------------------------------------------------------------------------------------
# Queue capability
# --------------------------------------------------------------------------------------------


@dataclass
class CappedTimeline:
    """What we saw of the capped queue while both jobs ran."""

    most_gpus_bound: int = 0
    first_bound: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)


def test_queue_capability_admits_one_gang_at_a_time(api_factory: Any) -> None:
    """A queue capped at 2 GPUs on a 4-GPU pool runs two 2-GPU gangs one after the other."""
    with SimCluster(nodes=2, gpus_per_node=2, queues={"capped": {GPU: 2}}, schedule_period=0.1) as cluster:
        api: Api = api_factory(cluster)
        submit(api, "cap-a", gang(2, queue="capped", duration=0.5))
        submit(api, "cap-b", gang(2, queue="capped", duration=0.5))

        # The older group wins; the other waits Pending on the queue's quota, not on the cluster.
        eventually(lambda: all_bound(api, "cap-a", 2), timeout=10, message="cap-a bound")
        cap_a_bound = time.monotonic()
        wait_for_event(api, "cap-b", ("Normal", "Unschedulable", QUOTA))
        assert phase(api, "cap-b") == "Pending"
        assert bindings(api, "cap-b") == {"cap-b-master-0": None, "cap-b-worker-0": None}
        # (The overcommit gate may reject it too, in the session where cap-a is Inqueue with its
        # pods bound: an Inqueue group's minResources count as reserved on top of what its pods
        # use, as in the real overcommit plugin. So no claim is made about that event.)
        waiting = wait_for_condition(api, "cap-b", "Unschedulable")
        assert {k: waiting[k] for k in ("status", "reason", "message")} == {
            "status": "True",
            "reason": "NotEnoughResources",
            "message": gang_message(2, 2, "2 Pending, 2 minAvailable", "2 Unschedulable"),
        }
        wait_for_event(api, "cap-b", ("Warning", "Unschedulable", waiting["message"]))

        # Queue status while cap-a holds the quota.
        eventually(
            lambda: (
                queue_status(api, "capped")
                == {"state": "Open", "allocated": {GPU: "2"}, **queue_counts(pending=1, running=1)}
            ),
            timeout=10,
            message=f"capped queue status, last {queue_status(api, 'capped')}",
        )

        # Both finish, never more than 2 GPUs of the queue bound at once, cap-a strictly first.
        # Each probe lists cap-b before cap-a: pods only ever get bound and then finish, so cap-b
        # seen bound means cap-a's state read just after is at least as late (no false overlap).
        seen = CappedTimeline(first_bound={"cap-a": cap_a_bound})  # cap-b was unbound after this

        def watch_capped() -> bool:
            now = time.monotonic()
            held = 0
            for job in ("cap-b", "cap-a"):
                pods = api.core.list_namespaced_pod(NAMESPACE, label_selector=f"{JOB_LABEL}={job}").items
                held += sum(
                    1 for p in pods if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")
                )
                if len(pods) == 2 and all(p.spec.node_name for p in pods):
                    seen.first_bound.setdefault(job, now)
                if len(pods) == 2 and all(p.status.phase == "Succeeded" for p in pods):
                    seen.done.setdefault(job, now)
            seen.most_gpus_bound = max(seen.most_gpus_bound, held)
            return len(seen.done) == 2 and succeeded(api, "cap-a", "cap-b")

        eventually(watch_capped, timeout=20, message="both capped jobs succeed")
        assert seen.most_gpus_bound <= 2
        assert seen.first_bound["cap-a"] < seen.first_bound["cap-b"]
        assert seen.done["cap-a"] <= seen.first_bound["cap-b"]
        eventually(lambda: phase(api, "cap-a") == phase(api, "cap-b") == "Completed", timeout=10)
        eventually(
            lambda: (
                queue_status(api, "capped") == {"state": "Open", "allocated": {}, **queue_counts(completed=2)}
            ),
            timeout=10,
            message=f"capped queue status at the end, last {queue_status(api, 'capped')}",
        )


# --------------------------------------------------------------------------------------------
# Closed queue
# --------------------------------------------------------------------------------------------


def test_closed_queue_rejects_new_podgroups_and_admits_none_of_its_waiting_ones(api_factory: Any) -> None:
    with SimCluster(nodes=2, gpus_per_node=2, queues={"closable": None}, schedule_period=0.1) as cluster:
        api: Api = api_factory(cluster)
        # Fill the pool, then queue "early" in the queue while it is still Open.
        submit(api, "blocker", gang(4, duration=1.0))
        eventually(lambda: phase(api, "blocker") == "Running", timeout=10, message="blocker running")
        submit(api, "early", gang(2, queue="closable", duration=0.3))
        wait_for_event(api, "early", ("Normal", "Unschedulable", OVERUSED))  # waits on the full pool
        assert phase(api, "early") == "Pending"

        set_queue_state(api, "closable", "Closed")
        eventually(lambda: queue_status(api, "closable")["state"] == "Closed", timeout=5)

        # Admission: the Volcano webhook refuses a new PodGroup in a queue that is not Open.
        late = gang(2, queue="closable").build_podgroup("late", NAMESPACE)
        with pytest.raises(ApiException) as refused:
            api.custom.create_namespaced_custom_object(*VOLCANO, NAMESPACE, "podgroups", late)
        assert refused.value.status == 400
        body = json.loads(refused.value.body)
        assert body["kind"] == "Status"
        assert body["status"] == "Failure"
        assert body["code"] == 400
        assert body["message"] == (
            'admission webhook "validatepodgroup.volcano.sh" denied the request: '
            "can only submit PodGroup to queue with state `Open`, queue `closable` status is `Closed`."
        )
        with pytest.raises(ApiException) as missing:
            podgroup(api, "late")
        assert missing.value.status == 404

        # A younger job in an open queue runs when the pool frees; "early" (older, and it would
        # fit beside it) is passed over because its queue is closed.
        submit(api, "control", gang(2, duration=0.3))
        eventually(lambda: succeeded(api, "blocker", "control"), timeout=15, message="control ran")
        assert phase(api, "early") == "Pending"
        assert bindings(api, "early") == {"early-master-0": None, "early-worker-0": None}
        assert queue_status(api, "closable")["state"] == "Closed"
        assert counts_of(queue_status(api, "closable")) == queue_counts(pending=1)

        # Reopened, the queue admits it at once.
        set_queue_state(api, "closable", "Open")
        eventually(lambda: succeeded(api, "early"), timeout=10, message="early runs once reopened")
        assert phase(api, "early") in ("Running", "Completed")


# --------------------------------------------------------------------------------------------
# Overcommit: admitted but not bindable
# --------------------------------------------------------------------------------------------

SMALL_NODE = "sim-node-small"  # sorts after sim-node-1, so first-fit places 3 + 1 as on the real cluster


def add_node(api: Api, name: str, gpus: int) -> None:
    """A Node registered by hand (no kubelet runs its pods): enough for the scheduler's view."""
    allocatable = {"cpu": "16", "memory": "64Gi", GPU: str(gpus), "pods": "110"}
    api.core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {
                "capacity": allocatable,
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        }
    )
    node = api.core.read_node(name)
    if (node.status.allocatable or {}).get(GPU) != str(gpus):  # status dropped on create: set it
        api.core.patch_node_status(
            name,
            {
                "status": {
                    "capacity": allocatable,
                    "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                }
            },
        )
    assert api.core.read_node(name).status.allocatable[GPU] == str(gpus)


@pytest.fixture
def overcommitted(api_factory: Any) -> Iterator[Api]:
    """Admitted but not bindable (``docs/architecture.md#volcano-messages``): 3 + 2 GPUs, a 4-GPU
    job in ``default`` placed 3 + 1, then a 2 x 1-GPU job in ``team-b``: admitted
    (5 x 1.2 - 4 = 2) but only 1 GPU is free.
    """
    # A node registered by hand has no kubelet to renew its Lease: the real grace period (40 s)
    # keeps the node lifecycle controller from marking it Unknown (and evicting "big") meanwhile.
    with SimCluster(
        nodes=1, gpus_per_node=3, queues={"team-b": None}, schedule_period=0.1, node_monitor_grace_period=40
    ) as cluster:
        api: Api = api_factory(cluster)
        add_node(api, SMALL_NODE, 2)
        submit(api, "big", gang(4, duration=60))
        placed = eventually(lambda: all_bound(api, "big", 4), timeout=10, message="big bound")
        assert sorted(placed.values()) == ["sim-node-1"] * 3 + [SMALL_NODE]
        eventually(lambda: phase(api, "big") == "Running", timeout=10)
        submit(api, "team-b-job", gang(2, queue="team-b"))
        wait_for_condition(api, "team-b-job", "Unschedulable")
        yield api


NOT_BINDABLE = gang_message(
    1,
    2,
    "2 Pending, 2 minAvailable",
    "1 Schedulable, 1 Unschedulable",
    origin="team-b-job-worker-0: 0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu.",
)


def test_overcommit_admits_an_extra_group_that_then_cannot_bind(overcommitted: Api) -> None:
    api = overcommitted
    assert phase(api, "team-b-job") == "Inqueue"
    unschedulable = condition(api, "team-b-job", "Unschedulable")
    assert unschedulable is not None
    assert {k: unschedulable[k] for k in ("status", "reason", "message")} == {
        "status": "True",
        "reason": "NotEnoughResources",
        "message": NOT_BINDABLE,
    }
    assert unschedulable["transitionID"]
    assert unschedulable["lastTransitionTime"]
    assert condition(api, "team-b-job", "Scheduled") is None
    seen = wait_for_event(api, "team-b-job", ("Warning", "Unschedulable", NOT_BINDABLE))
    # Admitted: neither the overcommit nor the proportion gate complained.
    assert not [e for e in seen if e[0] == "Normal" and e[2] in (OVERUSED, QUOTA)]
    assert bindings(api, "team-b-job") == {"team-b-job-master-0": None, "team-b-job-worker-0": None}
    for pod in ("team-b-job-master-0", "team-b-job-worker-0"):
        scheduled = wait_for_pod_scheduled(api, pod)
        assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    # Queue view: team-b has one admitted group and nothing allocated; default holds the 4 GPUs.
    team_b = queue_status(api, "team-b")
    assert team_b["state"] == "Open"
    assert team_b["allocated"] == {}
    assert counts_of(team_b) == queue_counts(inqueue=1)
    assert queue_status(api, "default")["allocated"] == {GPU: "4"}
    assert counts_of(queue_status(api, "default")) == queue_counts(running=1)


def test_the_schedulable_pod_of_an_unbindable_gang_says_where_it_could_go(overcommitted: Api) -> None:
    """As on a real vc-scheduler: the pod that fits reads "can possibly be assigned to <node>"."""
    api = overcommitted
    expected = (
        f"Pod {NAMESPACE}/team-b-job-master-0 can possibly be assigned to {SMALL_NODE}, "
        "once minAvailable is satisfied"
    )
    # Pod conditions are written after the PodGroup's status in a session: wait for them.
    scheduled = wait_for_pod_scheduled(api, "team-b-job-master-0", expected)
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")


def test_events_show_the_binding_and_why_a_gang_waits_as_kubectl_describe_would(overcommitted: Api) -> None:
    """vc-scheduler's wording: Scheduled per bound pod, the binding session's misleading warning on
    the PodGroup, and FailedScheduling with the gang's fit error on each pod left pending."""
    api = overcommitted
    for pod, node in all_bound(api, "big", 4).items():
        message = f"Successfully assigned {NAMESPACE}/{pod} to {node}"
        wait_for_event(api, pod, ("Normal", "Scheduled", message))
    wait_for_event(
        api,
        "big",
        (
            "Warning",
            "Unschedulable",
            "0/4 tasks in gang unschedulable: pod group is ready, 4 Binding, 4 minAvailable",
        ),
    )
    fit_error = NOT_BINDABLE.split(": ", 1)[1]
    assert fit_error.startswith("pod group is not ready, 2 Pending, 2 minAvailable; Pending: 1 Schedulable")
    for pod in ("team-b-job-master-0", "team-b-job-worker-0"):
        seen = wait_for_event(api, pod, ("Warning", "FailedScheduling", fit_error))
        assert not [e for e in seen if e[1] == "Scheduled"], seen


# --------------------------------------------------------------------------------------------
# Priority within a queue
# --------------------------------------------------------------------------------------------


def creation_second(api: Api, name: str) -> dt.datetime:
    stamp = podgroup(api, name)["metadata"]["creationTimestamp"]
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def test_higher_priority_gang_is_admitted_first_even_if_younger(api_factory: Any) -> None:
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.1) as cluster:
        api: Api = api_factory(cluster)
        for name, value in (("gang-low", 100), ("gang-high", 1000)):
            api.scheduling.create_priority_class(
                k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=value)
            )
        submit(api, "blocker", gang(4, duration=1.5))
        eventually(lambda: phase(api, "blocker") == "Running", timeout=10, message="blocker running")

        # "a-low" queues first: older, and first by name too, so only priority can put it second.
        submit(api, "a-low", gang(4, duration=0.5, priority_class="gang-low"))
        wait_for_event(api, "a-low", ("Normal", "Unschedulable", OVERUSED))  # a-low waits
        low_created = creation_second(api, "a-low")
        eventually(lambda: dt.datetime.now(dt.UTC).replace(microsecond=0) > low_created, timeout=3)
        submit(api, "b-high", gang(4, duration=0.5, priority_class="gang-high"))
        assert creation_second(api, "b-high") > low_created
        assert podgroup(api, "b-high")["spec"]["priorityClassName"] == "gang-high"
        master = eventually(lambda: api.core.read_namespaced_pod("b-high-master-0", NAMESPACE), timeout=5)
        assert (master.spec.priority_class_name, master.spec.priority) == ("gang-high", 1000)
        assert phase(api, "a-low") == phase(api, "b-high") == "Pending"

        first_bound: dict[str, float] = {}
        low_phase_when_high_bound: list[str | None] = []

        def watch_order() -> bool:
            for job in ("b-high", "a-low"):
                if job not in first_bound and all_bound(api, job, 4):
                    first_bound[job] = time.monotonic()
                    if job == "b-high":
                        low_phase_when_high_bound.append(phase(api, "a-low"))
            return len(first_bound) == 2

        eventually(watch_order, timeout=20, message="both prioritised gangs bound")
        assert first_bound["b-high"] < first_bound["a-low"]
        assert low_phase_when_high_bound == ["Pending"]
        eventually(lambda: succeeded(api, "blocker", "b-high", "a-low"), timeout=15)


# --------------------------------------------------------------------------------------------
# Bound one session before Running
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    bound_before: bool  # all pods had a node when read just before the PodGroup
    phase: str | None
    bound_after: bool  # all pods had a node when read just after the PodGroup


def test_pods_are_bound_while_the_group_is_still_inqueue(api_factory: Any) -> None:
    """Real Volcano: pods get their node in the session that enqueues the group; Running comes one
    session later. Reading pods, then the group, then pods again orders what we see: bound pods
    before an ``Inqueue`` read were bound while the group was ``Inqueue`` (phases only advance).
    """
    period = 0.5  # long enough that fast polling lands in the window many times
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=period) as cluster:
        api: Api = api_factory(cluster)
        submit(api, "gang", gang(4, duration=0.5))
        seen: list[Observation] = []

        def observe() -> bool:
            before = bool(all_bound(api, "gang", 4))
            now = phase(api, "gang")
            seen.append(Observation(before, now, bool(all_bound(api, "gang", 4))))
            return now == "Running"

        eventually(observe, timeout=15, interval=0.01, message="gang Running")
        assert any(o.phase == "Inqueue" and o.bound_before for o in seen), seen
        # Never Inqueue with pods still unbound afterwards: binding happens in the enqueuing session.
        assert not [o for o in seen if o.phase == "Inqueue" and not o.bound_after]
        assert seen[-1].bound_before
        assert next(o.phase for o in seen if o.phase is not None) in ("Pending", "Inqueue")

        scheduled = condition(api, "gang", "Scheduled")
        assert scheduled is not None
        assert {k: scheduled[k] for k in ("status", "reason", "message")} == {
            "status": "True",
            "reason": "tasks in gang are ready to be scheduled",
            "message": "",
        }
        wait_for_event(api, "gang", ("Normal", "Scheduled", "pod group is ready"))
        placed = all_bound(api, "gang", 4)
        assert sorted(placed.values()) == ["sim-node-1", "sim-node-1", "sim-node-2", "sim-node-2"]
        eventually(lambda: succeeded(api, "gang"), timeout=10)
        eventually(lambda: phase(api, "gang") == "Completed", timeout=5)


# --------------------------------------------------------------------------------------------
# A finished gang stays "ready"
# --------------------------------------------------------------------------------------------


def test_a_completed_gang_is_not_reported_unschedulable(api_factory: Any) -> None:
    """Succeeded tasks count as ready (vc gang.go): a finished gang stays Scheduled, no Warning."""
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.1) as cluster:
        api: Api = api_factory(cluster)
        submit(api, "done", gang(2, duration=0.2))
        eventually(lambda: phase(api, "done") == "Completed", timeout=10, message="done Completed")
        # Sessions after the one that completed it: a later job goes Pending -> Inqueue -> Running,
        # and each session writes "done"'s status before "later"'s (older groups come first).
        submit(api, "later", gang(2, duration=0.2))
        eventually(lambda: phase(api, "later") == "Running", timeout=10, message="later Running")
        assert phase(api, "done") == "Completed"
        scheduled = condition(api, "done", "Scheduled")
        assert scheduled is not None
        assert scheduled["reason"] == "tasks in gang are ready to be scheduled"
        assert condition(api, "done", "Unschedulable") is None
        # The one Warning is vc-scheduler's misleading one from the session that bound it.
        warnings = [e for e in events(api, "done") if e[0] == "Warning"]
        assert [e[2] for e in warnings] == [
            "0/2 tasks in gang unschedulable: pod group is ready, 2 Binding, 2 minAvailable"
        ], warnings
