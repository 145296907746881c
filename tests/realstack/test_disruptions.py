"""A running gang loses its node under a real scheduler, triggerer and api-server (conftest.py).

Four 4-CPU replicas fill one node of the package's cluster; once they run, the node's machine
dies for 8 s (a reboot). The embedded cluster does what a real one does (docs/disruptions.md):
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

from airflow_gang.naming import DAG_ID_LABEL, TRY_NUMBER_LABEL, safe_label_value
from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack
from tests.e2e.test_scenarios import PYTORCHJOBS
from tests.realstack.conftest import component_logs
from tests.waiting import eventually

RUN_TIMEOUT = 180.0
# Past the simulator's node grace period (2 s) and default toleration (3 s): the taint eviction
# controller has deleted the node's pods before the machine is back.
DOWN_SECONDS = 8


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
    "dag_id", ["rs_disruption_wait", "rs_disruption_wait_in_worker"], ids=["deferred", "in_worker"]
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
