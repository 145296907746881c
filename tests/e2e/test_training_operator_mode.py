"""Seed scenario with ``gang_scheduling="training-operator"``: the operator only sets
``runPolicy.schedulingPolicy`` and a training-operator started with ``--gang-scheduler-name=volcano``
creates the PodGroup. This module runs its own cluster with that flag (``training_operator_gang``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.sim.cluster import SimCluster
from tests.e2e.conftest import task_states
from tests.e2e.test_scenarios import MODES, JobEvents, run_seed_sweep

pytestmark = pytest.mark.usefixtures("kube_connection")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """conftest's pool of 4 GPUs, with the training-operator's gang flag set."""
    with SimCluster(
        nodes=2,
        gpus_per_node=2,
        schedule_period=0.2,
        queues={"research": None},
        training_operator_gang="volcano",
    ) as running:
        yield running


@MODES
def test_six_mapped_jobs_all_succeed_with_gangs_made_by_the_training_operator(
    write_dag: Callable[..., Any], api: k8s.ApiClient, cluster: SimCluster, tmp_path: Path, deferrable: bool
) -> None:
    with JobEvents(cluster) as events:
        run_seed_sweep(write_dag, tmp_path, gang="training-operator", deferrable=deferrable)
    assert len([event for event in events.events if event.type == "ADDED"]) == 6


def test_the_training_operator_creates_the_podgroup_of_a_submitted_job(
    write_dag: Callable[..., Any], api: k8s.ApiClient
) -> None:
    """The PodGroup of a ``training-operator`` mode job is the training-operator's: it is the job's
    controller-owned child (the provider's own PodGroups carry a non-controller reference)."""
    dag = write_dag(
        """
        import datetime as dt
        from airflow.sdk import DAG
        from airflow_gang.operators.pytorch_job import PyTorchJobOperator

        with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
            PyTorchJobOperator(
                task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
                gang_scheduling="training-operator", wait_for_completion=False, poll_interval=0.2,
                admission_timeout=60,
                pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "60"}}},
            )
        """
    )
    # Still running when the task returns at admission: a finished job's PodGroup is deleted by
    # the training-operator, so a short job's could be gone before it is read below.
    custom = k8s.CustomObjectsApi(api)
    assert task_states(dag.test()) == {"train": "success"}
    (job,) = custom.list_namespaced_custom_object(
        "kubeflow.org", "v1", "default", "pytorchjobs", label_selector=f"airflow-gang.io/dag-id={dag.dag_id}"
    )["items"]
    name = job["metadata"]["name"]
    try:
        podgroup = custom.get_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", "default", "podgroups", name
        )
        owners = podgroup["metadata"].get("ownerReferences") or []
        assert [(o["kind"], o["uid"], o.get("controller")) for o in owners] == [
            ("PyTorchJob", job["metadata"]["uid"], True)
        ]
        assert podgroup["spec"]["minMember"] == 4
    finally:
        custom.delete_namespaced_custom_object(
            "kubeflow.org", "v1", "default", "pytorchjobs", name, body={"propagationPolicy": "Foreground"}
        )
