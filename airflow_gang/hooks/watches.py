"""`WatchStream`: a synchronous watch another thread can stop (`GangJobHook.open_watch` opens it).

For the worker's wait (`airflow_gang.jobs.job_watch`). Same contract as the asynchronous watch of
`AsyncGangJobHook`: raw wire dicts, an ERROR event raised as `GangApiError` with its status (410:
list again), a broken stream as `GangApiError` with ``status=None``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

from kubernetes.watch.watch import iter_resp_lines

from airflow_gang.hooks.errors import ApiRequest, status_error, unreachable_error
from airflow_gang.hooks.retrying import CONNECTION_ERRORS

T = TypeVar("T")
JsonDict = dict[str, Any]
# The server ends a watch after timeoutSeconds; the client gives it this long on top.
WATCH_TIMEOUT_SLACK = 10.0


class WatchStream:
    """One open watch: iterate `events`; `stop` from any thread ends the iteration at once."""

    def __init__(self, response: Any, request: ApiRequest) -> None:
        self._response = response
        self._request = request
        self._stopped = threading.Event()

    def events(self) -> Iterator[JsonDict]:
        """Raw events ``{"type", "object"}``, BOOKMARKs included, until the server ends the watch."""
        try:
            for line in iter_resp_lines(self._response):
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    raise status_error(event.get("object") or {}, self._request)
                yield {"type": event.get("type"), "object": event.get("object")}
        except CONNECTION_ERRORS as error:
            if not self._stopped.is_set():
                raise unreachable_error(error, self._request, 1) from error
        finally:
            self._response.release_conn()

    def stop(self) -> None:
        """End the stream now: urllib3's shutdown unblocks a read waiting in another thread."""
        self._stopped.set()
        shutdown = getattr(self._response, "shutdown", None)  # urllib3 >= 2.3
        (shutdown or self._response.close)()


__all__ = ["WATCH_TIMEOUT_SLACK", "WatchStream"]
