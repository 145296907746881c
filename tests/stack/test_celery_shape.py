"""The CeleryExecutor shape of the stack: its broker (`gang_stack.redis_broker`), its component
names and settings, and the refusals before anything starts. The shape itself runs Airflow in
tests/production."""

from __future__ import annotations

import socket
from pathlib import Path

import psutil
import pytest

from gang_stack import AirflowStack, StackError
from gang_stack.celery_workers import node_name, worker_command
from gang_stack.redis_broker import RedisBroker, ping
from gang_stack.settings import StackSettings
from gang_stack.stack import component_names, kind_of


def test_the_broker_answers_celery_and_stops_without_a_trace() -> None:
    broker = RedisBroker()
    url = broker.start()
    folder = broker.folder
    assert folder is not None
    try:
        assert url == f"redis://127.0.0.1:{broker.port}/0"
        assert ping("127.0.0.1", broker.port)
        from kombu import Connection

        with Connection(url) as connection:  # Celery's own transport, as the workers use it
            queue = connection.SimpleQueue("airflow-gang-probe")
            queue.put({"hello": "gang"})
            assert queue.get(timeout=5).payload == {"hello": "gang"}
            queue.close()
    finally:
        broker.stop()
    assert not folder.exists()
    assert not ping("127.0.0.1", broker.port)
    assert not [
        p for p in psutil.process_iter(["cmdline"]) if f":{broker.port}" in " ".join(p.info["cmdline"] or [])
    ]
    broker.stop()  # idempotent


def test_a_missing_redis_server_is_named_with_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GANG_REDIS_SERVER", "/nonexistent/redis-server")
    with pytest.raises(StackError, match="make services"):
        RedisBroker().start()


def test_celery_workers_are_components_with_names_and_log_ports_of_their_own() -> None:
    assert component_names(2, 2, celery_workers=2) == (
        "api-server", "scheduler", "scheduler-2", "dag-processor", "triggerer", "triggerer-2",
        "celery-worker", "celery-worker-2",
    )  # fmt: skip
    assert "celery-worker" not in component_names()
    assert kind_of("celery-worker-2") == "celery-worker"
    assert kind_of("celery-worker") == "celery-worker"
    command = worker_command("airflow", "celery-worker-2", 3)
    assert command[:3] == ["airflow", "celery", "worker"]
    assert command[command.index("--celery-hostname") + 1] == f"celery-worker-2@{socket.gethostname()}"
    assert command[command.index("--concurrency") + 1] == "3"
    assert node_name("celery-worker") != node_name("celery-worker-2")


def test_a_broker_url_makes_the_celery_executor(tmp_path: Path) -> None:
    base = {"home": tmp_path, "dags_folder": tmp_path, "port": 8080}
    local = StackSettings(**base).environment({})
    assert local["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert "AIRFLOW__CELERY__BROKER_URL" not in local
    celery = StackSettings(**base, broker_url="redis://127.0.0.1:1/0", worker_concurrency=2).environment({})
    assert celery["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert celery["AIRFLOW__CELERY__BROKER_URL"] == "redis://127.0.0.1:1/0"
    assert celery["AIRFLOW__CELERY__WORKER_CONCURRENCY"] == "2"


def test_celery_on_sqlite_or_without_workers_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="CeleryExecutor needs a database other than SQLite"):
        AirflowStack(tmp_path, executor="celery")
    with pytest.raises(StackError, match="at least one celery worker"):
        AirflowStack(tmp_path, database="postgres", executor="celery", celery_workers=0)
