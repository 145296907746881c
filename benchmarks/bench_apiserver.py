"""Micro-benchmark of the simulated API server: create/get/list throughput and watch fan-out.

Runs the server as a separate process (``python -m gang_sim.cli apiserver``) so client
and server do not share an interpreter, talks to it only over 127.0.0.1 with the official
clients, and prints one table. Nothing is asserted: the numbers are for comparing changes.

    .venv/bin/python benchmarks/bench_apiserver.py [--watchers 500] [--events 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes_asyncio.client as aclient
import kubernetes_asyncio.config as aconfig
from kubernetes import client as k8s
from kubernetes import config as k8s_config

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
DEADLINE_SECONDS = 110  # stay under two minutes whatever the machine


def job(name: str) -> dict[str, Any]:
    replica = {
        "replicas": 1,
        "template": {"spec": {"containers": [{"name": "pytorch", "image": "ghcr.io/acme/train:1"}]}},
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": {"bench": "yes"}},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": {**replica, "replicas": 3}}},
    }


@contextmanager
def server_process() -> Iterator[str]:
    """Start ``sim apiserver`` in its own process; yield its kubeconfig path."""
    with tempfile.TemporaryDirectory(prefix="bench-apiserver-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gang_sim.cli",
                "apiserver",
                "--port",
                "0",
                "--kubeconfig",
                str(kubeconfig),
                "--event-window",
                "50000",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            started = time.monotonic()
            while not kubeconfig.exists():
                if process.poll() is not None or time.monotonic() - started > 30:
                    raise RuntimeError(
                        f"API server did not start: {process.stderr.read() if process.stderr else ''}"
                    )
                time.sleep(0.05)
            yield str(kubeconfig)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def timed(label: str, count: int, action: Callable[[], None], rows: list[tuple[str, int, float]]) -> None:
    started = time.perf_counter()
    action()
    rows.append((label, count, time.perf_counter() - started))


def sync_phase(kubeconfig: str, count: int, rows: list[tuple[str, int, float]]) -> None:
    api = k8s_config.new_client_from_config(config_file=kubeconfig)
    custom = k8s.CustomObjectsApi(api)
    k8s.CoreV1Api(api).create_namespace({"metadata": {"name": "bench"}})

    def create() -> None:
        for i in range(count):
            custom.create_namespaced_custom_object(GROUP, VERSION, "bench", PLURAL, job(f"seq-{i:05d}"))

    def get() -> None:
        for i in range(count):
            custom.get_namespaced_custom_object(GROUP, VERSION, "bench", PLURAL, f"seq-{i:05d}")

    def list_all() -> None:
        for _ in range(20):
            custom.list_namespaced_custom_object(GROUP, VERSION, "bench", PLURAL)

    def list_selected_pages() -> None:
        token = None
        while True:
            page = custom.list_namespaced_custom_object(
                GROUP, VERSION, "bench", PLURAL, limit=50, label_selector="bench=yes", _continue=token
            )
            token = page["metadata"].get("continue")
            if not token:
                break

    timed("create (sequential, sync client)", count, create, rows)
    timed("get (sequential, sync client)", count, get, rows)
    timed(f"list {count} objects (x20)", 20, list_all, rows)
    timed(f"list {count} in pages of 50, selector", count // 50, list_selected_pages, rows)
    api.close()


async def async_client(kubeconfig: str, pool: int) -> aclient.ApiClient:
    configuration = aclient.Configuration()
    await aconfig.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return aclient.ApiClient(configuration)


async def bounded(concurrency: int, jobs: list[Callable[[], Awaitable[Any]]]) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(run: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            await run()

    await asyncio.gather(*(one(run) for run in jobs))


async def concurrent_create(kubeconfig: str, count: int, rows: list[tuple[str, int, float]]) -> None:
    async with await async_client(kubeconfig, 32) as client:
        custom = aclient.CustomObjectsApi(client)

        def maker(i: int) -> Callable[[], Awaitable[Any]]:
            return lambda: custom.create_namespaced_custom_object(
                GROUP, VERSION, "bench", PLURAL, job(f"par-{i:05d}")
            )

        started = time.perf_counter()
        await bounded(16, [maker(i) for i in range(count)])
        rows.append(("create (16 concurrent, asyncio client)", count, time.perf_counter() - started))


async def watch_fanout(
    kubeconfig: str, watchers: int, events: int, rows: list[tuple[str, int, float]]
) -> None:
    """``watchers`` watches on one namespace; time until each has received ``events`` events."""
    async with await async_client(kubeconfig, watchers + 32) as client:
        custom = aclient.CustomObjectsApi(client)
        core = aclient.CoreV1Api(client)
        await core.create_namespace({"metadata": {"name": "fanout"}})
        rv = (await custom.list_namespaced_custom_object(GROUP, VERSION, "fanout", PLURAL))["metadata"][
            "resourceVersion"
        ]
        done = [asyncio.Event() for _ in range(watchers)]
        connected = asyncio.Semaphore(0)

        async def watcher(index: int) -> None:
            response = await custom.list_namespaced_custom_object(
                GROUP,
                VERSION,
                "fanout",
                PLURAL,
                watch=True,
                resource_version=rv,
                timeout_seconds=DEADLINE_SECONDS,
                _preload_content=False,
            )
            connected.release()
            seen = 0
            async for chunk in response.content.iter_any():
                seen += chunk.count(b"\n")  # one event per line; parsing is the client's cost, not ours
                if seen >= events:
                    break
            response.release()
            done[index].set()

        tasks = [asyncio.ensure_future(watcher(i)) for i in range(watchers)]
        started = time.perf_counter()
        for _ in range(watchers):
            await connected.acquire()
        rows.append((f"open {watchers} watches", watchers, time.perf_counter() - started))

        def maker(i: int) -> Callable[[], Awaitable[Any]]:
            return lambda: custom.create_namespaced_custom_object(
                GROUP, VERSION, "fanout", PLURAL, job(f"fan-{i:05d}")
            )

        started = time.perf_counter()
        await bounded(16, [maker(i) for i in range(events)])
        written = time.perf_counter() - started
        await asyncio.wait_for(asyncio.gather(*(d.wait() for d in done)), DEADLINE_SECONDS)
        delivered = time.perf_counter() - started
        rows.append((f"write {events} objects while {watchers} watch", events, written))
        rows.append((f"deliver {events} events to each of {watchers} watches", watchers * events, delivered))
        await asyncio.gather(*tasks, return_exceptions=True)


def print_table(rows: list[tuple[str, int, float]]) -> None:
    width = max(len(label) for label, _, _ in rows)
    print(f"{'operation':<{width}}  {'count':>8}  {'seconds':>8}  {'per second':>11}")
    print(f"{'-' * width}  {'-' * 8}  {'-' * 8}  {'-' * 11}")
    for label, count, seconds in rows:
        print(f"{label:<{width}}  {count:>8}  {seconds:>8.2f}  {count / seconds if seconds else 0:>11,.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=500, help="objects for create/get/list (default 500)")
    parser.add_argument("--watchers", type=int, default=500, help="concurrent watches (default 500)")
    parser.add_argument("--events", type=int, default=1000, help="events each watch receives (default 1000)")
    parser.add_argument("--quick", action="store_true", help="50 objects, 20 watches of 100 events")
    args = parser.parse_args()
    if args.quick:
        args.objects, args.watchers, args.events = 50, 20, 100
    rows: list[tuple[str, int, float]] = []
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    with server_process() as kubeconfig:
        sync_phase(kubeconfig, args.objects, rows)
        asyncio.run(concurrent_create(kubeconfig, args.objects * 2, rows))
        asyncio.run(watch_fanout(kubeconfig, args.watchers, args.events, rows))
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
