"""Cordon and drain: ``gang_sim.drain.drain_node`` and ``airflow-gang sim drain``/``uncordon``.

Upstream behaviour followed (``/tmp/s42/kube_disruption_facts.md`` §C2, §C4): k8s.io/kubectl at
``kubernetes-1.36.3`` — ``pkg/cmd/drain/drain.go:325-335`` (``RunDrain``: cordon, then evict),
``pkg/drain/cordon.go:81-100`` (the strategic merge patch of ``spec.unschedulable``),
``pkg/drain/filters.go:152-161,204-216`` (DaemonSet and mirror pods skipped), ``:236-250``
(pods without a controller need ``--force``), ``pkg/drain/drain.go:311-314`` (a 429 is retried
after ``EvictErrorRetryDelay``, 5 s) and ``:341-354`` (waiting for evicted pods to go); and the
node lifecycle controller's ``doNoScheduleTaintingPass`` (``node.kubernetes.io/unschedulable``
while ``spec.unschedulable``, k8s.io/api ``core/v1/well_known_taints.go@kubernetes-1.36.3``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from gang_sim.cli import main as sim_main
from gang_sim.cluster import SimCluster
from gang_sim.drain import DrainError, cordon, drain_node
from tests.sim.disruptions.pods import budget, gone, pod, pod_json, start_running
from tests.waiting import eventually

NODE = "sim-node-2"
UNSCHEDULABLE = ("node.kubernetes.io/unschedulable", "NoSchedule")


def taints(core: k8s.CoreV1Api, node: str) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in core.read_node(node).spec.taints or []}


@pytest.fixture
def uncordoned(core: k8s.CoreV1Api) -> Iterator[k8s.CoreV1Api]:
    """The module's cluster, with the node schedulable again after the test."""
    yield core
    cordon(core, NODE, unschedulable=False)
    eventually(lambda: UNSCHEDULABLE not in taints(core, NODE), timeout=10)


def test_a_cordoned_node_is_tainted_unschedulable_until_it_is_uncordoned(uncordoned: k8s.CoreV1Api) -> None:
    core = uncordoned
    cordon(core, NODE)
    eventually(lambda: UNSCHEDULABLE in taints(core, NODE), timeout=10, message="taint added")
    assert core.read_node(NODE).spec.unschedulable is True

    cordon(core, NODE, unschedulable=False)

    eventually(lambda: UNSCHEDULABLE not in taints(core, NODE), timeout=10, message="taint removed")
    assert not core.read_node(NODE).spec.unschedulable


def test_drain_evicts_what_it_may_and_reports_what_a_budget_blocks(
    uncordoned: k8s.CoreV1Api, api_client: k8s.ApiClient, namespace: str
) -> None:
    core, policy = uncordoned, k8s.PolicyV1Api(api_client)
    guarded = {"app": "guarded"}
    start_running(
        core,
        namespace,
        pod("free", NODE),
        pod("guarded", NODE, labels=guarded),
        pod("mirror", NODE, annotations={"kubernetes.io/config.mirror": "0123"}),
    )
    policy.create_namespaced_pod_disruption_budget(namespace, budget("guard", guarded, minAvailable=1))
    eventually(
        lambda: (
            policy.read_namespaced_pod_disruption_budget("guard", namespace).status.observed_generation == 1
        )
    )
    lines: list[str] = []

    result = drain_node(core, NODE, timeout=1.5, retry_interval=0.5, force=True, echo=lines.append)

    assert core.read_node(NODE).spec.unschedulable is True
    mine = [key for key in result.evicted if key.startswith(f"{namespace}/")]
    assert mine == [f"{namespace}/free"]
    assert f"{namespace}/guarded" in result.blocked
    assert f"{namespace}/mirror" in result.skipped
    assert not result.complete
    assert gone(core, namespace, "free")
    assert "deletionTimestamp" not in pod_json(core, namespace, "guarded")["metadata"]
    assert lines[0] == f"node/{NODE} cordoned"
    assert (
        f'error when evicting pods/"guarded" -n "{namespace}" (will retry after 0.5s): Cannot evict pod as '
        "it would violate the pod's disruption budget."
    ) in lines

    policy.delete_namespaced_pod_disruption_budget("guard", namespace)
    again = drain_node(core, NODE, timeout=20, retry_interval=0.5, force=True)

    assert f"{namespace}/guarded" in again.evicted
    assert again.complete
    assert gone(core, namespace, "guarded")


def test_drain_stops_at_pods_without_a_controller_unless_forced(
    uncordoned: k8s.CoreV1Api, namespace: str
) -> None:
    core = uncordoned
    start_running(core, namespace, pod("orphan", NODE))

    with pytest.raises(
        DrainError, match=f"cannot delete Pods that declare no controller.*{namespace}/orphan"
    ):
        drain_node(core, NODE, timeout=5)

    assert "deletionTimestamp" not in pod_json(core, namespace, "orphan")["metadata"], "nothing evicted"


def test_drain_leaves_daemonset_pods(uncordoned: k8s.CoreV1Api, namespace: str) -> None:
    """The simulator serves no DaemonSets: the pod's controller reference points at another
    object's UID, which keeps the garbage collector from deleting it as dangling."""
    core = uncordoned
    holder = core.create_namespaced_config_map(namespace, {"metadata": {"name": "agent"}})
    owned = pod("agent-x", NODE)
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "agent",
            "uid": holder.metadata.uid,
            "controller": True,
        }
    ]
    start_running(core, namespace, owned)

    result = drain_node(core, NODE, timeout=5)

    assert f"{namespace}/agent-x" in result.skipped
    assert "deletionTimestamp" not in pod_json(core, namespace, "agent-x")["metadata"]


def test_the_sim_drain_and_uncordon_commands(
    cluster: SimCluster, uncordoned: k8s.CoreV1Api, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    core = uncordoned
    start_running(core, namespace, pod("by-cli", NODE))
    kubeconfig = cluster.kubeconfig_path

    code = sim_main(["drain", NODE, "--kubeconfig", kubeconfig, "--timeout", "20", "--force"])

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"evicting pod {namespace}/by-cli" in out
    assert out.rstrip().endswith(f"node/{NODE} drained")
    assert gone(core, namespace, "by-cli")
    assert sim_main(["uncordon", NODE, "--kubeconfig", kubeconfig]) == 0
    assert capsys.readouterr().out == f"node/{NODE} uncordoned\n"
    assert not core.read_node(NODE).spec.unschedulable
