"""Node-pressure eviction: the kubelet ends the pod itself, and leaves it for its owner.

Upstream behaviour followed (``docs/disruptions.md``; kubernetes/kubernetes
cited by function and string literal): ``pkg/kubelet/eviction/helpers.go`` (``Reason =
"Evicted"``, ``nodeLowMessageFmt`` "The node was low on resource: %v. ",
``thresholdMetMessageFmt`` "Threshold quantity: %v, available: %v. ", the container message of
recent releases "Container %s was using %s, request is %s, has larger consumption of %v. ") and
``eviction_manager.go`` (``evictPod``: phase Failed, reason Evicted, a Warning ``Evicted``
event; the ``DisruptionTarget`` condition with reason ``TerminationByKubelet``,
``v1.PodReasonTerminationByKubelet`` at k8s.io/api ``core/v1/types.go:3567-3569@kubernetes-1.36.3``,
and the eviction message; the kubelet does not delete the pod).
"""

from __future__ import annotations

from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.disruptions.pods import condition, pod, pod_json, start_running
from tests.waiting import eventually

MESSAGE = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "


def test_a_kubelet_eviction_fails_the_pod_evicted_and_leaves_it_there(
    cluster: SimCluster, core: k8s.CoreV1Api, namespace: str
) -> None:
    start_running(core, namespace, pod("hungry", "sim-node-1"), pod("greedy", "sim-node-2"))
    before = cluster.fault_counts()["kubelet_eviction"]

    cluster.set_faults(
        {
            "kubelet_evictions": [
                {"at": 0, "namespace": namespace, "pod": "hungry", "resource": "memory"},
                {"at": 0, "namespace": namespace, "pod": "greedy", "usage": "2Gi"},
                {"at": 0, "namespace": namespace, "pod": "nobody"},
            ]
        }
    )

    for name in ("hungry", "greedy"):
        eventually(
            lambda name=name: pod_json(core, namespace, name)["status"]["phase"] == "Failed", timeout=10
        )
    hungry = pod_json(core, namespace, "hungry")
    assert (hungry["status"]["reason"], hungry["status"]["message"]) == ("Evicted", MESSAGE)
    target = condition(hungry, "DisruptionTarget")
    assert target is not None
    assert (target["status"], target["reason"], target["message"]) == (
        "True",
        "TerminationByKubelet",
        MESSAGE,
    )
    assert (condition(hungry, "Ready") or {}).get("status") == "False"
    terminated = hungry["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 137, "killed: a hard threshold leaves no grace period"
    assert "deletionTimestamp" not in hungry["metadata"], "the kubelet does not delete it"
    greedy = pod_json(core, namespace, "greedy")
    assert greedy["status"]["message"] == (
        MESSAGE + "Container pytorch was using 2Gi, request is 0, has larger consumption of memory. "
    )
    events = eventually(
        lambda: [
            e
            for e in core.list_namespaced_event(namespace, field_selector="involvedObject.name=hungry").items
            if e.reason == "Evicted"
        ],
        timeout=10,
    )
    assert (events[0].type, events[0].message, events[0].source.component) == ("Warning", MESSAGE, "kubelet")
    assert cluster.fault_counts()["kubelet_eviction"] - before == 2, "the missing pod is not counted"
    cluster.clear_faults()
