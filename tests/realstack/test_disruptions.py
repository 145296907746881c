"""A running gang loses its node under a real scheduler, triggerer and api-server (conftest.py).

Four 4-CPU replicas fill one node of the package's cluster; once they run, the node's machine
dies for 16 s (a reboot). The embedded cluster does what a real one does (docs/disruptions.md):
the node goes ``Unknown`` and is tainted, its pods get ``DisruptionTarget`` reason
``DeletionByTaintManager`` and stay Terminating until the machine is back and its kubelet
confirms, then the training-operator recreates the replicas under the same names and Volcano
places the gang again. (tests/e2e/test_disruptions.py deletes the Node instead, as for a spot VM
that is gone; the package's cluster must keep both nodes for the tests after this one.)

- ``on_disruption="wait"``, deferred and in the worker: the task logs the node lost and the
  re-admission, and succeeds on its first and only PyTorchJob;
- ``on_disruption="retry"``, deferred: the trigger deletes the job (seen gone), the try fails
  with `GangJobDisrupted`, and the retry's new job, told the same ``GANG_CHECKPOINT_DIR``,
  succeeds. The try-1 job is gone before the try-2 job exists: never two at once.

- a drain (cordon + evictions through the Eviction API) of one node under a running sweep of
  three 2-GPU gangs: every task succeeds, the evicted gang waits for the other node and is
  re-admitted there, and the Gang jobs page lists its recorded disruption.

A watch records every PyTorchJob the DAG creates or deletes, so "one job per try, never two at
once" is seen, not inferred. The node is Ready again before the next test.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from airflow_gang.model.naming import DAG_ID_LABEL, TRY_NUMBER_LABEL, safe_label_value
from gang_sim.cluster import SimCluster
from gang_sim.drain import cordon, drain_node
from gang_stack import AirflowStack
from tests.support.cluster import PYTORCHJOBS
from tests.support.realstack import component_logs
from tests.waiting import eventually

RUN_TIMEOUT = 180.0
# Past the simulator's node grace period (10 s by default) and default toleration (3 s): the taint
# eviction controller has deleted the node's pods before the machine is back.
DOWN_SECONDS = 16


@dataclass
class JobLog:
    """PyTorchJobs of one DAG seen ADDED or DELETED, in order: (type, try number, name)."""

    seen: list[tuple[str, str, str]] = field(default_factory=list)


@contextmanager
def job_log(api: k8s.ApiClient, dag_id: str) -> Iterator[JobLog]:
    custom = k8s.CustomObjectsApi(api)
    selector = f"{DAG_ID_LABEL}={safe_label_value(dag_id)}"
    listed = custom.list_namespaced_custom_object(*PYTORCHJOBS, label_selector=selector)
    assert not listed["items"], "a job of this DAG existed before the test"
    version = listed["metadata"]["resourceVersion"]
    found, stop = JobLog(), threading.Event()

    def follow() -> None:
        nonlocal version
        while not stop.is_set():
            for event in k8s_watch.Watch().stream(
                custom.list_namespaced_custom_object,
                *PYTORCHJOBS,
                label_selector=selector,
                resource_version=version,
                timeout_seconds=2,
                _request_timeout=5,
            ):
                metadata = event["object"]["metadata"]
                version = metadata.get("resourceVersion", version)
                if event["type"] in ("ADDED", "DELETED"):
                    try_number = (metadata.get("labels") or {}).get(TRY_NUMBER_LABEL, "?")
                    found.seen.append((event["type"], try_number, metadata["name"]))

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join(timeout=10)


def kill_the_node_of(cluster: SimCluster, api: k8s.ApiClient, dag_id: str) -> str:
    """Once the DAG's four replicas run, fail their node for `DOWN_SECONDS`."""
    core = k8s.CoreV1Api(api)
    selector = f"{DAG_ID_LABEL}={safe_label_value(dag_id)}"

    def running() -> list[k8s.V1Pod]:
        pods = core.list_namespaced_pod("default", label_selector=selector).items
        return pods if len(pods) == 4 and all(p.status.phase == "Running" for p in pods) else []

    eventually(lambda: bool(running()), timeout=90, message=f"the gang of {dag_id} never ran")
    nodes = {pod.spec.node_name for pod in running()}
    assert len(nodes) == 1, f"the gang was expected on one node, got {nodes}"
    (node,) = nodes
    cluster.set_faults({"node_failures": [{"at": 0, "node": node, "duration": DOWN_SECONDS}]})
    return node


