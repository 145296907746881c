"""`AirflowStack` failing to start: a clear `StackError`, nothing left running."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from gang_stack import AirflowStack, StackError


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        stack = AirflowStack(tmp_path, home=tmp_path / "home", port=port)
        with pytest.raises(StackError, match=f"port {port} on 127.0.0.1 is in use"):
            stack.start()
    assert stack.components == {}


def test_a_missing_dags_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="does not exist"):
        AirflowStack(tmp_path / "nowhere", home=tmp_path / "home").start()


@pytest.mark.slow  # waits out a whole stack start (29 s)
def test_a_component_dying_at_startup_names_it_with_its_log(tmp_path: Path) -> None:
    stack = AirflowStack(
        tmp_path, extra_env={"AIRFLOW__CORE__EXECUTOR": "no_such_module.NoSuchExecutor"}, startup_timeout=120
    )
    with pytest.raises(StackError) as raised:
        stack.start()
    message = str(raised.value)
    assert "Airflow component exited during startup: scheduler" in message
    assert "--- scheduler (" in message
    assert "no_such_module" in message  # the scheduler's own traceback
    assert stack.components == {}
    assert stack.leftovers == []
    assert (stack.home / "stack-logs" / "scheduler.log").is_file()  # kept for the reader of the error
    shutil.rmtree(stack.home)


def test_a_database_and_a_connection_string_are_refused_together(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="either sql_alchemy_conn"):
        AirflowStack(tmp_path, sql_alchemy_conn="sqlite:///x.db", database="postgres")
