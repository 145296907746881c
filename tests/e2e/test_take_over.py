"""What a try finds of earlier tries, and what it does with it (``airflow_gang.operators.submission``).

An upstream task plays the crashed earlier try: with the provider's own hook it leaves behind
what a worker that died at a given moment would leave (a PodGroup alone, a job whose PodGroup
has no owner yet, a job that Succeeded or Failed with nobody to see it), labelled as try 1 of
the ``train`` task of the same DAG run. Then ``train`` runs, as a retry would.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.model.naming import DAG_ID_LABEL
from gang_sim.cluster import SimCluster
from tests.support.cluster import PODGROUPS, PYTORCHJOBS, delete_job, jobs_of
from tests.support.dag_runs import task_states

pytestmark = pytest.mark.usefixtures("kube_connection")
MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])

TAKE_OVER_DAG = """
import datetime as dt
import json
import time

from airflow.sdk import DAG, task
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.naming import identity_labels
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.spec import GangJobSpec

SCENARIO = __SCENARIO__
EARLIER = "earlier-" + "__DAG_ID__"[-10:]
EARLIER_SECONDS = {"unowned_podgroup": "3", "cleared_meanwhile": "60"}.get(SCENARIO, "1")


def job(seconds):
    return dict(
        image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1}, restart_policy="Never",
        pod_template={"metadata": {"annotations": {
            "sim.airflow-gang.io/duration": seconds,
            "sim.airflow-gang.io/log": "accuracy=0.91",
            "sim.airflow-gang.io/exit-code": "1" if SCENARIO == "failed" else "0",
        }}},
    )


with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def earlier_try(**context):
        hook = GangJobHook()
        labels = identity_labels("__DAG_ID__", "train", context["run_id"], -1, 1)
        spec = GangJobSpec(**job(EARLIER_SECONDS))
        hook.create_podgroup(spec.build_podgroup(EARLIER, "default", labels=labels), "default")
        if SCENARIO == "orphan_podgroup":
            return  # the worker died between the PodGroup and the PyTorchJob
        created = hook.create_pytorchjob(spec.build_pytorchjob(EARLIER, "default", labels=labels), "default")
        if SCENARIO in ("succeeded", "failed"):  # it died while the job ran to its end
            hook.set_podgroup_owner(EARLIER, "default", created)
            wanted = "Succeeded" if SCENARIO == "succeeded" else "Failed"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                status = hook.get_pytorchjob(EARLIER, "default").get("status") or {}
                if any(c["type"] == wanted and c["status"] == "True" for c in status.get("conditions") or []):
                    return
                time.sleep(0.2)
            raise RuntimeError(f"the earlier job never reached {wanted}")

    train = PyTorchJobOperator(
        task_id="train", deferrable=__DEFERRABLE__, poll_interval=0.2, delete_on_finish="never", **job("1"),
    )

    @task
    def record(result):
        with open(__OUT__, "w") as out:
            json.dump(result, out)

    earlier_try() >> train
    record(train.output)
