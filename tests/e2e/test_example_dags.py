"""The example DAGs of ``dags/``, run with ``dag.test()`` against the embedded cluster.

Airflow 3.3's ``dag.test()`` needs the DAG file inside ``[core] dags_folder``: each test copies
the repository's file there, keeping its name, so the DAG ids are the ones users see.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_gang.plugins.offline_chart import embedded_data
from tests.gang_page import jobs_of_dag
from tests.support.dag_runs import task_states, xcom

pytestmark = pytest.mark.usefixtures("kube_connection")


def read_report(tmp_path: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The run's timeline.json, and per job the entry its timeline.html's chart draws."""
    (folder,) = (tmp_path / "airflow-gang").iterdir()
    chart = embedded_data((folder / "timeline.html").read_text(encoding="utf-8"))
    drawn = {entry["name"]: entry for queue in chart["timeline"]["queues"] for entry in queue["jobs"]}
    return json.loads((folder / "timeline.json").read_text()), drawn


def assert_drawn_as_recorded(jobs: list[dict[str, Any]], drawn: dict[str, dict[str, Any]]) -> None:
    """The chart draws every job of the report, with the moments timeline.json has."""
    assert sorted(drawn) == sorted(job["name"] for job in jobs)
    for job in jobs:
        entry = drawn[job["name"]]
        assert (entry["queued_at"], entry["admitted_at"]) == (job["queued_at"], job["admitted_at"])
        if job["state"] != "timed out":
            assert (entry["gang_state"], entry["finished_at"]) == (job["state"], job["finished_at"])


