"""Freeze the triggerer's heap once, so its garbage collector's full passes skip Airflow's objects.

Airflow's triggerer forks its trigger runner from a supervisor that has imported Airflow,
SQLAlchemy, pydantic and the providers: the runner starts with some two hundred thousand container
objects that live as long as it does. CPython walks all of them in every full collection, which
comes whenever the objects surviving since the last one grew by a quarter; a thousand deferred
gang jobs bring that about several times, and each pass held the runner's event loop 0.2 s on a
quiet 2-core machine and up to a second on a busy one (issue 33, measured with ``gc.callbacks``
in the runner: they were the stalls left once the provider's own work was off the loop). Airflow
freezes its heap the same way in its DAG processor manager and before its local executor forks
workers (``gc.freeze``); its triggerer does not.

`freeze_once` moves every object alive when the first shared watch cache of a triggerer starts
into the permanent generation, once per process and only inside an Airflow triggerer (never in
``dag.test()`` or a worker): later full passes walk only what came after. The cost is that a
frozen object which later becomes garbage in a reference cycle is never freed; what is alive at
that moment is mostly modules, classes and the runner's own state. ``[gang]
freeze_triggerer_heap = False`` turns it off.
"""

from __future__ import annotations

import contextvars
import gc
import logging
import sys

log = logging.getLogger(__name__)
TRIGGERER_MODULE = "airflow.jobs.triggerer_job_runner"
_asked: set[str] = set()  # "once": holds a marker after the first call in this process


def in_triggerer() -> bool:
    """Whether this process runs Airflow's triggerer (only its command imports the runner module)."""
    return TRIGGERER_MODULE in sys.modules


def freeze_once() -> bool:
    """Freeze the heap if this is the first call in an Airflow triggerer and the setting allows;
    whether it froze now."""
    if _asked or not in_triggerer():
        return False
    _asked.add("asked")
    from airflow.configuration import conf

    if not conf.getboolean("gang", "freeze_triggerer_heap", fallback=True):
        return False
    gc.freeze()
    # Said in the triggerer's own log: from the calling trigger's context it would go to that
    # trigger's task log (Airflow binds a trigger's lines through context variables).
    contextvars.Context().run(
        log.info,
        "airflow-gang froze the triggerer's %d existing objects so garbage collection passes skip them "
        "([gang] freeze_triggerer_heap = False turns this off)",
        gc.get_freeze_count(),
    )
    return True