"""


def run(
    write_dag: Callable[..., Any], api: k8s.ApiClient, tmp_path: Path, scenario: str, deferrable: bool
) -> tuple[Any, Any, str]:
    out = tmp_path / "result.json"
    dag = write_dag(TAKE_OVER_DAG, scenario=scenario, deferrable=deferrable, out=str(out))
    dag_run = dag.test()
    return dag, dag_run, json.loads(out.read_text()) if out.exists() else None


def podgroups_of(api: k8s.ApiClient, dag_id: str) -> dict[str, dict[str, Any]]:
    items = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
        *PODGROUPS, label_selector=f"{DAG_ID_LABEL}={dag_id}"
    )["items"]
    return {item["metadata"]["name"]: item for item in items}


def cleanup(api: k8s.ApiClient, dag_id: str) -> None:
    """delete_on_finish="never" kept the jobs for the test to inspect; remove all the DAG left."""
    for name in {job["metadata"]["name"] for job in jobs_of(api, dag_id)} | set(podgroups_of(api, dag_id)):
        delete_job(api, name)


@MODES
def test_a_podgroup_no_job_owns_is_deleted_before_submitting(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    dag, dag_run, result = run(write_dag, api, tmp_path, "orphan_podgroup", deferrable)
    try:
        assert task_states(dag_run) == {"earlier_try": "success", "train": "success", "record": "success"}
        earlier = f"earlier-{dag.dag_id[-10:]}"
        assert set(podgroups_of(api, dag.dag_id)) == {result["name"]}, "the orphan PodGroup is still there"
        assert result["name"] != earlier
        assert f"deleting PodGroup default/{earlier} of try 1: no job owns it" in capfd.readouterr().out
    finally:
        cleanup(api, dag.dag_id)


@MODES
def test_an_adopted_job_gets_the_podgroup_owner_a_crash_left_out(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    dag, dag_run, result = run(write_dag, api, tmp_path, "unowned_podgroup", deferrable)
    try:
        assert task_states(dag_run) == {"earlier_try": "success", "train": "success", "record": "success"}
        earlier = f"earlier-{dag.dag_id[-10:]}"
        assert result["name"] == earlier
        assert result["state"] == "succeeded"
        (job,) = jobs_of(api, dag.dag_id)
        owners = podgroups_of(api, dag.dag_id)[earlier]["metadata"].get("ownerReferences") or []
        assert [(owner["kind"], owner["uid"]) for owner in owners] == [("PyTorchJob", job["metadata"]["uid"])]
        output = capfd.readouterr().out
        assert f"reattaching to live PyTorchJob default/{earlier} from try 1" in output
        assert f"PodGroup default/{earlier} had no owner: the adopted job is now its controller" in output
    finally:
        cleanup(api, dag.dag_id)


@MODES
def test_a_succeeded_job_of_an_earlier_try_is_adopted_not_trained_again(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    dag, dag_run, result = run(write_dag, api, tmp_path, "succeeded", deferrable)
    try:
        assert task_states(dag_run) == {"earlier_try": "success", "train": "success", "record": "success"}
        earlier = f"earlier-{dag.dag_id[-10:]}"
        (job,) = jobs_of(api, dag.dag_id)  # nothing was submitted
        assert result["uid"] == job["metadata"]["uid"]
        assert result["name"] == earlier
        assert result["state"] == "succeeded"
        assert result["metrics"] == {"accuracy": 0.91}
        assert result["admitted_at"]
        assert result["finished_at"]
        assert f"adopted finished job default/{earlier} from try 1" in capfd.readouterr().out
    finally:
        cleanup(api, dag.dag_id)


@MODES
def test_a_failed_job_of_an_earlier_try_is_not_adopted(
    write_dag: Callable[..., Any], api: k8s.ApiClient, tmp_path: Path, deferrable: bool
) -> None:
    dag, dag_run, _ = run(write_dag, api, tmp_path, "failed", deferrable)
    try:
        # The new job fails too (same exit code 1): what matters is that it is a new job.
        assert task_states(dag_run)["train"] == "failed"
        names = sorted(job["metadata"]["name"] for job in jobs_of(api, dag.dag_id))
        assert len(names) == 2
        assert f"earlier-{dag.dag_id[-10:]}" in names
    finally:
        cleanup(api, dag.dag_id)


@MODES
def test_a_reattached_job_deleted_by_its_cleared_try_is_replaced_by_a_new_one(
    write_dag: Callable[..., Any],
    cluster: SimCluster,
    api: k8s.ApiClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    """The race a person's clear starts: the new try reattaches to the earlier try's live job, then
    the earlier try's ``on_kill`` deletes it. The clear means "train again": a new job, not a
    `GangJobLost`. The deletion is timed on the reattach itself (it gives the PodGroup its owner)."""
    out = tmp_path / "result.json"
    dag = write_dag(TAKE_OVER_DAG, scenario="cleared_meanwhile", deferrable=deferrable, out=str(out))
    earlier = f"earlier-{dag.dag_id[-10:]}"

    def delete_once_reattached() -> None:
        with cluster.api_client() as client:
            custom = k8s.CustomObjectsApi(client)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                try:
                    owners = custom.get_namespaced_custom_object(*PODGROUPS, earlier)["metadata"].get(
                        "ownerReferences"
                    )
                except k8s.ApiException:
                    owners = None
                if owners:
                    custom.delete_namespaced_custom_object(
                        *PYTORCHJOBS, earlier, body={"propagationPolicy": "Foreground"}
                    )
                    return
                time.sleep(0.1)

    deleter = threading.Thread(target=delete_once_reattached, daemon=True)
    deleter.start()
    try:
        dag_run = dag.test()
        deleter.join(10)
        assert task_states(dag_run) == {"earlier_try": "success", "train": "success", "record": "success"}
        result = json.loads(out.read_text())
        assert result["name"] != earlier
        assert result["state"] == "succeeded"
        output = capfd.readouterr().out
        assert f"reattaching to live PyTorchJob default/{earlier} from try 1" in output
        assert f"PyTorchJob default/{earlier} of an earlier try was deleted" in output
    finally:
        cleanup(api, dag.dag_id)
