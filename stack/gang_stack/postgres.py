"""A PostgreSQL server for the stack's metadata database, as production Airflow runs on.

The server comes from the `pgserver` wheel (PostgreSQL's own binaries, no system package, no
root needed): `PostgresDatabase.start` initialises a data folder, starts the server on a unix
socket in it (no TCP port to collide with), creates the ``airflow`` database and returns its
SQLAlchemy URI; `stop` stops the server and removes the folder. Airflow reaches it with
``psycopg2`` (sync) and ``asyncpg`` (the API server's async engine, derived by Airflow from the
same URI).

The data folder lives in the system's temporary folder, not in the stack's home: a unix socket
path may not exceed 107 bytes, which a pytest temporary home easily does. Each start is a fresh
database.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from gang_stack.errors import StackError

DATABASE = "airflow"


class PostgresDatabase:
    """One PostgreSQL server and its ``airflow`` database, for one stack."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self._server: Any = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> str:
        """Start the server; the SQLAlchemy URI (``postgresql+psycopg2``) of its ``airflow`` database."""
        try:
            from pgserver.postgres_server import get_server
        except ImportError as error:  # pragma: no cover - a dependency of airflow-gang-stack
            raise StackError("PostgreSQL needs the pgserver package: pip install -e ./stack") from error
        self.folder = Path(tempfile.mkdtemp(prefix="gang-pg-"))
        try:
            self._server = get_server(self.folder, cleanup_mode="stop")
            self._server.psql(f"CREATE DATABASE {DATABASE};")
        except Exception as error:
            self.stop()
            raise StackError(f"PostgreSQL did not start in {self.folder}: {error}") from error
        return f"postgresql+psycopg2://postgres:@/{DATABASE}?host={self.folder}"

    def stop(self) -> None:
        """Stop the server (idempotent) and remove its data."""
        server, self._server = self._server, None
        if server is not None:
            server.cleanup()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
