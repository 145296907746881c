"""A node whose machine dies, as the rest of a real cluster finds out: from the silence.

Upstream behaviour followed (``docs/disruptions.md``; kubernetes/kubernetes
cited by function and string literal, it could not be fetched at a tag):
``pkg/controller/nodelifecycle/node_lifecycle_controller.go`` (``tryUpdateNodeHealth``: Ready
``Unknown``, "Kubelet stopped posting node status." after ``--node-monitor-grace-period``, 40 s
in the stored defaults and probably 50 s since v1.32, 2 s in these tests; ``processTaintBaseEviction``:
``node.kubernetes.io/unreachable:NoExecute``, taint keys at k8s.io/api
``core/v1/well_known_taints.go:22,27,31,51@kubernetes-1.36.3``; ``MarkPodsNotReady``),
``plugin/pkg/admission/defaulttolerationseconds`` (300 s upstream, 3 s here),
``pkg/controller/tainteviction/taint_eviction.go`` (``processPodOnNode``,
``addConditionAndDeletePod``: ``DeletionByTaintManager``, "Taint manager: deleting due to
NoExecute taint") and ``pkg/controller/podgc/gc_controller.go`` (``gcOrphaned``:
``DeletionByPodGC``, "PodGC: node no longer exists", phase Failed, grace 0; ``gcTerminating``:
the ``node.kubernetes.io/out-of-service`` taint).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gang_sim.apiserver.server import start_apiserver
from gang_sim.cluster import SimCluster
from tests.sim.disruptions.pods import Json, condition, gone, pod, pod_json, start_running, states_until_gone
from tests.waiting import eventually

NODE = "sim-node-1"
LONG_TOLERATION = [
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 3600,
    }
]


@pytest.fixture
def fresh() -> Iterator[tuple[SimCluster, k8s.CoreV1Api]]:
    """A cluster of its own: these tests kill its nodes."""
    with (
        SimCluster(nodes=2, gpus_per_node=1, schedule_period=0.2, node_monitor_grace_period=2.0) as cluster,
        cluster.api_client() as api,
    ):
        yield cluster, k8s.CoreV1Api(api)


def ready_condition(core: k8s.CoreV1Api, node: str) -> k8s.V1NodeCondition:
    return next(c for c in core.read_node(node).status.conditions if c.type == "Ready")


def taints(core: k8s.CoreV1Api, node: str) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in core.read_node(node).spec.taints or []}


def terminating(core: k8s.CoreV1Api, name: str) -> Json | None:
    body = pod_json(core, "default", name)
    return body if body["metadata"].get("deletionTimestamp") else None


def test_a_failed_node_goes_unknown_and_its_pods_terminating_until_the_node_is_deleted(
    fresh: tuple[SimCluster, k8s.CoreV1Api],
) -> None:
    """The whole sequence of a VM that goes away (``delete_node_after``): Unknown and tainted
    after the grace period, the pod deleted once its default toleration runs out and left
    Terminating (no kubelet confirms), a pod with a long toleration left alone, and both
    force-deleted by pod GC once the Node is gone."""
    cluster, core = fresh
    start_running(core, "default", pod("plain", NODE), pod("patient", NODE, tolerations=LONG_TOLERATION))
    plain = pod_json(core, "default", "plain")
    assert {
        (t["key"], t["tolerationSeconds"]) for t in plain["spec"]["tolerations"] if t["effect"] == "NoExecute"
    } == {("node.kubernetes.io/not-ready", 3), ("node.kubernetes.io/unreachable", 3)}
    version = core.list_namespaced_pod("default").metadata.resource_version

    # The taint manager deletes "plain" 5 s in (grace 2 s + toleration 3 s); the Node goes 4 s
    # later, so what is checked in between is seen before pod GC's turn.
    cluster.set_faults({"node_failures": [{"at": 0, "node": NODE, "delete_node_after": 9}]})

    unknown = eventually(lambda: (c := ready_condition(core, NODE)).status == "Unknown" and c, timeout=10)
    assert (unknown.reason, unknown.message) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
    assert taints(core, NODE) == {
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    }
    assert ready_condition(core, "sim-node-2").status == "True"
    doomed = eventually(lambda: terminating(core, "plain"), timeout=10, message="plain Terminating")
    target = condition(doomed, "DisruptionTarget")
    assert target is not None
    assert (target["reason"], target["message"]) == (
        "DeletionByTaintManager",
        "Taint manager: deleting due to NoExecute taint",
    )
    assert doomed["status"]["phase"] == "Running", "no kubelet wrote its end"
    assert (condition(doomed, "Ready") or {}).get("status") == "False", "MarkPodsNotReady"
    assert terminating(core, "patient") is None, "tolerates the taint for an hour"

    states = states_until_gone(core, "default", {"plain", "patient"}, version)

    last_plain, last_patient = states["plain"][-1], states["patient"][-1]
    assert [s["metadata"].get("deletionTimestamp") is not None for s in states["plain"]].count(True) >= 1
    for last in (last_plain, last_patient):
        assert last["status"]["phase"] == "Failed"
        gc_mark = condition(last, "DisruptionTarget")
        assert gc_mark is not None
        assert (gc_mark["reason"], gc_mark["message"]) == ("DeletionByPodGC", "PodGC: node no longer exists")
    counts = cluster.fault_counts()
    assert (counts["node_failure"], counts["node_deletion"]) == (1, 1)
    with pytest.raises(k8s.ApiException) as caught:
        core.read_node(NODE)
    assert caught.value.status == 404


def test_a_node_that_comes_back_confirms_the_deletions_and_fails_the_pods_it_lost(
    fresh: tuple[SimCluster, k8s.CoreV1Api],
) -> None:
    """``duration``: the machine returns. Its kubelet posts Ready again (the lifecycle taints go),
    confirms the deletion that waited, and ends Failed the ``restartPolicy: Never`` pod whose
    container died with the machine."""
    cluster, core = fresh
    start_running(core, "default", pod("plain", NODE), pod("patient", NODE, tolerations=LONG_TOLERATION))

    cluster.set_faults({"node_failures": [{"at": 0, "node": NODE, "duration": 8}]})

    eventually(lambda: terminating(core, "plain"), timeout=10, message="plain Terminating")
    eventually(lambda: ready_condition(core, NODE).status == "True", timeout=15, message="node back")
    eventually(lambda: gone(core, "default", "plain"), timeout=10, message="deletion confirmed")
    eventually(lambda: pod_json(core, "default", "patient")["status"]["phase"] == "Failed", timeout=10)
    terminated = pod_json(core, "default", "patient")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "ContainerStatusUnknown")
    eventually(lambda: not taints(core, NODE), timeout=10, message="lifecycle taints removed")


def test_pod_gc_force_deletes_terminating_pods_of_an_out_of_service_node(
    fresh: tuple[SimCluster, k8s.CoreV1Api],
) -> None:
    """``gcTerminating``: an administrator's ``node.kubernetes.io/out-of-service:NoExecute`` on a
    node that is not Ready lets its Terminating pods go (phase Failed, grace 0) without waiting
    for the machine. The taint's NoExecute also ends the patient pod's toleration."""
    cluster, core = fresh
    start_running(core, "default", pod("plain", NODE), pod("patient", NODE, tolerations=LONG_TOLERATION))
    version = core.list_namespaced_pod("default").metadata.resource_version
    cluster.set_faults({"node_failures": [{"at": 0, "node": NODE}]})
    eventually(lambda: terminating(core, "plain"), timeout=10, message="plain Terminating")

    out_of_service = {
        "key": "node.kubernetes.io/out-of-service",
        "value": "nodeshutdown",
        "effect": "NoExecute",
    }
    node = json.loads(core.read_node(NODE, _preload_content=False).data)
    core.patch_node(NODE, {"spec": {"taints": [*node["spec"]["taints"], out_of_service]}})

    states = states_until_gone(core, "default", {"plain", "patient"}, version)
    for name in ("plain", "patient"):
        last = states[name][-1]
        assert last["status"]["phase"] == "Failed"
        assert (condition(last, "DisruptionTarget") or {}).get("reason") == "DeletionByTaintManager"
    assert core.read_node(NODE).metadata.name == NODE, "the Node stays: only its pods were let go"


def test_default_toleration_seconds_are_an_option_of_the_api_server() -> None:
    """kube-apiserver's ``--default-not-ready-toleration-seconds`` and
    ``--default-unreachable-toleration-seconds`` (DefaultTolerationSeconds admission); a pod's
    own NoExecute toleration for a key (or for every key) is kept and not doubled."""
    with (
        start_apiserver(
            default_not_ready_toleration_seconds=7, default_unreachable_toleration_seconds=300
        ) as server,
        k8s_config.new_client_from_config(config_file=server.kubeconfig_path) as api,
    ):
        core = k8s.CoreV1Api(api)
        core.create_namespaced_pod("default", pod("defaulted"))
        core.create_namespaced_pod("default", pod("own", tolerations=LONG_TOLERATION))
        everything = [{"operator": "Exists"}]
        core.create_namespaced_pod("default", pod("everything", tolerations=everything))

        def no_execute(name: str) -> list[tuple[str | None, int | None]]:
            found = pod_json(core, "default", name)["spec"]["tolerations"]
            return [(t.get("key"), t.get("tolerationSeconds")) for t in found]

        assert no_execute("defaulted") == [
            ("node.kubernetes.io/not-ready", 7),
            ("node.kubernetes.io/unreachable", 300),
        ]
        assert no_execute("own") == [
            ("node.kubernetes.io/unreachable", 3600),
            ("node.kubernetes.io/not-ready", 7),
        ]
        assert no_execute("everything") == [(None, None)]


def test_an_api_server_outage_longer_than_the_grace_period_evicts_nothing(
    fresh: tuple[SimCluster, k8s.CoreV1Api],
) -> None:
    """Every node falls silent at once when the API server is gone: upstream's
    ``handleDisruption`` ("Controller detected that all Nodes are not-Ready. Entering master
    disruption mode.") lifts the NoExecute taints and evicts nothing, and each kubelet posts its
    status again once the Node says other than it would (``tryUpdateNodeStatus``), so the nodes
    are Ready and untainted after the outage and the pods never saw a deletion."""
    cluster, core = fresh
    start_running(core, "default", pod("steady", NODE))
    cluster.set_faults({"outages": [{"start": 0, "duration": 6}]})  # 3 x the 2 s grace period

    def back() -> bool:
        try:
            nodes = core.list_node().items
        except Exception:  # the API server is still down
            return False
        return all(
            ready_condition(core, node.metadata.name).status == "True"
            and not {t for t in taints(core, node.metadata.name) if t[1] == "NoExecute"}
            for node in nodes
        )

    eventually(back, timeout=30, message="the nodes did not come back Ready and untainted")
    cluster.clear_faults()
    steady = pod_json(core, "default", "steady")
    assert steady["metadata"].get("deletionTimestamp") is None
    assert condition(steady, "DisruptionTarget") is None
