"""The plugin's pure parts and its metadata-DB reader, without HTTP.

The reader runs against the metadata DB the scenario's ``dag.test()`` filled (conftest.py).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from airflow_gang.kinds import PYTORCHJOB
from airflow_gang.model.naming import identity_labels, safe_label_value
from airflow_gang.plugins.identity import LabelIdentity, TaskIdentity, identity_view, task_instance_path
from airflow_gang.plugins.metadata import MetadataReader, clear_cache
from airflow_gang.plugins.settings import base_path, parse_namespaces
from airflow_gang.plugins.summaries import enqueue_failure
from tests.plugins.conftest import ADMITTED_PHASES, Scenario

RUN_ID = "scheduled__2026-03-01T00:00:00+00:00"


def test_namespaces_and_base_path_options() -> None:
    assert parse_namespaces(" ml, research,,ml ") == ("ml", "research")
    assert parse_namespaces("") == ()
    assert base_path("http://localhost:8080") == ""
    assert base_path("https://airflow.example.com/airflow/") == "/airflow"


def test_identity_from_labels_and_links() -> None:
    labels = LabelIdentity.from_labels(identity_labels("etl", "train", RUN_ID, 3, 2))
    assert labels is not None
    assert labels.run_label == safe_label_value(RUN_ID) != RUN_ID
    assert (labels.map_index, labels.try_number) == (3, 2)
    assert LabelIdentity.from_labels({"app": "x"}) is None

    real = TaskIdentity("etl", "train", RUN_ID, 3, 2, resolved=True, dag_resolved=True)
    assert task_instance_path(real, "/airflow") == (
        "/airflow/dags/etl/runs/scheduled__2026-03-01T00%3A00%3A00%2B00%3A00/tasks/train/mapped/3"
    )
    unmapped = TaskIdentity("etl", "train", "manual_1", -1, 1, resolved=True)
    assert task_instance_path(unmapped) == "/dags/etl/runs/manual_1/tasks/train"
    # Without the real ids there is no task instance link (the labels may hold hashes).
    view = identity_view(labels, None)
    assert view is not None
    assert (view["task_instance_url"], view["dag_url"], view["resolved"]) == (None, None, False)


def test_gang_mode_from_the_objects() -> None:
    def job(annotations: dict[str, str], scheduler: str | None, policy: bool) -> dict[str, Any]:
        template: dict[str, Any] = {"metadata": {"annotations": annotations}, "spec": {}}
        if scheduler:
            template["spec"]["schedulerName"] = scheduler
        spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template}}}
        if policy:
            spec["runPolicy"] = {"schedulingPolicy": {"queue": "default"}}
        return {"spec": spec}

    provider = job({"scheduling.k8s.io/group-name": "j"}, "volcano", True)
    assert PYTORCHJOB.observed_gang_mode(provider, None) == "provider"
    scheduled = job({}, None, True)
    assert PYTORCHJOB.observed_gang_mode(scheduled, {"metadata": {"name": "j"}}) == "training-operator"
    assert PYTORCHJOB.observed_gang_mode(job({}, None, False), None) == "disabled"


def test_enqueue_failure_keeps_the_gates_recent_reasons_only() -> None:
    def event(message: str, seconds: int, kind: str = "PodGroup", name: str = "pg") -> dict[str, Any]:
        moment = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
        return {
            "reason": "Unschedulable",
            "message": message,
            "involvedObject": {"kind": kind, "name": name},
            "lastTimestamp": moment.isoformat(),
        }

    events = [
        event("queue q is Closed, not Open", 0),  # long ago: no longer the reason
        event("queue resource quota insufficient: insufficient nvidia.com/gpu", 60),
        event("resource in cluster is overused: overused nvidia.com/gpu", 61),
        event("4/4 tasks in gang unschedulable: pod group is not ready, 4 minAvailable", 62),
        event("queue resource quota insufficient: other", 62, name="another"),
        event("queue resource quota insufficient: pod", 62, kind="Pod"),
    ]
    assert enqueue_failure(events, "pg") == (
        "queue resource quota insufficient: insufficient nvidia.com/gpu; "
        "resource in cluster is overused: overused nvidia.com/gpu"
    )
    assert enqueue_failure(events, None) is None
    assert enqueue_failure([], "pg") is None


def test_metadata_reader_resolves_hashed_ids_and_reads_progress(scenario: Scenario) -> None:
    clear_cache()
    reader = MetadataReader()
    train = LabelIdentity.from_labels(identity_labels(scenario.dag_id, "train", scenario.run_id, -1, 1))
    ghost_run = LabelIdentity.from_labels(identity_labels(scenario.dag_id, "train", RUN_ID, -1, 1))
    ghost_dag = LabelIdentity.from_labels(identity_labels("no_such_dag", "train", RUN_ID, -1, 1))
    assert train is not None
    assert ghost_run is not None
    assert ghost_dag is not None

    resolved, problem = reader.resolve([train, ghost_run, ghost_dag])
    assert problem is None
    assert resolved[train] == TaskIdentity(scenario.dag_id, "train", scenario.run_id, -1, 1, True, True)
    assert (resolved[ghost_run].resolved, resolved[ghost_run].dag_resolved) == (False, True)
    assert (resolved[ghost_dag].resolved, resolved[ghost_dag].dag_resolved) == (False, False)

    assert reader.progress(resolved[train])["value"]["phase"] in ADMITTED_PHASES
    missing = reader.progress(resolved[ghost_run])
    assert missing["value"] is None
    assert "not found in the Airflow metadata DB" in missing["reason"]
    assert reader.task_instance(resolved[train]) == {"state": "success", "try_number": 1}
    assert reader.task_instance(resolved[ghost_run]) is None

    again, _ = reader.resolve([train])  # from the process-wide cache
    assert again[train] == resolved[train]


@pytest.mark.parametrize("key", ["waiting[0]", "capped"])
def test_progress_absent_when_the_task_reported_none(scenario: Scenario, key: str) -> None:
    task_id, _, index = key.partition("[")
    map_index = int(index.rstrip("]")) if index else -1
    labels = LabelIdentity.from_labels(
        identity_labels(scenario.dag_id, task_id, scenario.run_id, map_index, 1)
    )
    assert labels is not None
    reader = MetadataReader()
    resolved, _ = reader.resolve([labels])
    assert resolved[labels].resolved
    assert reader.progress(resolved[labels])["reason"].startswith("no progress entry")
