"""The components' environment, without starting anything."""

from __future__ import annotations

import json
from pathlib import Path

from gang_stack.settings import STACK_ID_VARIABLE, StackSettings, kubernetes_connection, load_secrets


def settings(tmp_path: Path, **overrides: object) -> StackSettings:
    options: dict[str, object] = {"home": tmp_path, "dags_folder": tmp_path / "dags", "port": 18080}
    options.update(overrides)
    return StackSettings(**options)  # type: ignore[arg-type]


def test_the_stack_decides_not_the_callers_environment(tmp_path: Path) -> None:
    inherited = {
        "PATH": "/usr/bin",
        "KUBECONFIG": "/home/me/.kube/config",
        "AIRFLOW_HOME": "/home/me/airflow",
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "True",
        "AIRFLOW_CONN_OTHER": "http://kept",
        "LANG": "C.UTF-8",
    }
    env = settings(tmp_path, stack_id="abc").environment(inherited)
    assert "KUBECONFIG" not in env
    assert env["AIRFLOW_HOME"] == str(tmp_path)
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert env["AIRFLOW_CONN_OTHER"] == "http://kept"
    assert env["LANG"] == "C.UTF-8"
    assert env["PATH"].endswith("/usr/bin")
    assert env[STACK_ID_VARIABLE] == "abc"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{tmp_path / 'airflow.db'}"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18080/execution/"
    assert env["AIRFLOW__API__BASE_URL"] == "http://127.0.0.1:18080"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"
    passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
    assert json.loads(passwords.read_text()) == {"admin": "admin"}


def test_extra_env_wins_and_postgres_is_passed_through(tmp_path: Path) -> None:
    url = "postgresql+psycopg2://airflow@127.0.0.1:5432/airflow"
    env = settings(
        tmp_path,
        sql_alchemy_conn=url,
        extra_env={"AIRFLOW__CORE__PARALLELISM": "3", "AIRFLOW__GANG__RESUME_HOLD_SECONDS": "12"},
    ).environment({})
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == url
    assert env["AIRFLOW__CORE__PARALLELISM"] == "3"
    assert env["AIRFLOW__GANG__RESUME_HOLD_SECONDS"] == "12"


def test_secrets_are_made_once_per_home_and_kept(tmp_path: Path) -> None:
    first = load_secrets(tmp_path)
    assert set(first) == {"jwt_secret", "secret_key", "fernet_key"}
    assert len(first["jwt_secret"]) >= 64
    assert load_secrets(tmp_path) == first
    assert (tmp_path / "stack-secrets.json").stat().st_mode & 0o077 == 0


def test_kubernetes_connection_points_at_the_kubeconfig(tmp_path: Path) -> None:
    value = json.loads(kubernetes_connection(tmp_path / "sim.kubeconfig"))
    assert value == {
        "conn_type": "kubernetes",
        "extra": {"kube_config_path": str(tmp_path / "sim.kubeconfig")},
    }
