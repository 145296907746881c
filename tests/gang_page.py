"""The Gang jobs page's JSON API served in-process (the plugin app over a FastAPI TestClient),
reading the test session's metadata DB and the cluster of Airflow's ``kubernetes_default``
connection, as the API server would, for assertions on what a user sees."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.settings import UiSettings


def jobs_of_dag(dag_id: str, namespace: str = "default") -> list[dict[str, Any]]:
    """Every job row of ``dag_id`` with its job page's answer (``detail``), live or recorded."""
    settings = UiSettings(conn_id="kubernetes_default", namespaces=(namespace,))
    with TestClient(create_app(authenticate=False, settings_loader=lambda: settings)) as client:
        listed = client.get("/api/jobs", params={"dag_id": dag_id, "limit": 1000})
        assert listed.status_code == 200, listed.text
        rows = []
        for row in listed.json()["jobs"]:
            detail = client.get(f"/api/jobs/{row['namespace']}/{row['name']}", params={"kind": row["kind"]})
            assert detail.status_code == 200, detail.text
            rows.append({**row, "detail": detail.json()})
        return rows
