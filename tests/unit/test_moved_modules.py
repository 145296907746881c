"""Every module issue 35 moved keeps its old import path: the same module, with a warning."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from airflow_gang.moved import MOVED


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_the_old_path_imports_the_module_at_the_new_one(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old) if old not in sys.modules else _fresh(old)
    assert module is importlib.import_module(new)


def _fresh(old: str) -> object:
    del sys.modules[old]
    return importlib.import_module(old)


def test_from_import_of_an_old_path_works_in_a_fresh_interpreter() -> None:
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "try:\n"
        "    from airflow_gang.reaper import STATE_STORE_JOB_KEY\n"
        "except DeprecationWarning as warning:\n"
        "    print(warning)\n"
        "warnings.simplefilter('ignore')\n"
        "from airflow_gang.reaper import STATE_STORE_JOB_KEY\n"
        "import airflow_gang.state.reaper as new\n"
        "print(STATE_STORE_JOB_KEY == new.STATE_STORE_JOB_KEY)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == [
        "airflow_gang.reaper moved to airflow_gang.state.reaper; import it from there",
        "True",
    ]
