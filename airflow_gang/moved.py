"""Old import paths of the modules issue 35 moved into folders by purpose, kept importable.

``import airflow_gang.gang_state`` (or ``from airflow_gang.reaper import ...``) still works: a
finder on ``sys.meta_path`` answers an old path with the module at its new one (the same module
object, so state and patches are shared) and a `DeprecationWarning` naming the new path. One
table instead of a shim file per module; modules whose names changed as well keep a shim of
their own (`airflow_gang.spec`, `airflow_gang.job_kinds`...).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    **{
        f"airflow_gang.{name}": f"airflow_gang.model.{name}"
        for name in (
            "gang_state",
            "capacity",
            "k8s_objects",
            "naming",
            "quantity",
            "validation",
            "pod_fields",
            "spec_choices",
            "watch_rules",
            "outage",
        )
    },
    "airflow_gang.reaper": "airflow_gang.state.reaper",
    "airflow_gang.jobs.task_store": "airflow_gang.state.task_store",
    "airflow_gang.jobs.history": "airflow_gang.state.history",
    "airflow_gang.operators.state_store": "airflow_gang.state.state_store",
    "airflow_gang.telemetry": "airflow_gang.reports.telemetry",
    "airflow_gang.metrics": "airflow_gang.reports.metrics",
    "airflow_gang.jobs.disruption_report": "airflow_gang.reports.disruption_report",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of `MOVED` and loads it as the module at the new one."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        new = MOVED[old]
        warnings.warn(f"{old} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        # The import system returns whatever sys.modules holds under the old name once this ends.
        sys.modules[old] = importlib.import_module(new)


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
