"""Celery workers of a stack run with the CeleryExecutor: their command line and their readiness.

A Celery worker has no heartbeat in Airflow's ``/api/v2/monitor/health``; it is ready when it
answers Celery's own control ``ping`` through the broker, as ``celery inspect ping`` checks in
production health probes. Each worker has a node name of its own (``celery-worker@host``,
``celery-worker-2@host``): two with the same name on one machine would confuse Celery's control
replies.
"""

from __future__ import annotations

import socket
from collections.abc import Collection

WORKER = "celery-worker"


def worker_command(airflow: str, name: str, concurrency: int) -> list[str]:
    """``airflow celery worker`` for component ``name`` (``celery-worker``, ``celery-worker-2``...)."""
    return [
        airflow,
        "celery",
        "worker",
        "--celery-hostname",
        node_name(name),
        "--concurrency",
        str(concurrency),
    ]


def node_name(name: str) -> str:
    return f"{name}@{socket.gethostname()}"


def workers_answering(broker_url: str, names: Collection[str], timeout: float = 1.0) -> set[str]:
    """Which of the workers ``names`` answer a control ping through the broker within ``timeout``."""
    from celery import Celery

    app = Celery("airflow-gang-stack", broker=broker_url)
    try:
        replies = app.control.ping(destination=[node_name(name) for name in names], timeout=timeout)
    finally:
        app.close()
    answered = {node for reply in replies for node in reply}
    return {name for name in names if node_name(name) in answered}
