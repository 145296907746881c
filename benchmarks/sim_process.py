"""The embedded cluster in a child process, so its controllers and API server do not share the
benchmark's GIL: the numbers then measure the client side being benchmarked, not both at once.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from typing import Any

import psutil
from kubernetes import client as k8s

_running: list[int] = []  # pid of the cluster process of the `cluster_process` block now open

# Controllers cancelled mid-request make the server log ClientDisconnect tracebacks while it
# stops: noise for a benchmark's output.
SHUTDOWN_NOISE = ("uvicorn.error", "gang_sim.apiserver.app")


def _silence(names: Sequence[str]) -> None:
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _serve(options: dict[str, Any], quiet: Sequence[str], conn: Connection, stop: EventType) -> None:
    from gang_sim.cluster import SimCluster
    from gang_sim.process_tuning import tune_garbage_collection

    _silence(quiet)
    tune_garbage_collection()  # this process serves the cluster and nothing else
    try:
        with SimCluster(**options) as cluster:
            conn.send(cluster.kubeconfig_path)
            stop.wait()
            _silence(SHUTDOWN_NOISE)
    except BaseException as error:  # reported to the parent instead of a silent hang
        conn.send(error)


@contextmanager
def cluster_process(
    options: dict[str, Any], *, quiet: Sequence[str] = (), stop_timeout: float = 30
) -> Iterator[str]:
    """Start ``SimCluster(**options)`` in a child process; yield its kubeconfig path; stop it on exit.

    :param quiet: loggers silenced in the child for the whole run.
    :param stop_timeout: seconds to wait for a clean stop before terminating the child.
    """
    # The upstream node grace period (40 s): the kubelets renew their Leases every 10 s, as on a
    # real cluster, instead of twice a second (the simulator's 2 s default, for disruption tests),
    # which would load the API server with writes the measured provider never sees.
    options = {"node_monitor_grace_period": 40.0, **options}
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    stop = context.Event()
    process = context.Process(
        target=_serve, args=(options, tuple(quiet), child, stop), name="sim-cluster", daemon=True
    )
    process.start()
    assert process.pid is not None
    _running.append(process.pid)
    try:
        if not parent.poll(60):
            raise RuntimeError("the simulated cluster did not start within 60 s")
        message = parent.recv()
        if isinstance(message, BaseException):
            raise RuntimeError("the simulated cluster failed to start") from message
        yield str(message)
    finally:
        _running.remove(process.pid)
        stop.set()
        process.join(stop_timeout)
        if process.is_alive():
            process.terminate()
            process.join(5)


def cluster_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by the open cluster process and its children
    (the controllers' process when the cluster isolates them)."""
    total = 0.0
    for pid in _running:
        try:
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


def sim_metrics(api: k8s.ApiClient) -> dict[str, Any]:
    """The API server's own counters (``/sim/v1/metrics``): requests and open watches by User-Agent."""
    body: dict[str, Any] = api.call_api(
        "/sim/v1/metrics",
        "GET",
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        response_types_map={200: "object"},
        _return_http_data_only=True,
    )
    return body
