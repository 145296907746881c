"""The stack's PostgreSQL server (`gang_stack.postgres`): started from the pgserver wheel on a
unix socket, an ``airflow`` database Airflow's driver reaches, stopped with nothing left."""

from __future__ import annotations

from pathlib import Path

import psutil
import psycopg2

from gang_stack.postgres import PostgresDatabase


def postgres_processes(folder: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if str(folder) in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


def test_the_server_serves_an_airflow_database_and_stops_without_a_trace() -> None:
    database = PostgresDatabase()
    uri = database.start()
    folder = database.folder
    assert folder is not None
    try:
        assert uri.startswith("postgresql+psycopg2://postgres:@/airflow?host=")
        connection = psycopg2.connect(uri.replace("postgresql+psycopg2", "postgresql"))
        try:
            with connection.cursor() as cursor:
                cursor.execute("select current_database(), version()")
                name, version = cursor.fetchone()
        finally:
            connection.close()
        assert name == "airflow"
        assert version.startswith("PostgreSQL")
        assert postgres_processes(folder), "no postgres process serves the data folder"
    finally:
        database.stop()
    assert not folder.exists()
    assert postgres_processes(folder) == []
    database.stop()  # idempotent
