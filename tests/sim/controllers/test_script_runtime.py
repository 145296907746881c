"""The kubelet's pure parts: script plans, rendezvous counting, process environment, attempts."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from gang_sim.controllers.kubelet import rendezvous
from gang_sim.controllers.kubelet.pod import earlier_starts, started_event_name
from gang_sim.controllers.kubelet.process_runtime import (
    PORT_HIGH,
    PORT_LOW,
    container_argv,
    container_env,
    expand,
    job_uid,
    master_port,
)
from gang_sim.controllers.kubelet.script_runtime import ScriptError, merged_annotations, plan_script

Json = dict[str, Any]
P = "sim.airflow-gang.io/"


def test_defaults_are_one_second_exit_zero_and_training_like_lines() -> None:
    plan = plan_script({}, attempt=0, pod_name="job-master-0", rank="0")

    assert (plan.duration, plan.exit_code) == (1.0, 0)
    assert plan.lines[0] == "starting training rank=0"
    assert plan.lines[1].startswith("epoch 1/1 loss=")
    assert plan.line_offsets() == [0.0, 1 / 3, 2 / 3]


@pytest.mark.parametrize(
    ("attempt", "exit_code"),
    [(0, 7), (1, 7), (2, 0), (5, 0)],
    ids=["first-fails", "second-fails", "third-succeeds", "later-succeed"],
)
def test_fail_attempts_fail_the_first_runs_with_the_exit_code(attempt: int, exit_code: int) -> None:
    annotations = {P + "fail-attempts": "2", P + "exit-code": "7"}

    assert plan_script(annotations, attempt=attempt, pod_name="p").exit_code == exit_code


def test_fail_attempts_without_exit_code_fail_with_one() -> None:
    assert plan_script({P + "fail-attempts": "1"}, attempt=0, pod_name="p").exit_code == 1


def test_log_annotation_is_the_output_line_by_line() -> None:
    plan = plan_script({P + "log": "a\nb", P + "duration": "2"}, attempt=0, pod_name="p")

    assert plan.lines == ("a", "b")
    assert plan.line_offsets() == [0.0, 1.0]


@pytest.mark.parametrize(
    ("key", "value"),
    [("duration", "1s"), ("duration", "-1"), ("duration", "nan"), ("exit-code", "1.5"), ("exit-code", "300")],
)
def test_malformed_annotations_are_errors_naming_the_annotation(key: str, value: str) -> None:
    with pytest.raises(ScriptError, match=f"{P}{key}"):
        plan_script({P + key: value}, attempt=0, pod_name="p")


def test_pod_annotations_override_the_jobs_and_others_are_ignored() -> None:
    merged = merged_annotations(
        {P + "duration": "3", "other": "x"}, {P + "duration": "9", P + "exit-code": "2"}
    )

    assert merged == {P + "duration": "3", P + "exit-code": "2"}


def pod(name: str, phase: str = "Pending", job: str | None = "j", deleting: bool = False) -> Json:
    meta: Json = {"name": name, "namespace": "ns"}
    if job:
        meta["labels"] = {rendezvous.JOB_NAME_LABEL: job}
        meta["ownerReferences"] = [{"kind": "PyTorchJob", "name": job, "uid": "job-uid"}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


JOB = {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}}


def test_rendezvous_counts_started_replicas_against_the_jobs_total() -> None:
    pods = [pod("m", "Running"), pod("w0", "Succeeded"), pod("w1", "Pending")]

    assert rendezvous.progress(pods[0], JOB, pods) == (2, 4)
    assert not rendezvous.ready(pods[0], JOB, pods)


def test_rendezvous_ignores_replicas_being_deleted() -> None:
    pods = [pod("m", "Running"), pod("w", "Running", deleting=True)]

    assert rendezvous.progress(
        pods[0], {"spec": {"pytorchReplicaSpecs": {"Master": {}, "Worker": {}}}}, pods
    ) == (1, 2)


def test_a_pod_without_a_job_is_its_own_rendezvous() -> None:
    assert rendezvous.ready(pod("solo", job=None), None, [])


def test_an_owned_pod_waits_while_its_job_is_not_in_the_cache() -> None:
    assert rendezvous.progress(pod("m", "Running"), None, [pod("m", "Running")]) is None


def test_master_port_is_a_deterministic_function_of_the_job() -> None:
    ports = {master_port(f"uid-{i}") for i in range(200)}

    assert master_port("uid-1") == master_port("uid-1")
    assert all(PORT_LOW <= port < PORT_HIGH for port in ports)
    assert len(ports) > 190  # spread, not clustered


def test_process_env_is_localised_and_references_expand() -> None:
    owner = {"kind": "PyTorchJob", "uid": "job-uid"}
    the_pod = {"metadata": {"name": "j-worker-0", "namespace": "ns", "ownerReferences": [owner]}, "spec": {}}
    container = {
        "command": ["python", "train.py"],
        "args": ["--rank=$(RANK)", "$$(RANK)", "$(UNKNOWN)"],
        "env": [
            {"name": "MASTER_ADDR", "value": "j-master-0"},
            {"name": "PET_MASTER_ADDR", "value": "j-master-0"},
            {"name": "MASTER_PORT", "value": "23456"},
            {"name": "RANK", "value": "1"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
    }

    env = container_env(the_pod, container, 21000)

    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "127.0.0.1"
    assert (env["MASTER_PORT"], env["RANK"], env["POD"], env["PYTHONUNBUFFERED"]) == (
        "21000",
        "1",
        "j-worker-0",
        "1",
    )
    assert "PATH" in env
    assert container_argv(container, env) == ["python", "train.py", "--rank=1", "$(RANK)", "$(UNKNOWN)"]
    assert job_uid(the_pod) == "job-uid"
    assert expand("$(A)-$(B)", {"A": "x"}) == "x-$(B)"


def started(name: str, first: str, reason: str = "Started", component: str = "kubelet") -> Json:
    return {
        "metadata": {"name": name},
        "reason": reason,
        "source": {"component": component},
        "firstTimestamp": first,
    }


def test_earlier_starts_count_other_kubelet_starts_since_the_job_began() -> None:
    since = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    own = started_event_name("p", "uid-3", 0)
    events = [
        started("p.a", "2026-01-01T12:00:01Z"),
        started("p.b", "2026-01-01T12:00:02Z"),
        started("p.old", "2026-01-01T11:00:00Z"),  # an earlier job of the same name
        started("p.c", "2026-01-01T12:00:03Z", reason="Killing"),
        started("p.d", "2026-01-01T12:00:03Z", component="default-scheduler"),
        started(own, "2026-01-01T12:00:04Z"),
    ]

    assert earlier_starts(events, own, since) == 2
    assert started_event_name("p", "uid-3", 0) != started_event_name("p", "uid-3", 1)
