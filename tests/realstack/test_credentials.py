"""No credential of a deferred job leaks into Airflow's database, XComs or logs.

The worst case: a connection stored in the metadata DB (created over the REST API, not an
``AIRFLOW_CONN_*`` variable) holding the simulator's whole kubeconfig inline in its extras, bearer
token included. A deferrable `PyTorchJobOperator` waits through it, a downstream task reads its
XCom. The trigger row of the deferred task must name the connection and carry no token, and
after the run no XCom, task log of any try, task state store entry or component log may hold the
token or client key material.

Trigger kwargs are read as Airflow reads them: Fernet-encrypted rows are decrypted with the
stack's key, rows stored as plain JSON are read as they are. Airflow 3.3's execution API stores
the kwargs of a task's deferral as plain JSON (the Task SDK sends a dict, which the API server
writes JSON-dumped; only a string is taken as encrypted by the client), so whatever a trigger
carries is readable by anyone who can read the database.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from cryptography.fernet import Fernet

from airflow_gang.state.reaper import STATE_STORE_JOB_KEY
from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack
from gang_stack.settings import load_secrets
from tests.realstack.dags import INLINE_KUBECONFIG_CONN_ID
from tests.support.realstack import component_logs, metadata_db
from tests.waiting import eventually

DAG_ID = "rs_inline_credentials"
TRIGGER_CLASSPATH = "airflow_gang.triggers.gang.GangJobTrigger"
# Fields of a kubeconfig user that authenticate: none may leave the connection.
SECRET_USER_FIELDS = ("token", "client-key-data", "client-certificate-data", "password")


def kubeconfig_secrets(kubeconfig: Mapping[str, Any]) -> dict[str, str]:
    """Every credential of every user in ``kubeconfig``, named ``<user>.<field>``."""
    found: dict[str, str] = {}
    for entry in kubeconfig.get("users") or []:
        user = entry.get("user") or {}
        for field in SECRET_USER_FIELDS:
            value = user.get(field)
            if isinstance(value, str) and value:
                found[f"{entry.get('name')}.{field}"] = value
    return found


def leaked(text: str, secrets: Mapping[str, str]) -> list[str]:
    """The names (never the values) of the secrets ``text`` contains."""
    return sorted(name for name, value in secrets.items() if value in text)


def decrypt_kwargs(stored: str, fernet: Fernet) -> str:
    """A trigger row's ``kwargs`` as Airflow reads them (`Trigger._decrypt_kwargs`): Fernet
    tokens, or plain JSON left by some migration paths."""
    if stored.startswith("{"):
        return stored
    return fernet.decrypt(stored.encode("utf-8")).decode("utf-8")


def trigger_rows(stack: AirflowStack, run_id: str) -> list[tuple[int, str, str]]:
    """(id, classpath, stored kwargs) of the triggers the run's task instances wait for."""
    rows = metadata_db(
        stack,
        "SELECT t.id, t.classpath, t.kwargs FROM trigger AS t "
        "JOIN task_instance AS ti ON ti.trigger_id = t.id WHERE ti.dag_id = :dag_id AND ti.run_id = :run_id",
        dag_id=DAG_ID,
        run_id=run_id,
    )
    return [(int(row[0]), str(row[1]), str(row[2])) for row in rows]


def all_trigger_kwargs(stack: AirflowStack) -> list[str]:
    return [str(row[0]) for row in metadata_db(stack, "SELECT kwargs FROM trigger")]


def values_of_key(tree: Any, key: str) -> list[Any]:
    """Every value stored under ``key`` in nested dicts and lists (serialized kwargs nest)."""
    if isinstance(tree, dict):
        here = [tree[key]] if key in tree else []
        return here + [value for child in tree.values() for value in values_of_key(child, key)]
    if isinstance(tree, list):
        return [value for child in tree for value in values_of_key(child, key)]
    return []


def run_path(run_id: str, *parts: str) -> str:
    return "/".join(("/api/v2/dags", quote(DAG_ID, safe=""), "dagRuns", quote(run_id, safe=""), *parts))


def xcom_entries(stack: AirflowStack, run_id: str) -> list[dict[str, Any]]:
    """Every XCom of the run, each with its deserialized value."""
    listed = stack.client.call("GET", run_path(run_id, "taskInstances", "~", "xcomEntries"))
    entries = []
    for entry in listed["xcom_entries"]:
        path = run_path(
            run_id, "taskInstances", entry["task_id"], "xcomEntries", quote(entry["key"], safe="")
        )
        params = {"map_index": entry["map_index"], "deserialize": True}
        entries.append(stack.client.call("GET", path, params=params))
    return entries


def state_store_entries(stack: AirflowStack, run_id: str, task_id: str) -> list[dict[str, Any]]:
    answer = stack.client.call("GET", run_path(run_id, "taskInstances", task_id, "state-store"))
    return list(answer["task_state_store"])