@pytest.mark.slow  # every run takes this DAG through `make demo` (tests/e2e/test_demo.py)
def test_gang_vs_deadlock_with_gang_scheduling_runs_all_six_one_after_another(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = example_dag("gang_vs_deadlock")
    dag_run = dag.test(
        run_conf={"gang_scheduling": "provider", "train_seconds": 1, "report_dir": str(tmp_path)}
    )
    states = task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert set(states.values()) == {"success"}
    assert len([task for task in states if task.startswith("train[")]) == 6
    jobs, drawn = read_report(tmp_path)
    assert [job["state"] for job in jobs] == ["succeeded"] * 6
    # One pool, one gang at a time: no two jobs ever ran at the same time ...
    spans = sorted((job["admitted_at"], job["finished_at"]) for job in jobs)
    for (_, first_end), (second_start, _) in itertools.pairwise(spans):
        assert first_end <= second_start
    # ... so all but the first waited in the queue, each longer than the one before.
    waits = sorted(job["queue_wait_seconds"] for job in jobs)
    assert waits[-1] > 4 * 1.0
    assert_drawn_as_recorded(jobs, drawn)  # each queued, then succeeded: two bars
    output = capfd.readouterr().out
    assert "queue wait" in output
    assert "timeline chart:" in output
    assert "timeline.html" in output


def test_gang_vs_deadlock_without_gang_scheduling_deadlocks_and_reports_it(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = example_dag("gang_vs_deadlock")
    dag_run = dag.test(
        run_conf={
            "gang_scheduling": "disabled",
            "train_seconds": 1,
            "admission_timeout": 15,
            "report_dir": str(tmp_path),
        }
    )
    states = task_states(dag_run)
    output = capfd.readouterr().out
    trains = {task: state for task, state in states.items() if task.startswith("train[")}
    # Four jobs each hold one GPU and wait for their workers: nobody can start. The admission
    # timeout deletes the stuck jobs; the last ones may get a whole gang from the GPUs freed.
    assert list(trains.values()).count("failed") >= 4, states
    assert "GangAdmissionTimeout" in output
    assert "was not admitted within 15s of its creation" in output
    jobs, drawn = read_report(tmp_path)
    timed_out = [job for job in jobs if job["state"] == "timed out"]
    assert len(timed_out) == list(trains.values()).count("failed")
    assert all(job["state"] == "succeeded" for job in jobs if job not in timed_out)
    # The report names the deadlock and fails the run; the cleanup teardown still ran.
    assert states["report"] == "failed"
    assert f"{len(timed_out)} of 6 jobs did not succeed with gang_scheduling=disabled" in output
    assert states["cleanup"] == "success"
    assert str(dag_run.state) == "failed"
    # The chart: one bar in the admission timeout's colour per victim, the others succeeded.
    assert_drawn_as_recorded(jobs, drawn)
    assert sorted(
        name for name, entry in drawn.items() if entry["gang_state"] == "admission_timeout"
    ) == sorted(job["name"] for job in timed_out)
    assert all(drawn[job["name"]]["admitted_at"] is None for job in timed_out)
    # The Gang jobs page after cleanup: every job that ran shows its master's last lines (the
    # sensors that saw them end kept them), and every timed-out one its cluster-timed wait.
    rows = jobs_of_dag("gang_vs_deadlock")
    assert len(rows) == 6
    for row in rows:
        assert not row["live"], row
        if row["state"] == "succeeded":
            assert "training complete" in row["detail"]["recorded"]["log_tail"], row["name"]
        else:
            assert row["state"] == "admission_timeout", row
            assert 15 <= row["queued_seconds"] < 60, row


# Every run takes this DAG's gang run on the real stack (tests/realstack/test_trainjobs.py).
@pytest.mark.slow
def test_gang_vs_deadlock_trainjob_with_gang_scheduling_runs_all_six_one_after_another(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The seed scenario with Kubeflow Trainer v2 TrainJobs: the torch-distributed runtime's
    podGroupPolicy makes one PodGroup per job, so the six 4-node jobs run one at a time."""
    dag = example_dag("gang_vs_deadlock_trainjob")
    dag_run = dag.test(run_conf={"train_seconds": 1, "report_dir": str(tmp_path)})
    states = task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert set(states.values()) == {"success"}
    assert len([task for task in states if task.startswith("train[")]) == 6
    jobs, drawn = read_report(tmp_path)
    assert [job["state"] for job in jobs] == ["succeeded"] * 6
    spans = sorted((job["admitted_at"], job["finished_at"]) for job in jobs)
    for (_, first_end), (second_start, _) in itertools.pairwise(spans):
        assert first_end <= second_start
    assert sorted(job["queue_wait_seconds"] for job in jobs)[-1] > 4 * 1.0
    assert_drawn_as_recorded(jobs, drawn)
    assert "kind=trainjob gang_scheduling=trainer" in capfd.readouterr().out


# Every run takes this scenario under a real scheduler and triggerer (tests/realstack/test_trainjobs.py).
@pytest.mark.slow
def test_gang_vs_deadlock_trainjob_without_gang_scheduling_deadlocks_and_says_why(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = example_dag("gang_vs_deadlock_trainjob")
    dag_run = dag.test(
        run_conf={
            "gang_scheduling": "disabled",
            "train_seconds": 1,
            "admission_timeout": 10,
            "report_dir": str(tmp_path),
        }
    )
    states = task_states(dag_run)
    output = capfd.readouterr().out
    trains = {task: state for task, state in states.items() if task.startswith("train[")}
    failed = list(trains.values()).count("failed")
    assert failed >= 4, states
    assert "GangAdmissionTimeout" in output
    assert "(no gang scheduling: not every replica was bound)" in output
    assert "is NOT gang-scheduled" in output  # the runtime without podGroupPolicy, named at submit
    jobs, drawn = read_report(tmp_path)
    assert len([job for job in jobs if job["state"] == "timed out"]) == failed
    assert [entry["gang_state"] for entry in drawn.values()].count("admission_timeout") == failed
    assert states["report"] == "failed"
    assert f"{failed} of 6 TrainJobs did not succeed with gang_scheduling=disabled" in output
    assert states["cleanup"] == "success"
    assert str(dag_run.state) == "failed"


# Every run takes mapped Volcano Job gangs under a real scheduler and triggerer
# (tests/realstack/test_vcjobs.py).
@pytest.mark.slow
def test_gang_vs_deadlock_vcjob_with_gang_scheduling_runs_all_six_one_after_another(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The seed scenario with Volcano's own Jobs: minAvailable = every pod, so Volcano's job
    controller makes each job one gang of four and the six run one at a time."""
    dag = example_dag("gang_vs_deadlock_vcjob")
    dag_run = dag.test(run_conf={"train_seconds": 1, "report_dir": str(tmp_path)})
    states = task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert set(states.values()) == {"success"}
    jobs, drawn = read_report(tmp_path)
    assert [job["state"] for job in jobs] == ["succeeded"] * 6
    spans = sorted((job["admitted_at"], job["finished_at"]) for job in jobs)
    for (_, first_end), (second_start, _) in itertools.pairwise(spans):
        assert first_end <= second_start
    assert_drawn_as_recorded(jobs, drawn)
    assert "kind=vcjob gang_scheduling=volcano" in capfd.readouterr().out


def test_gang_vs_deadlock_vcjob_without_gang_deadlocks_until_admission_timeouts_end_it(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """minAvailable 1: Volcano gives each job one pod, then the next job one (its allocate puts a
    ready job back behind the unready ones), so four jobs each hold a GPU and wait for their
    other pods at the rendezvous; the sensors' admission timeouts delete the stuck jobs."""
    dag = example_dag("gang_vs_deadlock_vcjob")
    dag_run = dag.test(
        run_conf={
            "gang_scheduling": "disabled",
            "train_seconds": 1,
            "admission_timeout": 10,
            "report_dir": str(tmp_path),
        }
    )
    states = task_states(dag_run)
    output = capfd.readouterr().out
    trains = {task: state for task, state in states.items() if task.startswith("train[")}
    failed = list(trains.values()).count("failed")
    assert failed >= 4, states
    assert "GangAdmissionTimeout" in output
    assert "(no gang scheduling: not every replica was bound)" in output
    jobs, drawn = read_report(tmp_path)
    assert len([job for job in jobs if job["state"] == "timed out"]) == failed
    assert [entry["gang_state"] for entry in drawn.values()].count("admission_timeout") == failed
    assert states["report"] == "failed"
    assert f"{failed} of 6 Volcano Jobs did not succeed with gang_scheduling=disabled" in output
    assert states["cleanup"] == "success"
    assert str(dag_run.state) == "failed"


def test_retrain_vcjob_trains_a_volcano_job_evaluates_and_promotes(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = example_dag("retrain_vcjob")
    assert dag.schedule == "@daily"
    train = dag.get_task("train")
    assert train.deferrable
    assert train.retry_policy is not None
    dag_run = dag.test(
        logical_date=dt.datetime(2026, 11, 29, tzinfo=dt.UTC), run_conf={"registry_dir": str(tmp_path)}
    )
    assert task_states(dag_run) == {
        "prepare_data": "success",
        "train": "success",
        "evaluate": "success",
        "good_enough": "success",
        "promote": "success",
    }
    result = xcom(dag_run, "train")
    assert result["state"] == "succeeded"
    assert result["replicas"] == {"master": 1, "worker": 1}
    assert result["podgroup"] == f"{result['name']}-{result['uid']}"  # Volcano's job controller's
    assert result["metrics"] == {"loss": 0.18, "accuracy": 0.957}
    latest = json.loads((tmp_path / "digits-vcjob" / "latest.json").read_text())
    assert latest["job"] == result["name"]
    assert latest["pods"] == 2
    assert "accuracy=0.9570 (bar 0.9000): promote" in capfd.readouterr().out


def test_retrain_daily_trains_evaluates_and_promotes(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = example_dag("retrain_daily")
    assert dag.schedule == "@daily"
    train = dag.get_task("train")
    assert train.deferrable
    assert train.retry_policy is not None
    dag_run = dag.test(
        logical_date=dt.datetime(2026, 11, 29, tzinfo=dt.UTC), run_conf={"registry_dir": str(tmp_path)}
    )
    assert task_states(dag_run) == {
        "prepare_data": "success",
        "train": "success",
        "evaluate": "success",
        "good_enough": "success",
        "promote": "success",
    }
    result = xcom(dag_run, "train")
    assert result["state"] == "succeeded"
    assert result["metrics"] == {"loss": 0.18, "accuracy": 0.953}
    assert xcom(dag_run, "prepare_data") == ["--epochs", "30", "--seed", str(20261129 % 10_000)]
    latest = json.loads((tmp_path / "digits" / "latest.json").read_text())
    assert latest["job"] == result["name"]
    assert latest["accuracy"] == 0.953
    assert latest["version"] == "2026-11-29"
    assert (tmp_path / "digits" / "2026-11-29.json").exists()
    assert "accuracy=0.9530 (bar 0.9000): promote" in capfd.readouterr().out


def test_retrain_daily_keeps_the_old_model_below_the_bar(
    example_dag: Callable[[str], Any], tmp_path: Path
) -> None:
    dag = example_dag("retrain_daily")
    dag_run = dag.test(run_conf={"registry_dir": str(tmp_path), "min_accuracy": 0.99})
    states = task_states(dag_run)
    assert states["evaluate"] == "success"
    assert states["promote"] == "skipped"
    assert not (tmp_path / "digits").exists()


def test_retrain_trainjob_trains_a_gang_of_trainjob_nodes_evaluates_and_promotes(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = example_dag("retrain_trainjob")
    assert dag.schedule == "@daily"
    train = dag.get_task("train")
    assert train.deferrable
    assert train.retry_policy is not None
    assert train.retries == 3
    dag_run = dag.test(
        logical_date=dt.datetime(2026, 11, 29, tzinfo=dt.UTC), run_conf={"registry_dir": str(tmp_path)}
    )
    assert task_states(dag_run) == {
        "prepare_data": "success",
        "train": "success",
        "evaluate": "success",
        "good_enough": "success",
        "promote": "success",
    }
    result = xcom(dag_run, "train")
    assert result["state"] == "succeeded"
    assert result["replicas"] == {"Node": 2}
    assert result["queue"] == "default"
    assert result["podgroup"] == result["name"]  # Trainer's Volcano plugin made the gang
    assert result["metrics"] == {"loss": 0.16, "accuracy": 0.961}
    latest = json.loads((tmp_path / "digits-trainjob" / "latest.json").read_text())
    assert latest["job"] == result["name"]
    assert latest["nodes"] == 2
    assert latest["version"] == "2026-11-29"
    assert "accuracy=0.9610 (bar 0.9000): promote" in capfd.readouterr().out


def test_retrain_trainjob_takes_its_queue_from_a_variable_and_keeps_the_old_model_below_the_bar(
    example_dag: Callable[[str], Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dag = example_dag("retrain_trainjob")
    monkeypatch.setenv("AIRFLOW_VAR_GANG_QUEUE", "research")
    dag_run = dag.test(run_conf={"registry_dir": str(tmp_path), "min_accuracy": 0.99})
    states = task_states(dag_run)
    assert states["evaluate"] == "success"
    assert states["promote"] == "skipped"
    assert xcom(dag_run, "train")["queue"] == "research"
    assert not (tmp_path / "digits-trainjob").exists()


def test_param_sweep_maps_eight_jobs_and_picks_the_best(
    example_dag: Callable[[str], Any], capfd: pytest.CaptureFixture[str]
) -> None:
    dag = example_dag("param_sweep")
    dag_run = dag.test()
    states = task_states(dag_run)
    assert [task for task in states if task.startswith("train[")] == [f"train[{i}]" for i in range(8)]
    assert set(states.values()) == {"success"}, states
    runs = xcom(dag_run, "combinations")
    results = [xcom(dag_run, "train", index) for index in range(8)]
    # Each run's metrics came from its own master's log, so they differ run by run.
    accuracies = [result["metrics"]["accuracy"] for result in results]
    assert len(set(accuracies)) == 8
    winner = accuracies.index(max(accuracies))
    best = xcom(dag_run, "pick_best")
    assert best["runs"] == 8
    assert best["args"] == runs[winner]["args"]
    assert best["args"][:4] == ["--lr", "0.1", "--batch-size", "16"]
    assert best["accuracy"] == accuracies[winner]
    # Each run's job page keeps its master's last lines after delete_on_finish deleted it.
    rows = jobs_of_dag("param_sweep")
    assert {row["state"] for row in rows} == {"succeeded"}
    assert len(rows) == 8
    assert all("accuracy=" in row["detail"]["recorded"]["log_tail"] for row in rows)
    assert best["job"] == results[winner]["name"]
    assert " 1. accuracy=0.9700  --lr 0.1 --batch-size 16" in capfd.readouterr().out
    # The grid view names each mapped run by its hyperparameters.
    labels = {
        ti.map_index: ti.rendered_map_index for ti in dag_run.get_task_instances() if ti.task_id == "train"
    }
    assert labels[0] == "lr=0.01 batch=16"
    assert labels[7] == "lr=0.3 batch=64"


def test_settings_come_from_params_then_variables_then_defaults(
    example_dag: Callable[[str], Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dag = example_dag("retrain_daily")
    conf = {"registry_dir": str(tmp_path)}
    assert xcom(dag.test(run_conf=conf), "train")["queue"] == "default"
    monkeypatch.setenv("AIRFLOW_VAR_GANG_QUEUE", "research")
    assert xcom(dag.test(run_conf=conf), "train")["queue"] == "research"
    assert xcom(dag.test(run_conf={**conf, "queue": "default"}), "train")["queue"] == "default"
