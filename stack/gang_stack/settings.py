"""The environment every component of an `AirflowStack` runs with.

Everything is configured by ``AIRFLOW__SECTION__KEY`` variables, so the same settings reach the
scheduler, the dag-processor, the triggerer, the api-server, ``airflow db migrate`` and the task
processes they start. Inherited ``AIRFLOW__*`` settings, ``AIRFLOW_HOME``, ``AIRFLOW_CONFIG`` and
``KUBECONFIG`` are dropped: the stack decides, not the caller's shell or test session.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
SECRETS_FILE = "stack-secrets.json"
PASSWORDS_FILE = "simple_auth_manager_passwords.json"
LOG_DIR = "stack-logs"
# In the environment of every process of one stack, for people looking at processes (Airflow's
# process titles overwrite /proc/PID/environ of some); the stack finds its processes by session.
STACK_ID_VARIABLE = "AIRFLOW_GANG_STACK_ID"
_DROPPED = ("AIRFLOW_HOME", "AIRFLOW_CONFIG", "KUBECONFIG")


def airflow_executable() -> Path:
    """The ``airflow`` script next to this interpreter (the same installation)."""
    return Path(sys.executable).parent / "airflow"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def kubernetes_connection(kubeconfig: str | Path) -> str:
    """The ``AIRFLOW_CONN_KUBERNETES_DEFAULT`` value for a kubeconfig file."""
    path = str(Path(kubeconfig).resolve())
    return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": path}})


def load_secrets(home: Path) -> dict[str, str]:
    """JWT secret, API secret key and Fernet key of this home: created once, then reused.

    Keeping them makes a persistent home survive restarts (browser sessions stay valid,
    connections stored encrypted in the DB stay readable).
    """
    path = home / SECRETS_FILE
    stored: dict[str, str] = {}
    if path.is_file():
        loaded = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            stored = {str(key): str(value) for key, value in loaded.items()}
    fresh = {
        "jwt_secret": secrets.token_urlsafe(64),  # HS512 wants 64 bytes or more
        "secret_key": secrets.token_urlsafe(64),
        "fernet_key": base64.urlsafe_b64encode(os.urandom(32)).decode(),
    }
    missing = {key: value for key, value in fresh.items() if not stored.get(key)}
    if missing:
        stored.update(missing)
        path.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
        path.chmod(0o600)
    return stored


def write_passwords(home: Path, username: str, password: str) -> Path:
    """The simple auth manager's passwords file, holding exactly our user's password."""
    path = home / PASSWORDS_FILE
    path.write_text(json.dumps({username: password}) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


@dataclass
class StackSettings:
    """What the caller chose; `environment()` turns it into the components' variables."""

    home: Path
    dags_folder: Path
    port: int
    host: str = "127.0.0.1"
    sql_alchemy_conn: str | None = None
    username: str = "admin"
    password: str = "admin"
    parallelism: int = 8
    dag_refresh_seconds: int = 2
    # CeleryExecutor when a broker URL is given (results in the metadata database, Airflow's
    # default: ``db+`` and sql_alchemy_conn), else LocalExecutor.
    broker_url: str | None = None
    worker_concurrency: int = 4
    # The scheduler's and the triggerer's log servers (on every interface: Airflow has no
    # host setting for them); private ports, so two stacks on one machine never read each
    # other's logs or fight over Airflow's defaults 8793 and 8794.
    worker_log_port: int = 0
    trigger_log_port: int = 0
    stack_id: str = ""
    extra_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def database(self) -> str:
        return self.sql_alchemy_conn or f"sqlite:///{self.home / 'airflow.db'}"

    def airflow_config(self, passwords: Path, keys: Mapping[str, str]) -> dict[str, str]:
        """Every setting of the stack as ``AIRFLOW__SECTION__KEY`` -> value."""
        refresh = str(self.dag_refresh_seconds)
        config = {
            ("core", "dags_folder"): str(self.dags_folder),
            ("core", "load_examples"): "False",
            ("core", "executor"): "CeleryExecutor" if self.broker_url else "LocalExecutor",
            ("core", "parallelism"): str(self.parallelism),
            ("core", "auth_manager"): SIMPLE_AUTH_MANAGER,
            ("core", "simple_auth_manager_users"): f"{self.username}:admin",
            ("core", "simple_auth_manager_all_admins"): "False",
            ("core", "simple_auth_manager_passwords_file"): str(passwords),
            ("core", "execution_api_server_url"): f"{self.url}/execution/",
            ("core", "fernet_key"): keys["fernet_key"],
            ("database", "sql_alchemy_conn"): self.database,
            ("api", "base_url"): self.url,
            ("api", "host"): self.host,
            ("api", "port"): str(self.port),
            ("api", "workers"): "1",
            ("api", "secret_key"): keys["secret_key"],
            ("api_auth", "jwt_secret"): keys["jwt_secret"],
            ("logging", "base_log_folder"): str(self.home / "logs"),
            # A new DAG file is seen within seconds, not minutes; a changed one is re-parsed at
            # the same time (newer mtime), the others only every min_file_process_interval (30 s).
            ("dag_processor", "refresh_interval"): refresh,
            ("dag_processor", "bundle_refresh_check_interval"): "1",
            ("dag_processor", "print_stats_interval"): "0",
        }
        if self.broker_url:
            config["celery", "broker_url"] = self.broker_url
            config["celery", "worker_concurrency"] = str(self.worker_concurrency)
        for key, port in (
            ("worker_log_server_port", self.worker_log_port),
            ("trigger_log_server_port", self.trigger_log_port),
        ):
            if port:
                config["logging", key] = str(port)
        return {f"AIRFLOW__{section.upper()}__{key.upper()}": val for (section, key), val in config.items()}

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default ``os.environ``) without Airflow settings, then ours, then ``extra_env``."""
        inherited = dict(os.environ if base is None else base)
        env = {
            key: value
            for key, value in inherited.items()
            if not key.startswith("AIRFLOW__") and key not in _DROPPED
        }
        keys = load_secrets(self.home)
        passwords = write_passwords(self.home, self.username, self.password)
        bin_dir = str(airflow_executable().parent)
        env["PATH"] = os.pathsep.join(part for part in (bin_dir, env.get("PATH", "")) if part)
        env["AIRFLOW_HOME"] = str(self.home)
        env[STACK_ID_VARIABLE] = self.stack_id
        env.update(self.airflow_config(passwords, keys))
        env.update(self.extra_env)
        return env
