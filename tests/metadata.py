"""Reading Airflow's metadata database the way the UI does, for assertions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def migrate_db() -> None:
    """``airflow db migrate`` on the test session's database (tests/conftest.py set it up)."""
    airflow = Path(sys.executable).parent / "airflow"
    result = subprocess.run(
        [str(airflow), "db", "migrate"],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def xcom_value(dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
    """One stored XCom value (a task's return value, or a key it pushed such as a link)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(
            select(XComModel).where(
                XComModel.dag_id == dag_id,
                XComModel.run_id == run_id,
                XComModel.task_id == task_id,
                XComModel.map_index == map_index,
                XComModel.key == key,
            )
        ).one()
        return XComModel.deserialize_value(row)
