"""`airflow_gang.model.capacity`: cluster totals, per-queue numbers, Volcano's admission order and the
sentence each waiting gang gets, from wire-form objects (no cluster)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from airflow_gang.model.capacity import (
    ClusterCapacity,
    admission_order,
    compute_capacity,
    pod_request,
    priority_values,
)

JsonDict = dict[str, Any]
GPU = "nvidia.com/gpu"


def node(
    name: str, gpus: int = 2, *, cpu: str = "16", unschedulable: bool = False, ready: str = "True"
) -> JsonDict:
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "allocatable": {GPU: str(gpus), "cpu": cpu, "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def pod(
    name: str,
    *,
    gpus: int = 1,
    cpu: str | None = None,
    node_name: str | None = None,
    phase: str = "Running",
    group: str | None = None,
    namespace: str = "ml",
) -> JsonDict:
    requests: JsonDict = {GPU: str(gpus)}
    if cpu is not None:
        requests["cpu"] = cpu
    metadata: JsonDict = {"name": name, "namespace": namespace}
    if group is not None:
        metadata["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: JsonDict = {"containers": [{"name": "pytorch", "resources": {"limits": requests}}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


def podgroup(
    name: str,
    *,
    gpus: int | None = 4,
    members: int = 4,
    queue: str = "default",
    phase: str = "Pending",
    created: str | None = "2026-01-01T00:00:00Z",
    priority_class: str | None = None,
    namespace: str = "ml",
    cpu: str | None = None,
) -> JsonDict:
    spec: JsonDict = {"minMember": members, "queue": queue}
    if gpus is not None:
        spec["minResources"] = {GPU: str(gpus), **({"cpu": cpu} if cpu else {})}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    metadata: JsonDict = {"name": name, "namespace": namespace}
    if created is not None:
        metadata["creationTimestamp"] = created
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


def queue(
    name: str = "default",
    *,
    capability: JsonDict | None = None,
    state: str | None = "Open",
    allocated: JsonDict | None = None,
    **spec: Any,
) -> JsonDict:
    if capability is not None:
        spec["capability"] = capability
    status: JsonDict = {"allocated": allocated or {}}
    if state is not None:
        status["state"] = state
    return {"metadata": {"name": name}, "spec": spec, "status": status}


def priority_class(name: str, value: int, *, default: bool = False) -> JsonDict:
    return {"metadata": {"name": name}, "value": value, "globalDefault": default}


def gang_pods(group: str, count: int, *, node_name: str | None = None, **options: Any) -> list[JsonDict]:
    return [pod(f"{group}-{index}", group=group, node_name=node_name, **options) for index in range(count)]


def capacity(**objects: Any) -> ClusterCapacity:
    defaults: JsonDict = {
        "nodes": [node("n1"), node("n2")],
        "pods": [],
        "queues": [queue()],
        "podgroups": [],
    }
    return compute_capacity(**{**defaults, **objects})


def summaries(result: ClusterCapacity) -> dict[str, str]:
    return {gang.name: gang.summary for gang in result.waiting}


# -- cluster totals ---------------------------------------------------------------------------


def test_totals_count_schedulable_nodes_and_every_bound_unfinished_pod() -> None:
    result = capacity(
        nodes=[node("n1"), node("n2"), node("cordoned", unschedulable=True), node("down", ready="False")],
        pods=[
            *gang_pods("running", 2, node_name="n1", phase="Running"),
            pod("bound-not-started", node_name="n2", phase="Pending"),  # bound: holds its GPU
            pod("done", node_name="n2", phase="Succeeded"),
            pod("failed", node_name="n2", phase="Failed"),
            pod("unbound", phase="Pending"),
            pod("on-cordoned", node_name="cordoned"),  # its node is out of the totals too
        ],
    )
    assert result.to_json()["resources"] == {
        GPU: {"allocatable": "4", "allocated": "3", "free": "1"},
        "cpu": {"allocatable": "32", "allocated": "0", "free": "32"},
        "memory": {"allocatable": "128Gi", "allocated": "0", "free": "128Gi"},
    }


def test_pods_of_no_podgroup_count_as_allocated() -> None:
    """The no-gang deadlock: kube-scheduler placed one master of each of four jobs; nothing is
    free for a gang even though no PodGroup holds anything."""
    plain = [pod(f"job{i}-master-0", node_name=f"n{1 + i // 2}", namespace="other") for i in range(4)]
    result = capacity(pods=plain, podgroups=[podgroup("waiting")])
    assert result.resources[GPU].allocated == 4
    assert result.resources[GPU].free == 0
    (default,) = result.queues
    assert default.allocated == {}  # such pods belong to no queue
    assert summaries(result) == {
        "waiting": "needs 4 GPUs; 0 free in queue default (capability unlimited); no gang ahead"
    }


def test_cpu_and_memory_are_exact_and_printed_as_kubectl_does() -> None:
    result = capacity(
        nodes=[node("n1", cpu="3500m")],
        pods=[pod("a", gpus=0, cpu="500m", node_name="n1"), pod("b", gpus=0, cpu="250m", node_name="n1")],
    )
    assert result.resources["cpu"].free == Decimal("2.75")
    assert result.to_json()["resources"]["cpu"] == {
        "allocatable": "3500m",
        "allocated": "750m",
        "free": "2750m",
    }


def test_pod_request_takes_limits_for_missing_requests_and_the_larger_init_container() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", GPU: "1"}}},
            {"resources": {"requests": {"cpu": "500m"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "4"}}}, {"resources": {"limits": {GPU: "0"}}}],
    }
    assert pod_request({"spec": spec}) == {"cpu": Decimal(4), GPU: Decimal(1)}


def test_without_readable_nodes_totals_are_unknown_but_allocation_is_counted() -> None:
    result = capacity(
        nodes=None, pods=gang_pods("running", 2, node_name="n1"), podgroups=[podgroup("waiting")]
    )
    assert result.to_json()["resources"][GPU] == {"allocatable": None, "allocated": "2", "free": None}
    assert summaries(result) == {
        "waiting": "needs 4 GPUs; free GPUs unknown (nodes not readable); no gang ahead"
    }


# -- queues -----------------------------------------------------------------------------------


def test_queue_numbers_capability_deserved_guarantee_allocated_pending_free() -> None:
    research = queue(
        "research",
        capability={GPU: "3", "cpu": "64"},
        deserved={GPU: "2"},
        guarantee={"resource": {GPU: "1"}},
        allocated={GPU: "1"},  # Volcano's own (stale) number, smaller than what is bound now
    )
    result = capacity(
        queues=[queue(allocated={GPU: "1"}), research],
        podgroups=[
            podgroup("run", gpus=2, members=2, queue="research", phase="Running"),
            podgroup("wait-a", gpus=2, members=2, queue="research"),
            podgroup("wait-b", gpus=None, members=2, queue="research", phase="Inqueue"),  # by its pods
        ],
        pods=[*gang_pods("run", 2, node_name="n1"), *gang_pods("wait-b", 2, phase="Pending", cpu="2")],
    )
    by_name = {q["name"]: q for q in result.to_json()["queues"]}
    assert by_name["research"] == {
        "name": "research",
        "state": "Open",
        "capability": {GPU: "3", "cpu": "64"},
        "deserved": {GPU: "2"},
        "guarantee": {GPU: "1"},
        "allocated": {GPU: "2"},
        "pending": {GPU: "4", "cpu": "4"},
        # min(capability - allocated, cluster free): GPUs by the cap, CPUs by the cluster
        "free": {GPU: "1", "cpu": "32", "memory": "128Gi"},
        "waiting_gangs": 2,
    }
    # Nothing bound in `default`: Volcano's status.allocated (other namespaces) is kept.
    assert by_name["default"]["allocated"] == {GPU: "1"}
    assert by_name["default"]["capability"] is None
    assert by_name["default"]["free"][GPU] == "2"


def test_admitted_gangs_are_not_waiting() -> None:
    result = capacity(
        podgroups=[
            podgroup("running", phase="Running"),
            podgroup("bound-inqueue", phase="Inqueue"),  # bound, Volcano writes Running next session
            podgroup("unbound-inqueue", phase="Inqueue", created="2026-01-01T00:00:05Z"),
            podgroup("never-seen", phase="", created="2026-01-01T00:00:09Z"),
            podgroup("completed", phase="Completed"),
        ],
        pods=[
            *gang_pods("running", 4, node_name="n1"),
            *gang_pods("bound-inqueue", 4, node_name="n2", phase="Pending"),
        ],
    )
    assert [(g.name, g.phase, g.gangs_ahead) for g in result.waiting] == [
        ("unbound-inqueue", "Inqueue", 0),
        ("never-seen", "Pending", 1),
    ]


# -- admission order --------------------------------------------------------------------------


def test_admission_order_is_priority_then_age_then_namespace_and_name() -> None:
    classes = [priority_class("high", 1000), priority_class("low", 10)]
    groups = [
        podgroup("old-low", created="2026-01-01T00:00:00Z", priority_class="low"),
        podgroup("young-high", created="2026-01-01T00:00:09Z", priority_class="high"),
        podgroup("b-same-second", created="2026-01-01T00:00:05Z", priority_class="low"),
        podgroup("a-same-second", created="2026-01-01T00:00:05Z", priority_class="low", namespace="zz"),
        podgroup("a-same-second", created="2026-01-01T00:00:05Z", priority_class="low", namespace="aa"),
        podgroup("no-class", created="2025-01-01T00:00:00Z"),
        podgroup("no-timestamp", created=None, priority_class="low"),
    ]
    order = [(g["metadata"]["namespace"], g["metadata"]["name"]) for g in admission_order(groups, classes)]
    assert order == [
        ("ml", "young-high"),
        ("ml", "old-low"),
        ("aa", "a-same-second"),
        ("ml", "b-same-second"),
        ("zz", "a-same-second"),
        ("ml", "no-timestamp"),
        ("ml", "no-class"),  # priority 0: oldest of all, still last
    ]


def test_global_default_class_sets_the_priority_of_groups_without_a_known_class() -> None:
    classes = [priority_class("standard", 100, default=True), priority_class("batch", 50)]
    assert priority_values(classes) == ({"standard": 100, "batch": 50}, 100)
    groups = [
        podgroup("batch", created="2026-01-01T00:00:00Z", priority_class="batch"),
        podgroup("unknown-class", created="2026-01-01T00:00:02Z", priority_class="gone"),
        podgroup("no-class", created="2026-01-01T00:00:01Z"),
    ]
    assert [g["metadata"]["name"] for g in admission_order(groups, classes)] == [
        "no-class",
        "unknown-class",
        "batch",
    ]


def test_positions_count_only_waiting_gangs_of_the_same_queue() -> None:
    classes = [priority_class("high", 1000)]
    result = capacity(
        queues=[queue(), queue("other")],
        priority_classes=classes,
        pods=gang_pods("blocker", 4, node_name="n1"),
        podgroups=[
            podgroup("blocker", phase="Running"),
            podgroup("first", created="2026-01-01T00:00:01Z"),
            podgroup("elsewhere", queue="other", created="2026-01-01T00:00:00Z"),
            podgroup("second", created="2026-01-01T00:00:02Z"),
            podgroup("jumps-the-line", created="2026-01-01T00:00:03Z", priority_class="high"),
        ],
    )
    positions = {(g.queue, g.name): (g.gangs_ahead, g.priority) for g in result.waiting}
    assert positions == {
        ("default", "jumps-the-line"): (0, 1000),
        ("default", "first"): (1, 0),
        ("default", "second"): (2, 0),
        ("other", "elsewhere"): (0, 0),
    }
    assert [g.name for g in result.waiting] == ["jumps-the-line", "first", "second", "elsewhere"]


# -- sentences --------------------------------------------------------------------------------


def test_sentences_for_a_full_pool_with_unlimited_capability() -> None:
    result = capacity(
        pods=gang_pods("blocker", 4, node_name="n1"),
        podgroups=[podgroup("blocker", phase="Running")]
        + [podgroup(f"g{i}", created=f"2026-01-01T00:00:0{i}Z") for i in range(1, 4)],
    )
    assert summaries(result) == {
        "g1": "needs 4 GPUs; 0 free in queue default (capability unlimited); no gang ahead",
        "g2": "needs 4 GPUs; 0 free in queue default (capability unlimited); 1 gang ahead",
        "g3": "needs 4 GPUs; 0 free in queue default (capability unlimited); 2 gangs ahead",
    }
    assert not any(g.never_fits for g in result.waiting)


def test_a_gang_larger_than_the_cluster_can_never_start() -> None:
    result = capacity(podgroups=[podgroup("huge", gpus=8, members=8)])
    (gang,) = result.waiting
    assert gang.summary == "needs 8 GPUs; the cluster has 4 in all: it can never start"
    assert gang.never_fits


def test_a_gang_larger_than_its_queue_capability_can_never_start() -> None:
    result = capacity(
        queues=[queue("research", capability={GPU: "2"})], podgroups=[podgroup("capped", queue="research")]
    )
    (gang,) = result.waiting
    assert (gang.summary, gang.never_fits) == (
        "needs 4 GPUs; queue research is capped at 2: it can never start",
        True,
    )


def test_free_in_a_capped_queue_is_the_smaller_of_its_room_and_the_cluster() -> None:
    result = capacity(
        nodes=[node("n1", 4), node("n2", 4)],
        queues=[queue("research", capability={GPU: "6"})],
        pods=gang_pods("run", 3, node_name="n1"),
        podgroups=[
            podgroup("run", gpus=3, members=3, queue="research", phase="Running"),
            podgroup("next", queue="research"),
        ],
    )
    assert summaries(result) == {"next": "needs 4 GPUs; 3 free in queue research; no gang ahead"}


def test_a_gang_that_fits_names_its_gpus_and_the_room_left() -> None:
    result = capacity(podgroups=[podgroup("small", gpus=2, members=2, cpu="4")])
    assert summaries(result) == {
        "small": "needs 2 GPUs; 4 free in queue default (capability unlimited); no gang ahead"
    }


def test_every_short_resource_is_named() -> None:
    result = capacity(
        pods=[pod("busy", gpus=2, cpu="16", node_name="n1")],
        podgroups=[podgroup("wide", cpu="20")],
    )
    assert summaries(result) == {
        "wide": "needs 4 GPUs and 20 CPUs; 2 GPUs and 16 CPUs free in queue default (capability unlimited); "
        "no gang ahead"
    }


def test_closed_missing_and_unsized_queues_are_said() -> None:
    result = capacity(
        queues=[queue("closed", state="Closed")],
        podgroups=[
            podgroup("in-closed", queue="closed", gpus=1, members=1),
            podgroup("lost", queue="deleted"),
            podgroup("unsized", queue="closed", gpus=None, members=2, created="2026-01-01T00:00:01Z"),
        ],
    )
    assert summaries(result) == {
        "in-closed": "queue closed is Closed; needs 1 GPU; 4 free in queue closed (capability unlimited); "
        "no gang ahead",
        "unsized": "queue closed is Closed; needs no resources Volcano can see yet "
        "(no minResources, no pods); 1 gang ahead",
        "lost": "queue deleted does not exist: it can never start",
    }
    assert result.gang("ml", "lost") is not None
    assert result.gang("ml", "lost").never_fits  # type: ignore[union-attr]


# -- JSON -------------------------------------------------------------------------------------


def test_to_json_is_plain_json_with_snake_case_keys() -> None:
    result = capacity(
        priority_classes=[priority_class("high", 1000)],
        podgroups=[podgroup("g", priority_class="high", created="2026-01-01T00:00:07Z")],
    )
    result.warnings.append("missing RBAC rule nodes: list (ClusterRole)")
    data = json.loads(json.dumps(result.to_json()))
    assert list(data) == ["resources", "queues", "waiting", "warnings"]
    assert list(data["resources"]) == [GPU, "cpu", "memory"]
    assert data["waiting"] == [
        {
            "namespace": "ml",
            "name": "g",
            "queue": "default",
            "phase": "Pending",
            "priority": 1000,
            "priority_class": "high",
            "created": "2026-01-01T00:00:07Z",
            "needs": {GPU: "4"},
            "gangs_ahead": 0,
            "never_fits": False,
            "summary": "needs 4 GPUs; 4 free in queue default (capability unlimited); no gang ahead",
        }
    ]
    assert data["warnings"] == ["missing RBAC rule nodes: list (ClusterRole)"]
    # Each part serialises on its own too, the same way.
    assert result.waiting[0].to_json() == data["waiting"][0]
    assert result.queues[0].to_json() == data["queues"][0]
    assert result.resources["memory"].to_json("memory") == data["resources"]["memory"]


@pytest.mark.parametrize("bad", ["lots", {"x": 1}])
def test_an_unreadable_quantity_is_skipped_not_fatal(bad: Any) -> None:
    broken = node("n1")
    broken["status"]["allocatable"][GPU] = bad
    assert capacity(nodes=[broken, node("n2")]).resources[GPU].allocatable == 2