@pytest.fixture
def inline_connection(stack: AirflowStack, cluster: SimCluster) -> Iterator[dict[str, str]]:
    """The connection, stored in the metadata DB through the REST API; yields its secrets."""
    text = Path(cluster.kubeconfig_path).read_text(encoding="utf-8")
    secrets = kubeconfig_secrets(yaml.safe_load(text))
    body = {
        "connection_id": INLINE_KUBECONFIG_CONN_ID,
        "conn_type": "kubernetes",
        "extra": json.dumps({"kube_config": text}),
    }
    stack.client.call("POST", "/api/v2/connections", expected=(201,), json=body)
    try:
        yield secrets
    finally:
        stack.client.call("DELETE", f"/api/v2/connections/{INLINE_KUBECONFIG_CONN_ID}", expected=(204, 404))


def test_credentials_of_an_inline_kubeconfig_stay_in_the_connection(
    stack: AirflowStack, cluster: SimCluster, inline_connection: dict[str, str]
) -> None:
    started = time.monotonic()
    secrets = inline_connection
    assert cluster.apiserver is not None
    token = cluster.apiserver.token
    assert token, "the simulator runs without auth: nothing to leak"
    assert token in secrets.values(), "the kubeconfig lacks the simulator's token"
    # Stored in the DB, no environment variable: the triggerer must look it up through Airflow.
    in_db = metadata_db(
        stack, "SELECT conn_type FROM connection WHERE conn_id = :conn_id", conn_id=INLINE_KUBECONFIG_CONN_ID
    )
    assert in_db == [("kubernetes",)]
    assert f"AIRFLOW_CONN_{INLINE_KUBECONFIG_CONN_ID.upper()}" not in stack.environment()

    run_id = stack.client.trigger(DAG_ID)
    stack.client.wait_for_task_state(DAG_ID, run_id, "train", {"deferred"}, timeout=60)

    # While deferred: the trigger row exists, names the connection, carries no credential.
    fernet = Fernet(load_secrets(stack.home)["fernet_key"])
    rows = eventually(lambda: trigger_rows(stack, run_id), timeout=10, message="no trigger row")
    assert [classpath for _, classpath, _ in rows] == [TRIGGER_CLASSPATH]
    (_, _, stored) = rows[0]
    kwargs_text = decrypt_kwargs(stored, fernet)
    assert leaked(kwargs_text, secrets) == []
    kwargs = json.loads(kwargs_text)
    assert INLINE_KUBECONFIG_CONN_ID in values_of_key(kwargs, "kubernetes_conn_id")
    assert INLINE_KUBECONFIG_CONN_ID in values_of_key(kwargs, "conn_id")
    for forbidden in ("connection_extras", "kube_config", "config_dict"):
        assert values_of_key(kwargs, forbidden) == [], f"trigger kwargs carry {forbidden}"
    # Nor does any other trigger waiting at this moment.
    for other in all_trigger_kwargs(stack):
        assert leaked(decrypt_kwargs(other, fernet), secrets) == []

    assert stack.client.wait_for_run(DAG_ID, run_id, timeout=90) == "success", component_logs(stack)

    # The XComs: the job's result and the downstream task's, read back through the API.
    entries = xcom_entries(stack, run_id)
    values = {(entry["task_id"], entry["key"]): entry["value"] for entry in entries}
    result = values[("train", "return_value")]
    assert result["state"] == "succeeded"
    assert values[("report", "return_value")] == {"job": result["name"], "state": "succeeded"}
    assert leaked(json.dumps(entries), secrets) == []

    # The task logs of every try of every task (the trigger's lines included).
    logs = {}
    for ti in stack.client.task_instances(DAG_ID, run_id):
        for try_number in range(1, int(ti["try_number"]) + 1):
            logs[f"{ti['task_id']}#{try_number}"] = stack.client.task_log(
                DAG_ID, run_id, ti["task_id"], try_number, map_index=ti["map_index"]
            )
    assert sorted(logs) == ["report#1", "train#1"]
    assert "Pausing task as DEFERRED" in logs["train#1"]
    assert f"{result['namespace']}/{result['name']}" in logs["train#1"]
    for name, text in logs.items():
        assert leaked(text, secrets) == [], f"task log {name}"

    # The task state store: the job entry names the connection, never its content.
    store = state_store_entries(stack, run_id, "train")
    job_entries = [entry["value"] for entry in store if entry["key"] == STATE_STORE_JOB_KEY]
    assert job_entries, f"no pytorchjob entry in the task state store: {store}"
    assert job_entries[0]["kubernetes_conn_id"] == INLINE_KUBECONFIG_CONN_ID
    assert leaked(json.dumps(store), secrets) == []

    # The components that ran the provider's code (triggerer, scheduler with its reaper).
    for component in ("triggerer", "scheduler"):
        assert leaked(stack.component_log(component), secrets) == [], f"{component} log"
    print(f"inline-credential run checked in {time.monotonic() - started:.1f}s")