@pytest.fixture
def node_restored(cluster: SimCluster, api: k8s.ApiClient) -> Iterator[None]:
    yield
    cluster.clear_faults()
    core = k8s.CoreV1Api(api)

    def both_ready() -> bool:
        ready = [
            n
            for n in core.list_node().items
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        ]
        return len(ready) == 2

    eventually(both_ready, timeout=60, message="the killed node did not come back")


@pytest.mark.usefixtures("node_restored")
@pytest.mark.parametrize(
    "dag_id",
    # In the worker: slow (CI's time budget), its twin is tests/e2e/test_disruptions.py's sync wait.
    ["rs_disruption_wait", pytest.param("rs_disruption_wait_in_worker", marks=pytest.mark.slow)],
    ids=["deferred", "in_worker"],
)
def test_wait_rides_out_the_lost_node_on_one_job(
    stack: AirflowStack, cluster: SimCluster, api: k8s.ApiClient, dag_id: str
) -> None:
    with job_log(api, dag_id) as jobs:
        run_id = stack.client.trigger(dag_id)
        node = kill_the_node_of(cluster, api, dag_id)
        state = stack.client.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    (ti,) = stack.client.task_instances(dag_id, run_id)
    log = stack.client.task_log(dag_id, run_id, "train", ti["try_number"])
    assert state == "success", f"{log}\n{component_logs(stack)}"
    assert ti["try_number"] == 1
    added = [entry for entry in jobs.seen if entry[0] == "ADDED"]
    assert len(added) == 1, jobs.seen
    name = added[0][2]
    assert f"gang disrupted job=default/{name} (#1): node lost: " in log  # its pods, one look or more
    assert f"on {node}" in log
    assert "Taint manager: deleting due to NoExecute taint" in log
    assert "back in queue default: waiting for re-admission" in log
    assert f"gang re-admitted job=default/{name}" in log


@pytest.mark.usefixtures("node_restored")
def test_retry_deletes_the_disrupted_job_and_the_retry_succeeds_with_the_same_checkpoint_dir(
    stack: AirflowStack, cluster: SimCluster, api: k8s.ApiClient
) -> None:
    dag_id = "rs_disruption_retry"
    core = k8s.CoreV1Api(api)
    told: set[str] = set()
    with job_log(api, dag_id) as jobs:
        run_id = stack.client.trigger(dag_id)
        kill_the_node_of(cluster, api, dag_id)

        def second_try_running() -> bool:
            for pod in core.list_namespaced_pod("default", label_selector=f"{TRY_NUMBER_LABEL}=2").items:
                told.update(
                    e.value for e in pod.spec.containers[0].env or [] if e.name == "GANG_CHECKPOINT_DIR"
                )
            return bool(told)

        eventually(second_try_running, timeout=120, message="the retry's job never got pods")
        state = stack.client.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    (ti,) = stack.client.task_instances(dag_id, run_id)
    first = stack.client.task_log(dag_id, run_id, "train", 1)
    assert state == "success", f"{first}\n{component_logs(stack)}"
    assert ti["try_number"] == 2
    assert "disrupted (node lost) with on_disruption='retry'" in first
    assert "GangJobDisrupted" in first
    assert "a retry starts clean" in first  # the trigger saw the job gone before the try failed
    assert [(kind, number) for kind, number, _ in jobs.seen] == [
        ("ADDED", "1"),
        ("DELETED", "1"),
        ("ADDED", "2"),
        ("DELETED", "2"),  # delete_on_finish="on_success"
    ], jobs.seen
    assert told == {f"/ckpt/{dag_id}/train/{run_id}"}


