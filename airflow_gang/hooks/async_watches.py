"""Waiting on the API asynchronously: watches, the list that starts one, and "wait until gone".

A mixin of `airflow_gang.hooks.gang_async.AsyncGangJobHook`, with the two raw request helpers
both use (``_preload_content=False`` requests, their status checked as a preloaded call would).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.client.rest import RESTResponse

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.errors import ApiRequest, status_error, unreachable_error
from airflow_gang.hooks.kinds import KINDS_BY_NAME, PODS, DeletableKind, Kind, WatchKind
from airflow_gang.hooks.retrying import CONNECTION_ERRORS, REQUEST_TIMEOUT, RetryPolicy, acall_with_retries
from airflow_gang.kinds import JobKind

if TYPE_CHECKING:
    from airflow_gang.hooks.client_pool import LoopClientPool

JsonDict = dict[str, Any]
# The server ends a watch after timeoutSeconds; the client gives it this long on top before
# it calls the connection dead.
WATCH_TIMEOUT_SLACK = 10.0
# Lists are read in pages of this many objects, as client-go's reflector reads them: each page is
# decoded on its own, so a namespace of ten thousand pods never holds the event loop for one
# decode of its whole list.
LIST_PAGE_SIZE = 500
# Watch events decoded in a row before the watch lets the event loop's other tasks run.
EVENTS_PER_TURN = 50


async def read_body(response: aiohttp.ClientResponse) -> bytes:
    """The body of a response requested with ``_preload_content=False``.

    kubernetes_asyncio only checks the status of preloaded responses, so a non-2xx answer is
    turned into its `ApiException` here, as a preloaded call would raise it.
    """
    try:
        data = await response.read()
    finally:
        response.release()
    if not 200 <= response.status <= 299:
        # The stubs say ClientResponse, but ApiException reads .data: RESTResponse is what the
        # client itself passes.
        raise ApiException(http_resp=RESTResponse(response, data))  # type: ignore[arg-type]
    return data


def list_call(api: ApiClient, kind: Kind, namespace: str, **params: Any) -> Awaitable[Any]:
    """Start a raw (unparsed) list or watch request of ``kind`` in ``namespace``."""
    if kind.group:
        return CustomObjectsApi(api).list_namespaced_custom_object(
            kind.group, kind.version, namespace, kind.plural, _preload_content=False, **params
        )
    core = CoreV1Api(api)
    lister = core.list_namespaced_pod if kind is PODS else core.list_namespaced_event
    return lister(namespace, _preload_content=False, **params)


class AsyncWatchesMixin:
    """Watches and deletion waits (and looks) for `AsyncGangJobHook` (its client pool, retries, reads)."""

    if TYPE_CHECKING:
        retry_policy: RetryPolicy
        _clients: LoopClientPool
        log: Any

        async def _get(self, kind: Kind, name: str, namespace: str) -> JsonDict | None: ...

        async def _list(self, kind: Kind, namespace: str, **params: Any) -> JsonDict: ...

    async def list_job_children(self, job_kind: JobKind, name: str, namespace: str) -> list[str]:
        """What is left of the job's `JobKind.children`, as `GangJobHook.list_job_children`."""
        left: list[str] = []
        for child in job_kind.children:
            kind = Kind.child(child)
            # Listed also when named, so RBAC needs `list` alone.
            selector = (
                {"label_selector": job_kind.pod_selector(name)}
                if child.labelled
                else {"field_selector": f"metadata.name={name}"}
            )
            listed = await self._list(kind, namespace, **selector)
            found = [str(item["metadata"]["name"]) for item in listed.get("items") or []]
            left.extend(f"{child.kind} {namespace}/{found_name}" for found_name in found)
        return left

    async def wait_gone(
        self, kind: DeletableKind, name: str, namespace: str, *, timeout: float, uid: str | None = None
    ) -> bool:
        """Wait until the object (the one of ``uid``, if given) is gone; False after ``timeout`` s.

        The asynchronous twin of `GangJobHook.wait_gone`: a GET, then a watch of that one object
        from its resourceVersion; a one-second poll only while the watch fails.

        :param kind: ``pytorchjob`` or ``podgroup``.
        :param name: object name.
        :param namespace: its namespace.
        :param timeout: seconds to wait at most.
        :param uid: only this object counts: a new one under the same name is not waited for.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        info = KINDS_BY_NAME[kind]
        while True:
            found = await self._get(info, name, namespace)
            if found is None or (uid is not None and found["metadata"].get("uid") != uid):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                async with contextlib.aclosing(
                    self.watch(
                        kind,
                        namespace,
                        resource_version=found["metadata"].get("resourceVersion"),
                        field_selector=f"metadata.name={name}",
                        timeout_seconds=max(1, int(remaining)),
                    )
                ) as events:
                    async for event in events:
                        gone_uid = (event["object"].get("metadata") or {}).get("uid")
                        if event["type"] == "DELETED" and gone_uid == found["metadata"].get("uid"):
                            return True
            except GangApiError as error:  # a broken or refused watch: poll slowly instead
                self.log.debug("watch of %s %s/%s failed (%s); polling", info.kind, namespace, name, error)
                await asyncio.sleep(min(1.0, max(0.0, deadline - loop.time())))

    async def list_with_version(
        self,
        kind: WatchKind,
        namespace: str,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        on_page: Callable[[], None] | None = None,
    ) -> tuple[list[JsonDict], str]:
        """Items and the list's resourceVersion: the starting point of a following `watch`.

        Read in pages of `LIST_PAGE_SIZE` (one snapshot: a page whose continue token expired is a
        410, and the caller lists again, as after a watch's 410).

        :param kind: ``pytorchjob``, ``podgroup`` or ``pod``.
        :param namespace: namespace to list.
        :param field_selector: e.g. ``metadata.name=train-1``.
        :param label_selector: e.g. ``training.kubeflow.org/job-name=train-1``.
        :param on_page: called after each page (a long list is seen making progress).
        """
        items: list[JsonDict] = []
        version, page = "", ""
        while True:
            listed = await self._list(
                KINDS_BY_NAME[kind],
                namespace,
                field_selector=field_selector,
                label_selector=label_selector,
                limit=LIST_PAGE_SIZE,
                **({"_continue": page} if page else {}),
            )
            metadata = listed.get("metadata") or {}
            # Every page is of the first page's snapshot: its version is the list's.
            version = version or str(metadata.get("resourceVersion") or "")
            items.extend(listed.get("items") or [])
            page = str(metadata.get("continue") or "")
            if on_page is not None:
                on_page()
            if not page:
                return items, version

    async def watch(
        self,
        kind: WatchKind,
        namespace: str,
        *,
        resource_version: str | None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 60,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncGenerator[JsonDict, None]:
        """Raw watch events ``{"type", "object"}`` after ``resource_version``, BOOKMARKs included.

        Ends when the server closes the watch (after ``timeout_seconds``). Opening is retried;
        an ERROR event raises `GangApiError` with its status, 410 when the version is too old
        (list again with `list_with_version`); a broken stream raises `GangApiError` with
        ``status=None``. Close it early with ``contextlib.aclosing``.

        :param kind: ``pytorchjob``, ``podgroup`` or ``pod``.
        :param namespace: namespace to watch.
        :param resource_version: start after this version (from a list or the last event).
        :param field_selector: e.g. ``metadata.name=train-1``.
        :param label_selector: e.g. ``training.kubeflow.org/job-name=train-1``.
        :param timeout_seconds: server-side duration of this watch.
        :param on_open: called once the server accepted the watch (before any event): a quiet
            stream is a working one.
        """
        info = KINDS_BY_NAME[kind]
        request = ApiRequest("watch", info.resource, None, namespace)

        async def open_stream(api: ApiClient) -> aiohttp.ClientResponse:
            response: aiohttp.ClientResponse = await list_call(
                api,
                info,
                namespace,
                watch=True,
                # Bookmarks keep the caller's resourceVersion fresh on quiet streams, so the
                # next watch rarely starts from a compacted version.
                allow_watch_bookmarks=True,
                resource_version=resource_version,
                field_selector=field_selector,
                label_selector=label_selector,
                timeout_seconds=timeout_seconds,
                # Connect within REQUEST_TIMEOUT; then a stream is dead only after this long
                # without a byte, never because it is still delivering: a busy consumer reads a
                # backlog after the server's own end of the watch (a total timeout cut such
                # streams, and a whole triggerer's triggers polled for it, issue 33).
                _request_timeout=(REQUEST_TIMEOUT, timeout_seconds + WATCH_TIMEOUT_SLACK),
            )
            if not 200 <= response.status <= 299:
                await read_body(response)  # raises the ApiException (e.g. an HTTP 410)
            return response

        api = await self._clients.client()
        response = await acall_with_retries(lambda: open_stream(api), request, self.retry_policy, self.log)
        if on_open is not None:
            on_open()
        try:
            decoded = 0
            async for line in response.content:
                if not line.strip():
                    continue
                decoded += 1
                if decoded % EVENTS_PER_TURN == 0:
                    # A burst (a scheduling session binding a wave of pods) arrives buffered, and
                    # reading buffered lines never suspends: let the loop's other tasks run.
                    await asyncio.sleep(0)
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    raise status_error(event.get("object") or {}, request)
                yield {"type": event.get("type"), "object": event.get("object")}
        except CONNECTION_ERRORS as error:
            raise unreachable_error(error, request, 1) from error
        finally:
            response.release()
