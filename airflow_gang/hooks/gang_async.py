"""`AsyncGangJobHook`: the provider's Kubernetes API calls on ``kubernetes_asyncio``, for triggers.

The cncf `AsyncKubernetesHook` it extends brings the connection handling (including building
from ``connection_extras`` without a connection lookup, as `KubernetesPodTrigger` does) but
no custom-object calls, so those are made here with ``kubernetes_asyncio``'s
`CustomObjectsApi`. Same contract as `GangJobHook`: wire dicts, retries, 404 as None/False,
`GangApiError` for everything else.

Unlike the cncf hook's ``get_conn()``, which builds (and closes) a new client for every call
on the event loop, the calls here share one client per hook, built off the loop on first use
and closed by `AsyncGangJobHook.close` (see `airflow_gang.hooks.client_pool`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar, cast

import aiohttp
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
from kubernetes_asyncio.client import (
    ApiClient,
    CoreV1Api,
    CustomObjectsApi,
    V1DeleteOptions,
    V1Preconditions,
)
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.client.rest import RESTResponse

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.client_pool import LoadedConfig, LoopClientPool
from airflow_gang.hooks.connection_identity import definition_fingerprint, file_digest, kubeconfig_path
from airflow_gang.hooks.errors import ApiRequest, status_error, unreachable_error
from airflow_gang.hooks.kinds import (
    EVENTS,
    KINDS_BY_NAME,
    POD_LOG_RESOURCE,
    PODGROUPS,
    PODS,
    PYTORCHJOBS,
    QUEUES,
    DeletableKind,
    Kind,
    WatchKind,
)
from airflow_gang.hooks.retrying import CONNECTION_ERRORS, REQUEST_TIMEOUT, RetryPolicy, acall_with_retries
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.outage import may_mean_moved

T = TypeVar("T")
JsonDict = dict[str, Any]
# At most one fresh look at the connection per hook in this many seconds: during a real outage
# every failing call would otherwise ask the triggerer's supervisor for it again.
REFRESH_MIN_SECONDS = 30.0


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


class AsyncGangJobHook(AsyncKubernetesHook):
    """Asynchronous API calls for gang-scheduled PyTorchJobs (used by `GangJobTrigger`).

    Constructor as `AsyncKubernetesHook`: ``conn_id``, ``connection_extras`` (given, no
    connection is looked up: pass `GangJobHook.async_hook_kwargs()` from the worker),
    ``config_dict``, ``config_file``, ``in_cluster``, ``cluster_context``.

    All calls share one `kubernetes_asyncio` client and its keep-alive connections, built on
    first use with everything blocking (connection lookup, kubeconfig loading, certificate
    files, SSL context) in a worker thread. ``await hook.close()`` when done with the hook: it
    closes the client and its connections. A closed hook stays usable: its next call builds a
    new client. Used from several event loops, the hook keeps one client per loop.
    """

    retry_policy: RetryPolicy = RetryPolicy()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients = LoopClientPool(self._load_client_config)
        # Extras handed in (from the worker: `GangJobHook.async_hook_kwargs`) are all this hook
        # may know; extras it looked up itself it looks up again in `refresh_connection`.
        self._extras_given = self._extras is not None
        self._refreshed_at = -REFRESH_MIN_SECONDS
        # The kubeconfig file's digest at the last look (`file_digest`).
        self._kubeconfig_looked_at: str | None = None
        self._refresh_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def reuse_lookup(self, extras: dict[str, Any]) -> None:
        """Start from what an earlier lookup of this hook's connection returned (no second lookup
        now); `refresh_connection` still looks it up afresh."""
        self._extras = extras

    async def definition(self) -> str:
        """`connection_identity.definition_fingerprint` of this hook's connection (looked up once)."""
        extras = await self.get_conn_extras()
        return await asyncio.to_thread(definition_fingerprint, extras, self._overrides())

    def _overrides(self) -> dict[str, Any]:
        return {
            "conn_id": self.conn_id,
            "config_file": self.config_file,
            "cluster_context": self.cluster_context,
            "in_cluster": self.in_cluster,
            "config_dict": self.config_dict,
        }

    async def _kubeconfig_digest(self) -> str | None:
        path = kubeconfig_path(self._extras or {}, self._overrides())
        return await asyncio.to_thread(file_digest, path)

    @property
    def connection_generation(self) -> int:
        """Changes whenever `refresh_connection` switches the client: pass it back as ``since``."""
        return self._clients.generation

    async def refresh_connection(self, since: int | None = None) -> bool:
        """Resolve the connection again and follow it if it now points elsewhere; whether the
        calls from now on go elsewhere than those made at generation ``since``.

        The connection is looked up afresh (unless its extras were handed in), its kubeconfig
        loaded again, and the client switched when the server, the trust or static credentials
        changed (`LoopClientPool.reload`). One look at a time, at most once per
        `REFRESH_MIN_SECONDS` unless the kubeconfig file changed since the last look (a CA
        rotated on the server first and in the kubeconfig seconds later is followed at once):
        calls failing together (three watches cut at once) wait for the first one's look and
        retry on the client it switched to.
        """
        lock = self._refresh_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            if since is not None and self._clients.generation != since:
                return True
            return await self._refresh_now()

    async def _refresh_now(self) -> bool:
        now = time.monotonic()
        kubeconfig = await self._kubeconfig_digest()
        if now - self._refreshed_at < REFRESH_MIN_SECONDS and kubeconfig == self._kubeconfig_looked_at:
            return False
        self._refreshed_at, self._kubeconfig_looked_at = now, kubeconfig
        before = (self._extras, self.client_configuration, self._config_loaded, self._is_exec_auth)
        if not self._extras_given and self.conn_id:
            self._extras = None
            try:
                await self.get_conn_extras()
            except Exception as error:  # the lookup itself failing changes nothing
                self.log.debug("looking up connection %s again failed: %s", self.conn_id, error)
                self._extras = before[0]
                return False
        self.client_configuration, self._config_loaded, self._is_exec_auth = None, False, None
        try:
            outcome = await self._clients.reload(self._load_client_config)
        except Exception as error:  # e.g. a kubeconfig half-written: keep what works
            self.log.debug("loading connection %s again failed: %s", self.conn_id, error)
            outcome = "kept"
        if outcome == "kept":
            # The client in use stays, and with it the configuration an exec plugin refreshes.
            self._extras, self.client_configuration, self._config_loaded, self._is_exec_auth = before
            return False
        if outcome == "switched":
            self.log.info(
                "connection %s changed: calls now go to %s",
                self.conn_id or "(inline)",
                self.client_configuration.host if self.client_configuration else "?",
            )
        return outcome == "switched"

    def _load_client_config(self) -> LoadedConfig:
        """Load the client configuration as `AsyncKubernetesHook` does. Blocking: a worker thread runs it.

        The cncf loader is a coroutine that blocks inside (it reads the kubeconfig, writes
        certificate files, and looks up the connection unless ``connection_extras`` were
        given), so it runs to completion on a private event loop in this thread. The cncf hook
        caches static credentials after the first load; exec-plugin ones it loads again on
        every call, into the same configuration object.
        """
        asyncio.run(self._load_config())  # type: ignore[no-untyped-call]
        configuration = self.client_configuration
        assert configuration is not None  # _load_config creates it
        return LoadedConfig(configuration, reload_credentials=bool(self._is_exec_auth))

    def _timeout(self) -> float:
        """One request's timeout: `REQUEST_TIMEOUT`, cut to the time left under the policy's deadline."""
        return self.retry_policy.request_timeout(REQUEST_TIMEOUT)

    async def close(self) -> None:
        """Close the hook's client and its connections (idempotent); calls still running fail."""
        await self._clients.close()

    async def get_conn_extras(self) -> dict[str, Any]:
        """The connection's extras, ``{}`` for a default connection that does not exist.

        For that case the cncf hook builds an ORM ``Connection`` on the caller's loop, which
        configures every SQLAlchemy mapper of Airflow the first time in a process: more than a
        second with the triggerer's loop stalled (a triggerer that never used the ORM, with
        in-cluster or default-kubeconfig credentials and no ``kubernetes_default``).
        """
        if getattr(self, "_extras", None) is None and self.conn_id and self.conn_id == self.default_conn_name:
            from airflow.providers.common.compat.connection import get_async_connection
            from airflow.providers.common.compat.sdk import AirflowNotFoundException

            try:
                connection = await get_async_connection(self.conn_id)
            except AirflowNotFoundException:
                self._extras = {}
            else:
                self._extras = connection.extra_dejson
        return cast(dict[str, Any], await super().get_conn_extras())

    async def _get_field(self, field_name: str) -> Any:
        # AsyncKubernetesHook reads kube_config_path from the connection only and ignores
        # config_file; honour the explicit argument first, as the sync KubernetesHook does.
        if field_name == "kube_config_path" and self.config_file:
            return self.config_file
        return await super()._get_field(field_name)  # type: ignore[no-untyped-call]

    async def _call(self, request: ApiRequest, call: Callable[[ApiClient], Awaitable[T]]) -> T:
        generation = self.connection_generation
        api = await self._clients.client()
        try:
            return await acall_with_retries(lambda: call(api), request, self.retry_policy, self.log)
        except GangApiError as error:
            if not (may_mean_moved(error) and await self.refresh_connection(since=generation)):
                raise
        api = await self._clients.client()  # the connection moved: once more, where it points now
        return await acall_with_retries(lambda: call(api), request, self.retry_policy, self.log)

    async def _call_or_none(self, request: ApiRequest, call: Callable[[ApiClient], Awaitable[T]]) -> T | None:
        try:
            return await self._call(request, call)
        except GangApiError as error:
            if error.status == 404:
                return None
            raise

    async def _get(self, kind: Kind, name: str, namespace: str) -> JsonDict | None:
        return await self._call_or_none(
            ApiRequest("get", kind.resource, name, namespace),
            lambda api: CustomObjectsApi(api).get_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, _request_timeout=self._timeout()
            ),
        )

    async def _delete(self, kind: Kind, name: str, namespace: str, propagation: str, uid: str | None) -> bool:
        options = V1DeleteOptions(
            propagation_policy=propagation, preconditions=V1Preconditions(uid=uid) if uid else None
        )
        deleted = await self._call_or_none(
            ApiRequest("delete", kind.resource, name, namespace),
            lambda api: CustomObjectsApi(api).delete_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                name,
                body=options,
                _request_timeout=self._timeout(),
            ),
        )
        if deleted is not None:
            self.log.info("deleting %s %s/%s propagation=%s", kind.kind, namespace, name, propagation)
        return deleted is not None

    async def _list(self, kind: Kind, namespace: str, **params: Any) -> JsonDict:
        async def listed(api: ApiClient) -> JsonDict:
            response = await list_call(api, kind, namespace, _request_timeout=self._timeout(), **params)
            parsed: JsonDict = json.loads(await read_body(response))
            return parsed

        return await self._call(ApiRequest("list", kind.resource, None, namespace), listed)

    async def get_pytorchjob(self, name: str, namespace: str) -> JsonDict | None:
        """The PyTorchJob, or None if it does not exist.

        :param name: job name.
        :param namespace: job namespace.
        """
        return await self._get(PYTORCHJOBS, name, namespace)

    async def get_job(self, job_kind: JobKind, name: str, namespace: str) -> JsonDict | None:
        """The gang job of ``job_kind`` (PyTorchJob, TrainJob), or None if it does not exist."""
        return await self._get(Kind.of(job_kind), name, namespace)

    async def get_podgroup(self, name: str, namespace: str) -> JsonDict | None:
        """The PodGroup, or None if it does not exist.

        :param name: PodGroup name.
        :param namespace: its namespace.
        """
        return await self._get(PODGROUPS, name, namespace)

    async def get_queue(self, name: str) -> JsonDict | None:
        """The cluster-scoped Volcano Queue, or None if it does not exist.

        :param name: queue name.
        """
        return await self._call_or_none(
            ApiRequest("get", QUEUES.resource, name, None),
            lambda api: CustomObjectsApi(api).get_cluster_custom_object(
                QUEUES.group, QUEUES.version, QUEUES.plural, name, _request_timeout=self._timeout()
            ),
        )

    async def list_job_pods(
        self, name: str, namespace: str, job_kind: JobKind = DEFAULT_JOB_KIND
    ) -> list[JsonDict]:
        """The job's pods (a PyTorchJob's by ``training.kubeflow.org/job-name=<name>``), as wire dicts.

        :param name: job name.
        :param namespace: job namespace.
        :param job_kind: the job's kind, whose pod label finds its pods.
        """
        listed = await self._list(PODS, namespace, label_selector=job_kind.pod_selector(name))
        return list(listed.get("items") or [])

    async def list_events(self, namespace: str, involved_name: str) -> list[JsonDict]:
        """Core events about one object, in the server's order.

        :param namespace: namespace of the object.
        :param involved_name: the object's name (field selector ``involvedObject.name``).
        """
        listed = await self._list(EVENTS, namespace, field_selector=f"involvedObject.name={involved_name}")
        return list(listed.get("items") or [])

    async def delete_pytorchjob(
        self, name: str, namespace: str, *, propagation: str = "Foreground", uid: str | None = None
    ) -> bool:
        """Delete a PyTorchJob; False if it was already gone.

        :param name: job name.
        :param namespace: job namespace.
        :param propagation: ``Foreground`` (default), ``Background`` or ``Orphan``.
        :param uid: delete only if the object has this uid; otherwise `GangApiError` 409.
        """
        return await self._delete(PYTORCHJOBS, name, namespace, propagation, uid)

    async def delete_job(
        self,
        job_kind: JobKind,
        name: str,
        namespace: str,
        *,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete a gang job of ``job_kind``; False if it was already gone (as `delete_pytorchjob`)."""
        return await self._delete(Kind.of(job_kind), name, namespace, propagation, uid)

    async def delete_podgroup(self, name: str, namespace: str, *, uid: str | None = None) -> bool:
        """Delete a PodGroup; False if it was already gone.

        In the background: nothing depends on a PodGroup (its pods are owned by their job), so it
        goes at once, where a foreground delete would leave it, marked, until the garbage
        collector's next pass, and a PodGroup of the same name created meanwhile would collide.

        :param name: PodGroup name.
        :param namespace: its namespace.
        :param uid: delete only if the object has this uid; otherwise `GangApiError` 409.
        """
        return await self._delete(PODGROUPS, name, namespace, "Background", uid)

    async def read_pod_log(
        self,
        pod: str,
        namespace: str,
        *,
        container: str = "pytorch",
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        """A container's log so far, as text.

        :param pod: pod name.
        :param namespace: pod namespace.
        :param container: container name.
        :param tail_lines: only the last N lines.
        :param previous: the log of the container's previous run (it restarted after a failure).
        """

        async def read(api: ApiClient) -> str:
            response = await CoreV1Api(api).read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                tail_lines=tail_lines,  # type: ignore[arg-type]  # None leaves the parameter out
                previous=previous or None,  # type: ignore[arg-type]
                _preload_content=False,
                _request_timeout=self._timeout(),
            )
            # With _preload_content=False the "str" the stubs promise is the raw aiohttp response.
            return (await read_body(cast(aiohttp.ClientResponse, response))).decode("utf-8", errors="replace")

        return await self._call(ApiRequest("get", POD_LOG_RESOURCE, pod, namespace), read)

    # -- list + watch, and deletion waits ---------------------------------------------------------

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


__all__ = ["WATCH_TIMEOUT_SLACK", "AsyncGangJobHook"]