@pytest.mark.usefixtures("node_restored")
def test_a_drain_under_a_running_sweep_is_ridden_out_and_shown_on_the_page(
    stack: AirflowStack, cluster: SimCluster, api: k8s.ApiClient
) -> None:
    dag_id = "rs_disruption_drain_sweep"
    core = k8s.CoreV1Api(api)
    selector = f"{DAG_ID_LABEL}={safe_label_value(dag_id)}"

    def two_gangs_running() -> bool:
        pods = core.list_namespaced_pod("default", label_selector=selector).items
        return sum(p.status.phase == "Running" for p in pods) == 4

    def watching() -> int:
        """Tasks whose trigger has looked at their running gang."""
        deferred = [
            ti["map_index"] for ti in stack.client.task_instances(dag_id, run_id) if ti["state"] == "deferred"
        ]
        logs = [stack.client.task_log(dag_id, run_id, "train", 1, map_index=index) for index in deferred]
        return sum("gang admitted job=" in log for log in logs)

    with job_log(api, dag_id) as jobs:
        run_id = stack.client.trigger(dag_id)
        eventually(two_gangs_running, timeout=90, message="two gangs never ran together")
        # Drained while their triggers watch: an eviction during the hand-over to the triggerer,
        # whose pods are gone before the trigger's first look, leaves nothing to see.
        eventually(lambda: watching() >= 2, timeout=60, message="no trigger watched the running gangs")
        try:
            result = drain_node(core, "sim-node-1", timeout=60, retry_interval=1)
            assert result.complete, result
            ours = {name for _, _, name in jobs.seen}  # (another DAG's job may share the node)
            evicted = [pod for pod in result.evicted if job_of(pod) in ours]
            assert len(evicted) == 2, (result, jobs.seen)  # the master and worker of the gang there
            (drained_job,) = {job_of(pod) for pod in evicted}
            state = stack.client.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
        finally:
            cordon(core, "sim-node-1", unschedulable=False)
    assert state == "success", component_logs(stack)
    assert [kind for kind, _, _ in jobs.seen].count("ADDED") == 3, jobs.seen  # one job per task, no twin
    tis = stack.client.task_instances(dag_id, run_id)
    assert [ti["state"] for ti in sorted(tis, key=lambda ti: ti["map_index"])] == ["success"] * 3
    logs = {
        ti["map_index"]: stack.client.task_log(dag_id, run_id, "train", 1, map_index=ti["map_index"])
        for ti in tis
    }
    disrupted = [index for index, log in logs.items() if f"gang disrupted job=default/{drained_job}" in log]
    told = "\n".join(
        f"[{i}] {line}" for i, log in logs.items() for line in log.splitlines() if "gang" in line
    )
    assert len(disrupted) == 1, f"{drained_job}\n{told}"
    log = logs[disrupted[0]]
    assert "evicted: " in log, told
    assert "Eviction API: evicting" in log, told
    assert f"gang re-admitted job=default/{drained_job}" in log, told
    page = stack.client.call("GET", f"/gang/api/jobs?dag_id={dag_id}")
    rows = {job["name"]: job for job in page["jobs"] if job["airflow"]["run_id"] == run_id}
    assert {row["state"] for row in rows.values()} == {"succeeded"}
    (episode,) = rows[drained_job]["disruptions"]
    assert episode["reason"] == "evicted"
    assert episode["nodes"] == ["sim-node-1"]
    assert episode["readmitted_at"] is not None
    assert all(not row["disruptions"] for name, row in rows.items() if name != drained_job)


def job_of(pod: str) -> str:
    """``default/<job>-master-0`` -> ``<job>``."""
    return pod.split("/", 1)[1].rsplit("-", 2)[0]
