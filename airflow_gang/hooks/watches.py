"""Watching synchronously: the list that starts a watch, and a watch stream another thread can stop.

A mixin of `airflow_gang.hooks.gang.GangJobHook`, for the worker's wait (`airflow_gang.jobs.job_watch`).
Same contract as the asynchronous `airflow_gang.hooks.async_watches`: raw wire dicts, opening
retried, an ERROR event raised as `GangApiError` with its status (410: list again), a broken
stream as `GangApiError` with ``status=None``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from kubernetes.client import CoreV1Api, CustomObjectsApi
from kubernetes.watch.watch import iter_resp_lines

from airflow_gang.hooks.errors import ApiRequest, status_error, unreachable_error
from airflow_gang.hooks.kinds import KINDS_BY_NAME, Kind, WatchKind
from airflow_gang.hooks.retrying import CONNECTION_ERRORS, REQUEST_TIMEOUT

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


class SyncWatchesMixin:
    """`list_with_version` and `open_watch` for `GangJobHook` (its clients, retries and timeouts)."""

    if TYPE_CHECKING:

        @property
        def core_v1_client(self) -> CoreV1Api: ...

        @property
        def custom_object_client(self) -> CustomObjectsApi: ...

        def _call(self, request: ApiRequest, call: Callable[[], T]) -> T: ...

        def _timeout(self, preferred: float = REQUEST_TIMEOUT) -> float: ...

    def _raw_list(self, kind: Kind, namespace: str, **params: Any) -> Any:
        if kind.group:
            return self.custom_object_client.list_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, _preload_content=False, **params
            )
        return self.core_v1_client.list_namespaced_pod(namespace, _preload_content=False, **params)

    def list_with_version(
        self,
        kind: WatchKind,
        namespace: str,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> tuple[list[JsonDict], str]:
        """Items and the list's resourceVersion: where a following `open_watch` starts.

        :param kind: ``pytorchjob``, ``podgroup`` or ``pod``.
        :param namespace: namespace to list.
        :param field_selector: e.g. ``metadata.name=train-1``.
        :param label_selector: e.g. ``training.kubeflow.org/job-name=train-1``.
        """
        info = KINDS_BY_NAME[kind]
        selectors = {"field_selector": field_selector, "label_selector": label_selector}

        def listed() -> JsonDict:
            response = self._raw_list(
                info,
                namespace,
                **{key: value for key, value in selectors.items() if value},
                _request_timeout=self._timeout(),
            )
            try:
                parsed: JsonDict = json.loads(response.data)
            finally:
                response.release_conn()
            return parsed

        body = self._call(ApiRequest("list", info.resource, None, namespace), listed)
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        return list(body.get("items") or []), version

    def open_watch(
        self,
        kind: WatchKind,
        namespace: str,
        *,
        resource_version: str,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> WatchStream:
        """Open a watch after ``resource_version`` (retried like any call); read its `events`.

        :param kind: ``pytorchjob``, ``podgroup`` or ``pod``.
        :param namespace: namespace to watch.
        :param resource_version: start after this version (from a list or the last event).
        :param field_selector: e.g. ``metadata.name=train-1``.
        :param label_selector: e.g. ``training.kubeflow.org/job-name=train-1``.
        :param timeout_seconds: server-side duration of this watch.
        """
        info = KINDS_BY_NAME[kind]
        request = ApiRequest("watch", info.resource, None, namespace)
        selectors = {"field_selector": field_selector, "label_selector": label_selector}

        def opened() -> Any:
            return self._raw_list(
                info,
                namespace,
                watch=True,
                # Bookmarks keep the resourceVersion fresh on quiet streams, so the next watch
                # rarely starts from a compacted version.
                allow_watch_bookmarks=True,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                _request_timeout=(REQUEST_TIMEOUT, timeout_seconds + WATCH_TIMEOUT_SLACK),
                **{key: value for key, value in selectors.items() if value},
            )

        return WatchStream(self._call(request, opened), request)


__all__ = ["SyncWatchesMixin", "WatchStream"]
