"""Runs a set of controllers and their shared informers on one event loop in a background thread.

Used by `SimCluster`, by ``airflow-gang sim controllers`` (attach mode) and by tests. It needs
nothing but a kubeconfig: controllers reach the API server over HTTP like any client would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from gang_sim.controllers.client import KubeClient
from gang_sim.controllers.informer import Cache
from gang_sim.controllers.runner import Controller

log = logging.getLogger(__name__)

ControllerFactory = Callable[[KubeClient, Cache], Controller]


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (uvicorn brings it): the controllers spend much of a
    busy simulation scheduling callbacks and moving bytes, which it does in C."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class ControllerManager:
    """Start with `start()`; `stop()` cancels every task and closes the client."""

    def __init__(
        self, kubeconfig_path: str, factories: Sequence[ControllerFactory], *, context: str | None = None
    ):
        self.kubeconfig_path = kubeconfig_path
        self.context = context
        self.factories = list(factories)
        self.controllers: list[Controller] = []
        self._loop = _new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="gang-sim-controllers", daemon=True)
        self._main: Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    def _run_loop(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            # Transports closed during shutdown finish closing on the loop's next turns; uvloop
            # refuses to close a loop with handles still open (EBUSY).
            for _ in range(3):
                self._loop.run_until_complete(asyncio.sleep(0))
            try:
                self._loop.close()
            except OSError as error:
                log.debug("controller event loop did not close cleanly: %s", error)

    def start(self, timeout: float = 30.0) -> ControllerManager:
        self._thread.start()
        self._main = asyncio.run_coroutine_threadsafe(self._run(), self._loop)
        if not self._ready.wait(timeout):
            self.stop()
            raise TimeoutError(f"controllers did not sync with the API server within {timeout:.0f}s")
        if self._startup_error is not None:
            self.stop()
            raise RuntimeError("controllers failed to start") from self._startup_error
        return self

    async def _run(self) -> None:
        # The task itself, not the concurrent future, must be cancelled so that every
        # controller's cleanup (e.g. killing process-runtime children) runs before stop() returns.
        self._task = asyncio.current_task()
        client: KubeClient | None = None
        tasks: list[asyncio.Task[None]] = []
        try:
            client = await KubeClient.from_kubeconfig(self.kubeconfig_path, self.context)
            cache = Cache(client)
            self.controllers = [factory(client, cache) for factory in self.factories]
            tasks = [asyncio.create_task(informer.run()) for informer in list(cache.informers.values())]
            await asyncio.wait_for(cache.wait_synced(), 30)
            tasks += [asyncio.create_task(controller.run()) for controller in self.controllers]
            self._ready.set()
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            pass
        except BaseException as error:  # surfaced to start(); the thread must not die silently
            self._startup_error = error
            self._ready.set()
            log.exception("controller manager failed")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if client is not None:
                await client.close()

    def stop(self, timeout: float = 10.0) -> None:
        if self._main is not None and not self._main.done():
            if self._task is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)
            # Cancelled on purpose; errors were already logged in _run.
            with contextlib.suppress(BaseException):
                self._main.result(timeout)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)  # the thread closes its loop once it has stopped
        elif not self._loop.is_closed() and not self._thread.ident:
            self._loop.close()  # never started

    def __enter__(self) -> ControllerManager:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
