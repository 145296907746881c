"""A real Airflow deployment on loopback, for tests and for trying DAGs by hand.

`AirflowStack` runs ``airflow api-server``, ``scheduler`` (LocalExecutor), ``dag-processor``
and ``triggerer`` from this installation as separate processes, with a private AIRFLOW_HOME
(SQLite by default) and the simple auth manager; `AirflowClient` drives it over the REST API::

    with AirflowStack(dags_folder, kubeconfig=cluster.kubeconfig_path) as stack:
        api = stack.client
        api.wait_for_dag("my_dag")
        run_id = api.trigger("my_dag", conf={"epochs": 1})
        assert api.wait_for_run("my_dag", run_id, timeout=120) == "success"

Its own distribution (``airflow-gang-stack``, in ``stack/`` of the airflow-gang repository): it
imports the simulator only in the ``airflow-gang airflow`` command (registered through the
``airflow_gang.cli`` entry point) and never the provider.
The names below are imported on first use, so the ``airflow-gang`` command stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gang_stack.client import AirflowClient
    from gang_stack.errors import StackError
    from gang_stack.stack import AirflowStack

__version__ = "1.0.0"
__all__ = ["AirflowClient", "AirflowStack", "StackError", "__version__"]
_MODULES = {"AirflowClient": "client", "AirflowStack": "stack", "StackError": "errors"}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
