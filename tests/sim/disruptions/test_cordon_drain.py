"""Cordon and drain: ``gang_sim.drain.drain_node`` and ``airflow-gang sim drain``/``uncordon``.

Upstream behaviour followed (``docs/disruptions.md``): k8s.io/kubectl at
``kubernetes-1.36.3`` — ``pkg/cmd/drain/drain.go:325-335`` (``RunDrain``: cordon, then evict),
``pkg/drain/cordon.go:81-100`` (the strategic merge patch of ``spec.unschedulable``),
``pkg/drain/filters.go:152-161,204-216`` (DaemonSet and mirror pods skipped), ``:236-250``
(pods without a controller need ``--force``), ``pkg/drain/drain.go:311-314`` (a 429 is retried
after ``EvictErrorRetryDelay``, 5 s) and ``:341-354`` (waiting for evicted pods to go); and the
node lifecycle controller's ``doNoScheduleTaintingPass`` (``node.kubernetes.io/unschedulable``
while ``spec.unschedulable``, k8s.io/api ``core/v1/well_known_taints.go@kubernetes-1.36.3``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from gang_sim.cli import main as sim_main
from gang_sim.cluster import SimCluster
from gang_sim.drain import DrainError, cordon, drain_node
from tests.sim.disruptions.pods import budget, gone, pod, pod_json, start_running
from tests.sim.kubectl_binaries import find_kubectls
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


@pytest.mark.parametrize("version", ["v1.20", "other"])
def test_kubectl_drain_finds_the_eviction_api_and_is_held_by_a_budget(
    version: str,
    cluster: SimCluster,
    uncordoned: k8s.CoreV1Api,
    api_client: k8s.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The real kubectl (Debian's 1.20 and any other on PATH) drains through the simulator's
    ``pods/eviction`` and retries what a budget refuses, printing its own retry line."""
    available = dict(find_kubectls())
    binary = (
        available.get("v1.20")
        if version == "v1.20"
        else next((b for v, b in available.items() if v != "v1.20"), None)
    )
    if binary is None:
        pytest.skip(f"no kubectl {version} here")
    core, policy = uncordoned, k8s.PolicyV1Api(api_client)
    guarded = {"app": "kubectl-guarded"}
    start_running(core, namespace, pod("kept", NODE, labels=guarded))
    policy.create_namespaced_pod_disruption_budget(namespace, budget("keep", guarded, minAvailable=1))
    eventually(
        lambda: (
            policy.read_namespaced_pod_disruption_budget("keep", namespace).status.observed_generation == 1
        )
    )
    command = [binary, "--kubeconfig", cluster.kubeconfig_path, "drain", NODE, "--ignore-daemonsets"]
    command += ["--delete-emptydir-data", "--force"]
    environment = {**os.environ, "HOME": str(tmp_path)}  # a private discovery cache

    # kubectl sleeps 5 s after each refused eviction and checks its timeout before the next try:
    # under 5 s, the held drain refuses once, prints its retry line and ends at the first check.
    held = subprocess.run(
        [*command, "--timeout=4s"], capture_output=True, text=True, timeout=60, env=environment, check=False
    )

    assert held.returncode != 0
    assert (
        f'error when evicting pods/"kept" -n "{namespace}" (will retry after 5s): Cannot evict pod as it '
        "would violate the pod's disruption budget."
    ) in held.stdout + held.stderr
    assert "deletionTimestamp" not in pod_json(core, namespace, "kept")["metadata"]

    policy.delete_namespaced_pod_disruption_budget("keep", namespace)
    drained = subprocess.run(
        [*command, "--timeout=7s"], capture_output=True, text=True, timeout=60, env=environment, check=False
    )

    assert drained.returncode == 0, drained.stderr
    assert f"node/{NODE} drained" in drained.stdout or f"node/{NODE} evicted" in drained.stdout  # 1.20's word
    assert gone(core, namespace, "kept")
