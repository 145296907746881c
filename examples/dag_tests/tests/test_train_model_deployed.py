"""dags/train_model.py under a real Airflow: api-server, scheduler, dag-processor and triggerer
as processes of their own (airflow-gang-stack's `AirflowStack`), so the deferred wait runs in
the triggerer, as in production. Starting Airflow takes about 20 s, so these tests run only
with ``pytest --deployed`` (conftest.py adds the option)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gang_sim import SimCluster
from gang_stack import AirflowStack

DAGS = Path(__file__).resolve().parents[1] / "dags"


@pytest.fixture(scope="module")
def airflow(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AirflowStack]:
    """The embedded cluster, and Airflow with ``kubernetes_default`` pointing at it."""
    if not request.config.getoption("--deployed"):
        pytest.skip("starts a real Airflow: run with --deployed")
    with SimCluster(nodes=1, gpus_per_node=4, queues={"research": None}, schedule_period=0.2) as cluster:
        home = tmp_path_factory.mktemp("airflow-home")
        with AirflowStack(DAGS, home=home, kubeconfig=cluster.kubeconfig_path) as stack:
            yield stack


def test_the_training_runs_under_a_real_scheduler_and_triggerer(airflow: AirflowStack) -> None:
    api = airflow.client
    api.wait_for_dag("train_model")  # parsed by the dag-processor, then unpaused
    run_id = api.trigger("train_model")
    assert api.wait_for_run("train_model", run_id, timeout=300) == "success"
    train = api.task_instance("train_model", run_id, "train")
    assert (train["state"], train["try_number"]) == ("success", 1)
    assert "gang admitted" in api.task_log("train_model", run_id, "train", 1)
